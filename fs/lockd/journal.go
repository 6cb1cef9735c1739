package lockd

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/rdmafs/rdmafs/nfs3"
	"github.com/rdmafs/rdmafs/nfs3/nlm"
	"github.com/rdmafs/rdmafs/sunrpc"
)

// A lock manager that restarts tells its servers so (SM_NOTIFY through
// statd, or FREE_ALL), and they drop every lock of its host. rdmafs
// cannot: a server knows a client host by its address, so it would drop
// the locks of the kernel's client and of every other rdmafs on the host
// too. Instead each rdmafs keeps a journal of what it holds and waits for
// on a server, in a file of its own under Config.StateDir, and holds a
// flock(2) lock on that file while it runs. When rdmafs next mounts from
// that server, it takes each journal whose flock is free (its rdmafs is
// gone: killed, or crashed) and tells the server to drop those locks:
// CANCEL of each request that was queued, UNLOCK of the whole of each file
// for each owner. Then it removes the journal. A clean exit leaves no
// journal: its files were closed, so its locks were released.

// journalEntry is one owner's lock on one file, or its queued request.
type journalEntry struct {
	FH        string `json:"fh"` // hex
	Svid      int32  `json:"svid"`
	Offset    uint64 `json:"offset,omitempty"`
	Length    uint64 `json:"length,omitempty"`
	Exclusive bool   `json:"exclusive,omitempty"`
	Queued    bool   `json:"queued,omitempty"` // a LOCK queued on the server
	// Cred is the credential of the file it was taken through, which
	// the server opens the file with to drop it (absent: AUTH_NONE).
	Cred *sunrpc.Cred `json:"cred,omitempty"`
}

// journalState is the content of a journal file.
type journalState struct {
	Caller       string         `json:"caller"`
	CallbackPort int            `json:"callback_port,omitempty"` // registered with this host's portmapper
	Locks        []journalEntry `json:"locks"`
}

// journal is this client's journal file.
type journal struct {
	f *os.File
}

// journalDir is where the journals of the client's server are.
func (c *Client) journalDir() string {
	return filepath.Join(c.cfg.StateDir, strings.NewReplacer("/", "_", ":", "_").Replace(c.cfg.Dial.Host))
}

// openJournal creates this client's journal and takes its flock.
func (c *Client) openJournal() error {
	dir := c.journalDir()
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("lockd: journal: %w", err)
	}
	name := filepath.Join(dir, fmt.Sprintf("%d-%d.json", os.Getpid(), c.owners.base))
	f, err := os.OpenFile(name, os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return fmt.Errorf("lockd: journal: %w", err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		f.Close()
		return fmt.Errorf("lockd: journal %s: %w", name, err)
	}
	c.journal = &journal{f: f}
	return nil
}

// journalLocked writes what the client holds and waits for now. The
// caller holds c.mu.
func (c *Client) journalLocked() {
	j := c.journal
	if j == nil {
		return
	}
	st := journalState{Caller: c.cfg.CallerName}
	if c.cb != nil && c.cb.registered {
		st.CallbackPort = c.cb.port
	}
	for k := range c.held {
		st.Locks = append(st.Locks, journalEntry{FH: hex.EncodeToString([]byte(k.fh)), Svid: c.owners.bySvid[k.owner], Cred: c.creds[k]})
	}
	for w := range c.waiters {
		if w.queued {
			st.Locks = append(st.Locks, journalEntry{FH: hex.EncodeToString([]byte(w.fh)), Svid: w.svid,
				Offset: w.off, Length: w.n, Exclusive: w.exclusive, Queued: true, Cred: w.cred})
		}
	}
	b, _ := json.Marshal(&st)
	// A journal that cannot be written loses only the clean-up after a
	// crash; the locks themselves are the server's.
	if _, err := j.f.WriteAt(append(b, '\n'), 0); err == nil {
		_ = j.f.Truncate(int64(len(b) + 1))
	}
}

// closeJournal removes the journal of a client that exits cleanly.
func (c *Client) closeJournal() {
	if c.journal == nil {
		return
	}
	os.Remove(c.journal.f.Name())
	c.journal.f.Close()
}

// RecoverStale drops, on the server, the locks and queued requests of
// every rdmafs that used it from this host and is gone (see journal.go),
// and takes back a callback registration one of them left with this
// host's portmapper. It returns how many locks it dropped.
func (c *Client) RecoverStale(ctx context.Context) (int, error) {
	if c.cfg.StateDir == "" {
		return 0, nil
	}
	names, err := filepath.Glob(filepath.Join(c.journalDir(), "*.json"))
	if err != nil {
		return 0, err
	}
	dropped := 0
	var errs []error
	for _, name := range names {
		if c.journal != nil && name == c.journal.f.Name() {
			continue
		}
		n, err := c.recoverJournal(ctx, name)
		dropped += n
		if err != nil {
			errs = append(errs, err)
		}
	}
	return dropped, errors.Join(errs...)
}

func (c *Client) recoverJournal(ctx context.Context, name string) (int, error) {
	f, err := os.OpenFile(name, os.O_RDWR, 0)
	if err != nil {
		return 0, nil // taken by another rdmafs meanwhile
	}
	defer f.Close()
	if syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB) != nil {
		return 0, nil // its rdmafs runs
	}
	var st journalState
	b, err := os.ReadFile(name)
	if err == nil && len(b) > 0 {
		err = json.Unmarshal(b, &st)
	}
	if err != nil {
		os.Remove(name)
		return 0, fmt.Errorf("lockd: journal %s: %w", name, err)
	}
	cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if st.CallbackPort != 0 {
		if port, err := localPortmap(cctx, nfs3.PortmapProcGetport, nlm.Program, nlm.Version, 0); err == nil && int(port) == st.CallbackPort {
			_, _ = localPortmap(cctx, nfs3.PortmapProcUnset, nlm.Program, nlm.Version, uint32(st.CallbackPort))
		}
	}
	type fileOwner struct {
		fh   string
		svid int32
	}
	unlocked := make(map[fileOwner]bool)
	dropped := 0
	for _, e := range st.Locks {
		fh, err := hex.DecodeString(e.FH)
		if err != nil {
			continue
		}
		caller := []byte(st.Caller)
		oh := ownerHandle(e.Svid, st.Caller)
		if e.Queued {
			args := nlm.CancelArgs{Cookie: c.cookie(), Block: true, Exclusive: e.Exclusive,
				Lock: nlm.Lock{CallerName: caller, FH: fh, Owner: oh, Svid: e.Svid, Offset: e.Offset, Length: e.Length}}
			var res nlm.Res
			if err := c.call(cctx, e.Cred, nlm.ProcCancel, &args, &res); err != nil {
				return dropped, err
			}
		}
		k := fileOwner{e.FH, e.Svid}
		if unlocked[k] {
			continue
		}
		args := nlm.UnlockArgs{Cookie: c.cookie(), Lock: nlm.Lock{CallerName: caller, FH: fh, Owner: oh, Svid: e.Svid}}
		var res nlm.Res
		if err := c.call(cctx, e.Cred, nlm.ProcUnlock, &args, &res); err != nil {
			return dropped, err
		}
		unlocked[k] = true
		dropped++
	}
	os.Remove(name)
	return dropped, nil
}
