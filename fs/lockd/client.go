package lockd

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"strconv"
	"sync"
	"syscall"
	"time"

	"github.com/rdmafs/rdmafs/nfs3"
	"github.com/rdmafs/rdmafs/nfs3/nlm"
	"github.com/rdmafs/rdmafs/sunrpc"
)

// ErrNoNLM is wrapped by Dial's error when the server's portmapper has no
// NLM version 4 over TCP registered.
var ErrNoNLM = errors.New("the server offers no lock manager (NLM version 4 over TCP)")

// Config is what Dial needs.
type Config struct {
	// Dial reaches the server's portmapper (its Port is ignored).
	Dial nfs3.DialConfig
	// Port is the server's NLM port; 0 asks its portmapper.
	Port int
	// CallerName names this host to the server (caller_name); default
	// the node name.
	CallerName string
	// StateDir, if set, holds the journals by which the locks of an
	// rdmafs that died are dropped at the next mount (journal.go).
	StateDir string
	// Logf receives what an administrator should know once (polling, a
	// server restart, a reclaim that failed).
	Logf func(format string, args ...any)
}

// Client takes locks on one server's lock manager for one mount. It is
// safe for concurrent use.
type Client struct {
	cfg    Config
	rpc    *sunrpc.Client
	caller []byte

	mu      sync.Mutex
	owners  owners
	held    map[heldKey]heldSet      // by file and owner
	creds   map[heldKey]*sunrpc.Cred // of held's files, which a reclaim sends again
	waiters map[*waiter]struct{}
	grace   chan struct{} // closed when a reclaim ends; nil: none under way

	journal   *journal  // nil without Config.StateDir
	cb        *callback // nil until ServeCallbacks
	callbacks bool      // the server can call back: waiting locks are queued
	quit      chan struct{}
	// bg is the context of the calls the client makes on its own
	// (reclaims, the server's state, GRANTED_RES); Close ends it.
	bg        context.Context
	stopBG    context.CancelFunc
	closeOnce sync.Once
	wg        sync.WaitGroup
}

// heldKey names an owner's locks on one file.
type heldKey struct {
	fh    string
	owner uint64
}

// Dial finds the server's lock manager and returns a client of it. The
// connection is made at the first call.
func Dial(ctx context.Context, cfg Config) (*Client, error) {
	port := cfg.Port
	if port == 0 {
		var err error
		port, err = nfs3.GetPort(ctx, cfg.Dial, nlm.Program, nlm.Version)
		if err != nil {
			if errors.Is(err, nfs3.ErrNotRegistered) {
				return nil, fmt.Errorf("server %s: %w", cfg.Dial.Host, ErrNoNLM)
			}
			return nil, fmt.Errorf("lockd: %w", err)
		}
	}
	if cfg.CallerName == "" {
		cfg.CallerName, _ = os.Hostname()
	}
	tc := sunrpc.TCPConfig{
		Addr:         net.JoinHostPort(cfg.Dial.Host, strconv.Itoa(port)),
		ReservedPort: cfg.Dial.ReservedPort,
		MaxRecord:    64 << 10,
		Logf:         cfg.Logf,
	}
	if cfg.Port == 0 {
		// A restarted lockd may listen on another port: ask the
		// server's portmapper again when the old one refuses, as the
		// kernel's client does.
		tc.Rebind = func(ctx context.Context) (string, error) {
			port, err := nfs3.GetPort(ctx, cfg.Dial, nlm.Program, nlm.Version)
			if err != nil {
				return "", err
			}
			return net.JoinHostPort(cfg.Dial.Host, strconv.Itoa(port)), nil
		}
	}
	t := sunrpc.NewTCP(tc)
	timeout := cfg.Dial.Timeout
	if timeout <= 0 {
		timeout = 10 * time.Second
	}
	c := &Client{
		cfg: cfg,
		// Hard, as the kernel's lock calls are: a call ends when it is
		// answered or its context (the FUSE request) ends.
		rpc: sunrpc.NewClient(t, sunrpc.Config{
			Prog: nlm.Program, Vers: nlm.Version, Auth: cfg.Dial.Auth, Timeout: timeout, Retrans: 2,
			Server: cfg.Dial.Host, ProcNames: StatNames, Logf: cfg.Logf,
		}),
		caller:  []byte(cfg.CallerName),
		held:    make(map[heldKey]heldSet),
		creds:   make(map[heldKey]*sunrpc.Cred),
		waiters: make(map[*waiter]struct{}),
		quit:    make(chan struct{}),
	}
	c.bg, c.stopBG = context.WithCancel(context.Background())
	c.owners.init()
	if cfg.StateDir != "" {
		if err := c.openJournal(); err != nil {
			// Locks work without: only the clean-up after a crash
			// is lost.
			c.logf("%v: the locks of this rdmafs will not be dropped by the next if it dies holding them", err)
		}
	}
	return c, nil
}

