package sunrpc

import (
	"context"
	"errors"
	"net"
	"sync/atomic"
	"testing"
	"time"
)

// TestSoftCallAfterServerReturnsConnectsAtOnce: a server away long enough
// for the reconnect backoff to grow past a soft call's timeout, then back:
// a call made right after it is back succeeds at once, as over RDMA,
// rather than waiting out the backoff (and failing when the backoff is
// longer than all its tries).
func TestSoftCallAfterServerReturnsConnectsAtOnce(t *testing.T) {
	s := newTestServer(t, func(c *serverCall) []byte { return acceptedReply(c.xid, nil) })
	addr := s.addr()
	// timeo=10,retrans=2 as in the report: 1 s, 2 s and 3 s tries.
	tr := NewTCP(TCPConfig{Addr: addr})
	c := NewClient(tr, Config{Prog: 100003, Vers: 3, Timeout: time.Second, Retrans: 2, Soft: true})
	t.Cleanup(func() { c.Close() })
	ctx := context.Background()
	if _, err := echo(ctx, c, 1, nil, nil); err != nil {
		t.Fatal(err)
	}

	s.close()
	// Calls while the server is away: each failed connect doubles the
	// backoff, 0.1 s, 0.2 s, ... until it is longer than the next call's
	// first try.
	for start := time.Now(); tr.conns.Backoff() < 2*time.Second; {
		if _, err := echo(ctx, c, 1, nil, nil); !errors.Is(err, ErrConnect) {
			t.Fatalf("server away: %v, want ErrConnect", err)
		}
		if time.Since(start) > 30*time.Second {
			t.Fatalf("backoff %v after 30 s of refused connects", tr.conns.Backoff())
		}
	}
	backoff := tr.conns.Backoff()

	ln, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatalf("listen again on %s: %v", addr, err)
	}
	s2 := &testServer{ln: ln, handle: func(c *serverCall) []byte { return acceptedReply(c.xid, nil) }}
	s2.wg.Add(1)
	go s2.serve()
	t.Cleanup(s2.close)

	start := time.Now()
	_, err = echo(ctx, c, 1, nil, nil)
	took := time.Since(start)
	t.Logf("backoff %v to go when the server came back; the call took %v", backoff, took)
	if err != nil {
		t.Fatalf("server back (backoff %v to go): call failed after %v: %v", backoff, took, err)
	}
	if took > time.Second {
		t.Errorf("server back (backoff %v to go): call took %v, want under 1 s", backoff, took)
	}
}

// TestTCPRebindWhenServerMoves: a server that comes back on another port
// (a lock manager restarted, its port its portmapper's choice) is found
// again: the connect to the old port fails, Rebind names the new one, and
// the call is answered there.
func TestTCPRebindWhenServerMoves(t *testing.T) {
	reply := func(c *serverCall) []byte { return acceptedReply(c.xid, nil) }
	s := newTestServer(t, reply)
	var current atomic.Pointer[string]
	old := s.addr()
	current.Store(&old)
	var rebinds atomic.Int32
	tr := NewTCP(TCPConfig{Addr: old, Rebind: func(context.Context) (string, error) {
		rebinds.Add(1)
		return *current.Load(), nil
	}})
	c := NewClient(tr, Config{Prog: 100021, Vers: 4, Timeout: time.Second, Retrans: 2, Soft: true})
	t.Cleanup(func() { c.Close() })
	ctx := context.Background()
	if _, err := echo(ctx, c, 1, nil, nil); err != nil {
		t.Fatal(err)
	}

	s.close()
	moved := newTestServer(t, reply)
	now := moved.addr()
	current.Store(&now)
	if _, err := echo(ctx, c, 1, nil, nil); err != nil {
		t.Fatalf("server moved from %s to %s: %v", old, now, err)
	}
	if tr.Addr() != now {
		t.Errorf("transport's address %s after the move, want %s", tr.Addr(), now)
	}
	if rebinds.Load() == 0 {
		t.Error("Rebind never asked")
	}
}
