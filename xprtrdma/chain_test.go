package xprtrdma

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/rdmafs/rdmafs/nfs3"
	"github.com/rdmafs/rdmafs/svcrdma"
	"github.com/rdmafs/rdmafs/verbs"
)

// postLog is the soft provider seen from above: every PostSend of the
// client's connections (the chain's opcodes) and every protection
// domain's Close. With failNext, the next chain that binds a window and
// ends in a SEND posts only its first work request, and PostSend says so,
// as a device that refuses the second would.
type postLog struct {
	verbs.Provider

	mu       sync.Mutex
	posts    []string
	failNext bool
	failed   bool
	pds      int     // allocated
	closes   []error // PD.Close results
}

func (l *postLog) Open(ctx context.Context, name, addr string) (verbs.Device, error) {
	d, err := l.Provider.Open(ctx, name, addr)
	if err != nil {
		return nil, err
	}
	return loggedDevice{d, l}, nil
}

type loggedDevice struct {
	verbs.Device
	l *postLog
}

func (d loggedDevice) AllocPD() (verbs.PD, error) {
	pd, err := d.Device.AllocPD()
	if err != nil {
		return nil, err
	}
	d.l.mu.Lock()
	d.l.pds++
	d.l.mu.Unlock()
	return loggedPD{pd, d.l}, nil
}

type loggedPD struct {
	verbs.PD
	l *postLog
}

func (p loggedPD) Dial(ctx context.Context, addr string, cfg verbs.ConnConfig) (verbs.Conn, error) {
	c, err := p.PD.Dial(ctx, addr, cfg)
	if err != nil {
		return nil, err
	}
	return loggedConn{c, p.l}, nil
}

func (p loggedPD) Close() error {
	err := p.PD.Close()
	p.l.mu.Lock()
	p.l.closes = append(p.l.closes, err)
	p.l.mu.Unlock()
	return err
}

type loggedConn struct {
	verbs.Conn
	l *postLog
}

func (c loggedConn) PostSend(wr *verbs.SendWR) error {
	var ops []string
	for w := wr; w != nil; w = w.Next {
		ops = append(ops, w.Opcode.String())
	}
	chain := strings.Join(ops, " ")
	c.l.mu.Lock()
	c.l.posts = append(c.l.posts, chain)
	fail := c.l.failNext && len(ops) > 1 && ops[0] == "BIND_MW" && ops[len(ops)-1] == "SEND"
	if fail {
		c.l.failNext, c.l.failed = false, true
	}
	c.l.mu.Unlock()
	if fail {
		next := wr.Next
		wr.Next = nil
		err := c.Conn.PostSend(wr)
		wr.Next = next
		if err != nil {
			return err
		}
		return &verbs.VerbError{Verb: "post_send", Err: &verbs.PostError{Posted: 1, Err: syscall.EIO}}
	}
	return c.Conn.PostSend(wr)
}

// count returns how many posts were chain.
func (l *postLog) count(chain string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := 0
	for _, p := range l.posts {
		if p == chain {
			n++
		}
	}
	return n
}