// StatNames name the NLM procedures in `rdmafs stats`, after the NFS
// ones: "NLM_" and Linux's lockd's names, so that none is taken for an NFS
// procedure's.
var StatNames = func() []string {
	n := make([]string, len(nlm.ProcNames))
	for i, p := range nlm.ProcNames {
		n[i] = "NLM_" + p
	}
	return n
}()

// RPC returns the client's RPC client, whose procedure counts `rdmafs
// stats` shows.
func (c *Client) RPC() *sunrpc.Client { return c.rpc }

// Close stops the callback service and closes the connection. Locks still
// held stay on the server until it learns of this host's restart.
func (c *Client) Close() error {
	c.closeOnce.Do(func() {
		close(c.quit)
		c.stopBG()
		if c.cb != nil {
			c.cb.close()
		}
		c.wg.Wait()
		c.rpc.Close()
		c.mu.Lock()
		c.closeJournal()
		c.mu.Unlock()
	})
	return nil
}

// Conflict is the lock that a TEST found in the way.
type Conflict struct {
	Range
	Exclusive bool
	// Pid is the process of this host that holds it, or 0 for another
	// host's lock: the kernel's client reports those as the negative
	// svid, which FUSE cannot carry.
	Pid uint32
}

// lock builds the nlm4_lock of owner's range r of file fh. The caller
// holds c.mu.
func (c *Client) lockLocked(fh []byte, owner uint64, r Range) nlm.Lock {
	svid := c.owners.svid(owner)
	off, n := toNLM(r)
	return nlm.Lock{CallerName: c.caller, FH: fh, Owner: ownerHandle(svid, c.cfg.CallerName), Svid: svid, Offset: off, Length: n}
}

func (c *Client) nlmLock(fh []byte, owner uint64, r Range) nlm.Lock {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.lockLocked(fh, owner, r)
}

// toNLM converts an inclusive range to NLM's offset and length (0: to the
// end of the file).
func toNLM(r Range) (off, n uint64) {
	if r.End >= MaxOffset {
		return r.Start, 0
	}
	return r.Start, r.End - r.Start + 1
}

// fromNLM converts NLM's offset and length to an inclusive range.
func fromNLM(off, n uint64) Range {
	if n == 0 || off+n-1 >= MaxOffset || off+n < off {
		return Range{off, MaxOffset}
	}
	return Range{off, off + n - 1}
}

// call makes procedure proc with credential cred and decodes its result
// into res (nil: void).
//
// A call about a file carries the credential of the process that opened
// the file, as the kernel's client sends (nfs_file_cred): the server opens
// the file with it to lock it, checking that the caller may (or owns the
// file), and since Linux 6.13 it refuses AUTH_NONE there (its NLM calls
// are checked against the export's security flavors). A nil cred sends
// AUTH_NONE.
func (c *Client) call(ctx context.Context, cred *sunrpc.Cred, proc uint32, args, res nlm.Message) error {
	call := c.rpc.NewCall(proc, cred)
	defer call.Release()
	e := call.Args()
	args.Encode(&e)
	call.SetArgs(e)
	if err := c.rpc.Do(ctx, call); err != nil {
		return fmt.Errorf("lockd: %s: %w", nlm.ProcNames[proc], err)
	}
	if res == nil {
		return nil
	}
	if err := nlm.Unmarshal(call.Reply.Body, res); err != nil {
		return fmt.Errorf("lockd: %s reply: %w", nlm.ProcNames[proc], err)
	}
	return nil
}

// StatError is an NLM status other than NLM4_GRANTED.
type StatError struct {
	Proc string
	Stat nlm.Stat
}

func (e *StatError) Error() string { return fmt.Sprintf("lockd: %s: %v", e.Proc, e.Stat) }

// Errno returns the errno a program gets for err, as Linux's
// nlm_stat_to_errno: EAGAIN for a conflicting lock, ENOLCK when the server
// cannot take locks or could not be asked, EINTR when the request was
// interrupted.
func Errno(err error) syscall.Errno {
	if err == nil {
		return 0
	}
	var se *StatError
	if errors.As(err, &se) {
		switch se.Stat {
		case nlm.StatDenied:
			return syscall.EAGAIN
		case nlm.StatDeadlock:
			return syscall.EDEADLK
		case nlm.StatROFS:
			return syscall.EROFS
		case nlm.StatStaleFH:
			return syscall.ESTALE
		case nlm.StatFBig:
			return syscall.EOVERFLOW
		}
		return syscall.ENOLCK
	}
	if errors.Is(err, context.Canceled) || errors.Is(err, errInterrupted) {
		return syscall.EINTR
	}
	return syscall.ENOLCK
}

