package sunrpc

import (
	"context"
	"errors"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/rdmafs/rdmafs/sunrpc/xdr"
)

// The server's tests run a Server with a small program of their own, and
// call it with this package's Client: both ends of ONC RPC.

// The test program: versions 2 and 4, served alike.
const (
	svcTestProg  = 0x20000099
	procEcho     = 1 // the argument, an opaque, back: decoded in Front, answered in a worker
	procPanic    = 2 // a bug in the procedure
	procWait     = 3 // waits in its worker until the test lets it go
	svcTestProcs = 4
)

type svcTest struct {
	srv     *Server
	addr    string
	release chan struct{} // closed to let procWait calls go
	mu      sync.Mutex
	waiting int // procWait calls in their workers
}

// startSvc serves the test program on a TCP port of 127.0.0.1.
func startSvc(t *testing.T, cfg ServerConfig) *svcTest {
	t.Helper()
	if cfg.Logf == nil {
		cfg.Logf = t.Logf
	}
	st := &svcTest{srv: NewServer(cfg), release: make(chan struct{})}
	procs := make([]Proc, svcTestProcs)
	procs[0] = NullProc
	procs[procEcho] = Proc{
		Front: func(r *Request) []byte {
			d := xdr.NewDecoder(r.Args)
			arg := d.Opaque(1 << 20)
			if d.Err() != nil {
				return AcceptedReply(r.Xid, GarbageArgs)
			}
			r.State = arg
			return nil
		},
		Serve: func(r *Request) []byte {
			w := SuccessHeader(r.Xid)
			w.Opaque(r.State.([]byte))
			return w.Buf
		},
	}
	procs[procPanic] = Proc{Serve: func(r *Request) []byte { panic("test: a bug in a procedure") }}
	procs[procWait] = Proc{Serve: func(r *Request) []byte {
		st.mu.Lock()
		st.waiting++
		st.mu.Unlock()
		<-st.release
		return AcceptedReply(r.Xid, Success)
	}}
	st.srv.Register(svcTestProg, 2, procs)
	st.srv.Register(svcTestProg, 4, procs)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	st.addr = l.Addr().String()
	done := make(chan error, 1)
	go func() { done <- st.srv.Serve(l) }()
	t.Cleanup(func() {
		select {
		case <-st.release:
		default:
			close(st.release)
		}
		st.srv.Close()
		if err := <-done; !errors.Is(err, ErrServerClosed) {
			t.Errorf("Serve after Close: %v", err)
		}
	})
	return st
}

// client returns a soft client of the test server for prog and vers.
func (st *svcTest) client(t *testing.T, prog, vers uint32) *Client {
	t.Helper()
	c := NewClient(NewTCP(TCPConfig{Addr: st.addr}), Config{Prog: prog, Vers: vers,
		Auth: Auth{Flavor: AuthSys, Machine: "testhost"}, Timeout: 5 * time.Second, Retrans: 1, Soft: true})
	t.Cleanup(func() { c.Close() })
	return c
}

// callRaw makes call proc with args as they are, and returns the reply body.
func callRaw(c *Client, proc uint32, args []byte) ([]byte, error) {
	call := c.NewCall(proc, &Cred{UID: 1000, GID: 1000})
	defer call.Release()
	e := call.Args()
	e.Buf = append(e.Buf, args...)
	call.SetArgs(e)
	if err := c.Do(context.Background(), call); err != nil {
		return nil, err
	}
	return append([]byte(nil), call.Reply.Body...), nil
}