// TestBindsChainedWithSend: with memory windows, a call's binds go in one
// post with its Send, chained before it, as the kernel's frwr_send posts
// its registrations: a READ (write chunk), a WRITE (read chunk), a
// READDIRPLUS (reply chunk), and a call too large for the Send whose reply
// may be large too (a position-zero read chunk and a reply chunk: two
// binds). No bind is posted on its own, and the counters count every bind
// posted.
func TestBindsChainedWithSend(t *testing.T) {
	b := newTestBed(t, svcrdma.Config{})
	log := &postLog{Provider: b.prov}
	c, tr := b.client(t, Config{MemReg: MemRegMW, Provider: log})
	ctx := context.Background()
	fh := b.create(t, c, "f")

	data := randomBytes(1 << 20)
	buf := payload(t, tr, data)
	var wres nfs3.WriteResult
	if err := c.Write(ctx, root, &fh, 0, buf.B, nfs3.FileSync, &wres); err != nil {
		t.Fatal(err)
	}
	buf.Release()
	var rres nfs3.ReadResult
	if err := c.Read(ctx, root, &fh, 0, 1<<20, &rres); err != nil {
		t.Fatal(err)
	}
	same := bytes.Equal(rres.Data, data)
	rres.Release()
	if !same {
		t.Fatal("read back differs")
	}
	var attr nfs3.Fattr
	if err := c.Getattr(ctx, root, &fh, &attr); err != nil {
		t.Fatal(err)
	}
	dir := b.bigDir(t, c, 300)
	if _, err := c.Readdirplus(ctx, root, &dir, 0, nfs3.Verf{}, 32768, 65536, func(*nfs3.DirEntry) {}); err != nil {
		t.Fatal(err)
	}
	rpc := c.RPC()
	call := rpc.NewCall(nfs3.ProcNull, nil)
	call.Head = append(call.Head, make([]byte, 8192)...)
	call.ReplyMax = 65536
	if err := rpc.Do(ctx, call); err != nil {
		t.Fatal(err)
	}
	call.Release()

	log.mu.Lock()
	posts := append([]string(nil), log.posts...)
	log.mu.Unlock()
	binds := 0
	for _, p := range posts {
		n := strings.Count(p, "BIND_MW")
		binds += n
		if n > 0 && !strings.HasSuffix(p, " SEND") {
			t.Errorf("post [%s]: binds not chained before a Send", p)
		}
	}
	t.Logf("posts: %q", posts)
	if got := log.count("BIND_MW SEND"); got < 3 {
		t.Errorf("%d posts of [BIND_MW SEND], want one for each of the READ, the WRITE and the READDIRPLUS", got)
	}
	if got := log.count("BIND_MW BIND_MW SEND"); got != 1 {
		t.Errorf("%d posts of [BIND_MW BIND_MW SEND], want 1 (the call with two chunks)", got)
	}
	if got := log.count("SEND"); got < 3 {
		t.Errorf("%d posts of a Send alone, want the inline calls' (CREATE, GETATTR, LOOKUP)", got)
	}
	s := &tr.stats
	if counted := s.mwReused.Load() + s.mwAllocated.Load(); counted != uint64(binds) {
		t.Errorf("the counters say %d windows bound, %d binds were posted", counted, binds)
	}
}

// TestChainedPostFails: the device takes a call's bind but refuses the
// Send chained after it. The connection is dropped, the call goes again
// on a new one and reads the right data, and every window, the one bound
// and never used included, is closed with its connection: the protection
// domains close without a window left in them.
func TestChainedPostFails(t *testing.T) {
	b := newTestBed(t, svcrdma.Config{})
	log := &postLog{Provider: b.prov}
	c, tr := b.client(t, Config{MemReg: MemRegMW, Provider: log})
	ctx := context.Background()
	fh := b.create(t, c, "f")
	data := randomBytes(1 << 20)
	if err := os.WriteFile(filepath.Join(b.dir, "f"), data, 0o644); err != nil {
		t.Fatal(err)
	}

	log.mu.Lock()
	log.failNext = true
	log.mu.Unlock()
	var rres nfs3.ReadResult
	if err := c.Read(ctx, root, &fh, 0, 1<<20, &rres); err != nil {
		t.Fatalf("READ whose first Send was refused: %v", err)
	}
	same := bytes.Equal(rres.Data, data)
	rres.Release()
	if !same {
		t.Fatal("READ whose first Send was refused: other data")
	}
	log.mu.Lock()
	failed := log.failed
	log.mu.Unlock()
	if !failed {
		t.Fatal("no chain of a bind and a Send was posted: nothing was refused")
	}
	if n := tr.stats.ConnectCount.Load(); n != 2 {
		t.Errorf("%d connections, want 2: the refused post drops the first", n)
	}

	c.RPC().Close()
	deadline := time.Now().Add(20 * time.Second)
	for {
		log.mu.Lock()
		pds, closes := log.pds, append([]error(nil), log.closes...)
		log.mu.Unlock()
		if len(closes) >= pds {
			for _, err := range closes {
				if err != nil {
					t.Errorf("closing a connection's protection domain: %v", err)
				}
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d protection domains closed after 20 s", len(closes), pds)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestExposeRefusesThirdChunk: a call has room for the binds of two
// chunks (plan gives it at most two); a third is refused, not posted
// apart or dropped.
func TestExposeRefusesThirdChunk(t *testing.T) {
	r := &request{nbinds: maxChunks}
	_, err := (&windows{}).expose(r, 0, 4096, verbs.AccessRemoteWrite)
	if err == nil || !strings.Contains(err.Error(), "at most 2 chunks") {
		t.Fatalf("a third chunk's window: %v, want an error saying a call exposes at most 2 chunks", err)
	}
	if r.nbinds != maxChunks || len(r.mws) != 0 {
		t.Fatalf("the refused chunk left %d binds and %d windows, want %d and none", r.nbinds, len(r.mws), maxChunks)
	}
}