// Test asks whether owner could lock r of fh, opened with cred; it
// returns the lock in the way, or nil. As the kernel's client does, it
// looks first among the fcntl locks that this client's other owners hold,
// and names the process of the one it finds; only if none is in the way
// does it ask the server.
func (c *Client) Test(ctx context.Context, cred *sunrpc.Cred, fh []byte, owner uint64, r Range, exclusive bool) (*Conflict, error) {
	if local := c.localConflict(fh, owner, r, exclusive); local != nil {
		return local, nil
	}
	for {
		args := nlm.TestArgs{Cookie: c.cookie(), Exclusive: exclusive, Lock: c.nlmLock(fh, owner, r)}
		var res nlm.TestRes
		if err := c.call(ctx, cred, nlm.ProcTest, &args, &res); err != nil {
			return nil, err
		}
		switch res.Stat {
		case nlm.StatGranted:
			return nil, nil
		case nlm.StatDenied:
			h := &res.Holder
			return &Conflict{Range: fromNLM(h.Offset, h.Length), Exclusive: h.Exclusive}, nil
		case nlm.StatDeniedGracePeriod:
			if err := c.graceWait(ctx); err != nil {
				return nil, err
			}
			continue
		}
		return nil, &StatError{"TEST", res.Stat}
	}
}

// localConflict returns the first fcntl lock of another owner of this
// client on fh that is in the way of owner's lock of r, or nil.
func (c *Client) localConflict(fh []byte, owner uint64, r Range, exclusive bool) *Conflict {
	c.mu.Lock()
	defer c.mu.Unlock()
	var found *Conflict
	for k, h := range c.held {
		holder := c.owners.holders[k.owner]
		if k.owner == owner || k.fh != string(fh) || !holder.Posix {
			continue
		}
		for _, s := range h {
			if s.End < r.Start || s.Start > r.End || !exclusive && !s.Exclusive {
				continue
			}
			// The lowest in the file, whatever the map's order.
			if found == nil || s.Start < found.Start {
				found = &Conflict{Range: s.Range, Exclusive: s.Exclusive, Pid: holder.Pid}
			}
		}
	}
	return found
}

// Unlock releases owner's locks in r of fh, opened with cred.
func (c *Client) Unlock(ctx context.Context, cred *sunrpc.Cred, fh []byte, owner uint64, r Range) error {
	key := heldKey{string(fh), owner}
	c.mu.Lock()
	had := len(c.held[key]) > 0
	c.mu.Unlock()
	if !had {
		// Nothing held there: the server has nothing to drop either
		// (the kernel's client sends nothing for such an unlock).
		return nil
	}
	for {
		args := nlm.UnlockArgs{Cookie: c.cookie(), Lock: c.nlmLock(fh, owner, r)}
		var res nlm.Res
		if err := c.call(ctx, cred, nlm.ProcUnlock, &args, &res); err != nil {
			return err
		}
		switch res.Stat {
		case nlm.StatGranted, nlm.StatDenied:
			// DENIED: the server held nothing there (after its
			// restart); the lock is gone either way.
			c.setHeld(key, cred, r, false, true)
			return nil
		case nlm.StatDeniedGracePeriod:
			if err := c.graceWait(ctx); err != nil {
				return err
			}
			continue
		}
		return &StatError{"UNLOCK", res.Stat}
	}
}

// setHeld records a lock (or an unlock) that the server granted to a call
// with credential cred.
func (c *Client) setHeld(key heldKey, cred *sunrpc.Cred, r Range, ex, unlock bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	defer c.journalLocked()
	h := c.held[key].set(r, ex, unlock)
	if len(h) == 0 {
		delete(c.held, key)
		delete(c.creds, key)
		c.forgetOwnerLocked(key.owner)
		return
	}
	c.held[key] = h
	if !unlock {
		c.creds[key] = cloneCred(cred)
	}
}

// cloneCred returns a copy of cred (nil for nil) that its owner's later
// changes leave alone.
func cloneCred(cred *sunrpc.Cred) *sunrpc.Cred {
	if cred == nil {
		return nil
	}
	cp := *cred
	cp.Groups = append([]uint32(nil), cred.Groups...)
	return &cp
}

// forgetOwnerLocked lets an owner that holds nothing and waits for nothing
// go, so that the map does not grow with every process that ever locked.
func (c *Client) forgetOwnerLocked(owner uint64) {
	for k := range c.held {
		if k.owner == owner {
			return
		}
	}
	for w := range c.waiters {
		if w.owner == owner {
			return
		}
	}
	delete(c.owners.bySvid, owner)
	delete(c.owners.holders, owner)
}

// Held reports whether owner holds any lock on fh.
func (c *Client) Held(fh []byte, owner uint64) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.held[heldKey{string(fh), owner}]) > 0
}

// cookie returns a fresh cookie; the server sends it back unchanged.
func (c *Client) cookie() []byte {
	var b [8]byte
	n := time.Now().UnixNano()
	for i := range b {
		b[i] = byte(n >> (8 * i))
	}
	return b[:]
}