// TestServerDispatch: calls reach their program, version and procedure,
// and what the server does not serve gets RFC 5531's refusals.
func TestServerDispatch(t *testing.T) {
	st := startSvc(t, ServerConfig{})
	var opaque xdr.Encoder
	opaque.Opaque([]byte("hello"))
	for _, vers := range []uint32{2, 4} {
		body, err := callRaw(st.client(t, svcTestProg, vers), procEcho, opaque.Buf)
		if err != nil || string(body) != string(opaque.Buf) {
			t.Errorf("echo over version %d: %q %v", vers, body, err)
		}
		if body, err := callRaw(st.client(t, svcTestProg, vers), 0, nil); err != nil || len(body) != 0 {
			t.Errorf("NULL over version %d: %q %v", vers, body, err)
		}
	}
	for _, tc := range []struct {
		name             string
		prog, vers, proc uint32
		args             []byte
		stat             AcceptStat
		low, high        uint32
	}{
		{"another program", svcTestProg + 1, 2, 0, nil, ProgUnavail, 0, 0},
		{"a version between", svcTestProg, 3, 0, nil, ProgMismatch, 2, 4},
		{"a later version", svcTestProg, 5, 0, nil, ProgMismatch, 2, 4},
		{"a procedure beyond", svcTestProg, 2, svcTestProcs, nil, ProcUnavail, 0, 0},
		{"arguments that do not decode", svcTestProg, 4, procEcho, []byte{0, 0, 0, 9, 'x'}, GarbageArgs, 0, 0},
		{"a procedure that panics", svcTestProg, 2, procPanic, nil, SystemErr, 0, 0},
	} {
		_, err := callRaw(st.client(t, tc.prog, tc.vers), tc.proc, tc.args)
		var ae *AcceptError
		if !errors.As(err, &ae) || ae.Stat != tc.stat || ae.Low != tc.low || ae.High != tc.high {
			t.Errorf("%s: %v, want %v (%d to %d)", tc.name, err, tc.stat, tc.low, tc.high)
		}
	}
	// The session goes on after all that.
	if _, err := callRaw(st.client(t, svcTestProg, 2), procEcho, opaque.Buf); err != nil {
		t.Errorf("echo after the refusals: %v", err)
	}
}

// TestServerAuthRefusals: credentials the server cannot take are denied
// with AUTH_BADCRED, an RPC version other than 2 with RPC_MISMATCH.
func TestServerAuthRefusals(t *testing.T) {
	st := startSvc(t, ServerConfig{})
	conn, err := net.Dial("tcp", st.addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	rr := &RecordReader{R: conn, MaxRecord: 1 << 20}
	call := func(rpcvers, flavor uint32, cred []byte) *DeniedError {
		var e xdr.Encoder
		e.Uint32(0) // record mark
		for _, v := range []uint32{7, MsgCall, rpcvers, svcTestProg, 2, 0, flavor} {
			e.Uint32(v)
		}
		e.Opaque(cred)
		e.Uint32(0)
		e.Uint32(0)
		PutRecordMark(e.Buf, len(e.Buf)-4)
		conn.SetDeadline(time.Now().Add(5 * time.Second))
		if _, err := conn.Write(e.Buf); err != nil {
			t.Fatal(err)
		}
		reply, err := rr.Read(nil)
		if err != nil {
			t.Fatal(err)
		}
		_, err = parseReplyHeader(reply, 7)
		var de *DeniedError
		if !errors.As(err, &de) {
			t.Fatalf("reply %x: %v, want a denial", reply, err)
		}
		return de
	}
	if de := call(3, uint32(AuthNone), nil); de.AuthError || de.Low != 2 || de.High != 2 {
		t.Errorf("RPC version 3: %+v", de)
	}
	if de := call(2, 99, nil); !de.AuthError || de.AuthStat != AuthBadCred {
		t.Errorf("an unknown flavor: %+v", de)
	}
	if de := call(2, uint32(AuthSys), []byte("four")); !de.AuthError || de.AuthStat != AuthBadCred {
		t.Errorf("a malformed AUTH_SYS body: %+v", de)
	}
}

// TestSessionAfterClose: a session of a closed server takes no more
// calls, and Serve refuses to start.
func TestSessionAfterClose(t *testing.T) {
	srv := NewServer(ServerConfig{})
	srv.Register(svcTestProg, 2, []Proc{NullProc})
	var replies [][]byte
	ss := srv.NewSession(func(r []byte, _ Placement) error { replies = append(replies, r); return nil }, Peer{Admitted: true})
	var e xdr.Encoder
	appendCallHeader(&e, 5, svcTestProg, 2, 0, &Auth{}, nil)
	if err := ss.Call(e.Buf); err != nil || len(replies) != 1 {
		t.Fatalf("NULL through a session: %v, %d replies", err, len(replies))
	}
	if _, err := parseReplyHeader(replies[0], 5); err != nil {
		t.Fatalf("NULL's reply: %v", err)
	}
	if err := ss.Call([]byte("junk")); err == nil {
		t.Fatal("junk accepted")
	}
	srv.Close()
	if err := ss.Call(e.Buf); !errors.Is(err, ErrServerClosed) {
		t.Fatalf("Call after Close: %v", err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	if err := srv.Serve(l); !errors.Is(err, ErrServerClosed) {
		t.Fatalf("Serve after Close: %v", err)
	}
}
