package server

import (
	"errors"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/rdmafs/rdmafs/nfs3"
	"github.com/rdmafs/rdmafs/sunrpc"
)

func TestParallelCallsOnOneConnection(t *testing.T) {
	const n = 4
	root := exportDir(t)
	srv, err := New(Options{Root: root, Export: trusted, Workers: n, Logf: t.Logf})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Close() })
	// Every GETATTR waits in its worker until n of them are in service at
	// once; served one at a time they never would be.
	var mu sync.Mutex
	arrived := 0
	all := make(chan struct{})
	srv.testHook = func(_ *worker, c *call) {
		if c.proc != nfs3.ProcGetattr {
			return
		}
		mu.Lock()
		arrived++
		if arrived == n {
			close(all)
		}
		mu.Unlock()
		select {
		case <-all:
		case <-time.After(10 * time.Second):
		}
	}
	c := dialServer(t, serveOn(t, srv))
	rootFH := c.root()
	start := time.Now()
	for i := 0; i < n; i++ {
		c.send(nfs3.Program, nfs3.Version, nfs3.ProcGetattr, asRoot, fhArg(rootFH).Buf)
	}
	for i := 0; i < n; i++ {
		rep, err := c.readReply()
		if err != nil || rep.stat != uint32(sunrpc.Success) || getStatus(decoder(rep.body)) != nfs3.OK {
			t.Fatalf("reply %d: %+v %v", i, rep, err)
		}
	}
	select {
	case <-all:
	default:
		t.Fatalf("the %d calls were not in service at the same time", n)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Fatalf("calls took %v: served one after another", d)
	}
}

// A call whose service panics (a bug) gets SYSTEM_ERR; the session and its
// worker go on serving.
func TestPanicInCall(t *testing.T) {
	srv, err := New(Options{Root: exportDir(t), Export: trusted, Workers: 1, Logf: t.Logf})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Close() })
	const doomed = 0x7777
	srv.testHook = func(_ *worker, c *call) {
		if c.xid == doomed {
			panic("test: a bug in a procedure")
		}
	}
	c := dialServer(t, serveOn(t, srv))
	rootFH := c.root()
	c.sendRecord(encodeCall(doomed, nfs3.Program, nfs3.Version, nfs3.ProcGetattr, asRoot, fhArg(rootFH).Buf))
	if rep, err := c.readReply(); err != nil || rep.xid != doomed || rep.stat != uint32(sunrpc.SystemErr) {
		t.Fatalf("reply to the panicking call: %+v %v", rep, err)
	}
	for i := 0; i < 3; i++ {
		if st, _ := c.getattr(asRoot, rootFH); st != nfs3.OK {
			t.Fatalf("GETATTR after the panic: %d", st)
		}
	}
}

func TestSessionAfterClose(t *testing.T) {
	srv, _ := startServer(t, Options{Root: exportDir(t), Export: trusted})
	var replies [][]byte
	ss := srv.NewSession(func(r []byte) error { replies = append(replies, r); return nil })
	if err := ss.Call(encodeCall(5, nfs3.Program, nfs3.Version, 0, asRoot, nil)); err != nil || len(replies) != 1 {
		t.Fatalf("NULL through a session: %v, %d replies", err, len(replies))
	}
	if err := ss.Call([]byte("junk")); err == nil {
		t.Fatal("junk accepted")
	}
	srv.Close()
	if err := ss.Call(encodeCall(6, nfs3.Program, nfs3.Version, 0, asRoot, nil)); !errors.Is(err, ErrClosed) {
		t.Fatalf("Call after Close: %v", err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	if err := srv.Serve(l); !errors.Is(err, ErrClosed) {
		t.Fatalf("Serve after Close: %v", err)
	}
}
