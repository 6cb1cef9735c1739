package sunrpc

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"io"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rdmafs/rdmafs/sunrpc/xdr"
)

// testServer is a minimal RPC server: handle returns the results of a call,
// or nil to leave the call unanswered.
type testServer struct {
	ln     net.Listener
	handle func(c *serverCall) []byte
	conns  atomic.Int32
	wg     sync.WaitGroup
	mu     sync.Mutex
	open   []net.Conn
}

type serverCall struct {
	xid, prog, vers, proc uint32
	flavor                uint32
	cred                  []byte
	args                  []byte
	conn                  int32 // connection number, from 1
}

func newTestServer(t *testing.T, handle func(c *serverCall) []byte) *testServer {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := &testServer{ln: ln, handle: handle}
	s.wg.Add(1)
	go s.serve()
	t.Cleanup(s.close)
	return s
}

func (s *testServer) addr() string { return s.ln.Addr().String() }

func (s *testServer) close() {
	s.ln.Close()
	s.dropConns()
	s.wg.Wait()
}

func (s *testServer) dropConns() {
	s.mu.Lock()
	for _, c := range s.open {
		c.Close()
	}
	s.open = nil
	s.mu.Unlock()
}

func (s *testServer) serve() {
	defer s.wg.Done()
	for {
		nc, err := s.ln.Accept()
		if err != nil {
			return
		}
		n := s.conns.Add(1)
		s.mu.Lock()
		s.open = append(s.open, nc)
		s.mu.Unlock()
		s.wg.Add(1)
		go func() {
			defer s.wg.Done()
			s.serveConn(nc, n)
		}()
	}
}

func (s *testServer) serveConn(nc net.Conn, n int32) {
	defer nc.Close()
	br := bufio.NewReader(nc)
	var wmu sync.Mutex
	for {
		var mark [4]byte
		if _, err := io.ReadFull(br, mark[:]); err != nil {
			return
		}
		rec := make([]byte, binary.BigEndian.Uint32(mark[:])&0x7fffffff)
		if _, err := io.ReadFull(br, rec); err != nil {
			return
		}
		d := xdr.NewDecoder(rec)
		c := &serverCall{conn: n}
		c.xid = d.Uint32()
		d.Uint32() // CALL
		d.Uint32() // rpcvers
		c.prog, c.vers, c.proc = d.Uint32(), d.Uint32(), d.Uint32()
		c.flavor = d.Uint32()
		c.cred = d.Opaque(400)
		d.Uint32()
		d.Opaque(400)
		c.args = d.Rest()
		go func() {
			res := s.handle(c)
			if res == nil {
				return
			}
			wmu.Lock()
			defer wmu.Unlock()
			nc.Write(res)
		}()
	}
}

// acceptedReply frames a successful reply to xid carrying results.
func acceptedReply(xid uint32, results []byte) []byte {
	var e xdr.Encoder
	e.Uint32(0) // record mark, set below
	e.Uint32(xid)
	e.Uint32(MsgReply)
	e.Uint32(MsgAccepted)
	e.Uint32(0)
	e.Uint32(0)
	e.Uint32(uint32(Success))
	e.Buf = append(e.Buf, results...)
	binary.BigEndian.PutUint32(e.Buf, 1<<31|uint32(len(e.Buf)-4))
	return e.Buf
}

func newTestClient(t *testing.T, addr string, cfg Config) *Client {
	t.Helper()
	if cfg.Prog == 0 {
		cfg.Prog, cfg.Vers = 100003, 3
	}
	if cfg.Timeout == 0 {
		cfg.Timeout = 5 * time.Second
	}
	cfg.Auth = Auth{Flavor: AuthSys, Machine: "testhost"}
	c := NewClient(NewTCP(TCPConfig{Addr: addr}), cfg)
	t.Cleanup(func() { c.Close() })
	return c
}

// echo calls proc with args and returns the reply body.
func echo(ctx context.Context, c *Client, proc uint32, args []byte, cred *Cred) ([]byte, error) {
	call := c.NewCall(proc, cred)
	defer call.Release()
	e := call.Args()
	e.Opaque(args)
	call.SetArgs(e)
	if err := c.Do(ctx, call); err != nil {
		return nil, err
	}
	return append([]byte(nil), call.Reply.Body...), nil
}

func TestManyCallsInFlightOutOfOrder(t *testing.T) {
	// The server answers each call after a delay that shrinks with its
	// argument, so replies come back in the reverse order of the calls.
	s := newTestServer(t, func(c *serverCall) []byte {
		d := xdr.NewDecoder(c.args)
		arg := d.Opaque(100)
		time.Sleep(time.Duration(100-int(arg[0])) * time.Millisecond)
		return acceptedReply(c.xid, c.args)
	})
	c := newTestClient(t, s.addr(), Config{})
	var wg sync.WaitGroup
	errs := make(chan error, 100)
	for i := 0; i < 100; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			body, err := echo(context.Background(), c, 1, []byte{byte(i), 1, 2, 3, 4}, nil)
			if err != nil {
				errs <- err
				return
			}
			d := xdr.NewDecoder(body)
			if got := d.Opaque(100); len(got) != 5 || got[0] != byte(i) {
				errs <- errors.New("reply of another call")
			}
		}(i)
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if n := s.conns.Load(); n != 1 {
		t.Errorf("%d connections, want 1", n)
	}
}

func TestAuthSysCredential(t *testing.T) {
	got := make(chan *serverCall, 1)
	s := newTestServer(t, func(c *serverCall) []byte {
		got <- c
		return acceptedReply(c.xid, nil)
	})
	c := newTestClient(t, s.addr(), Config{})
	groups := make([]uint32, 20)
	for i := range groups {
		groups[i] = uint32(100 + i)
	}
	if _, err := echo(context.Background(), c, 1, nil, &Cred{UID: 1000, GID: 50, Groups: groups}); err != nil {
		t.Fatal(err)
	}
	sc := <-got
	if sc.flavor != uint32(AuthSys) {
		t.Fatalf("flavor %d", sc.flavor)
	}
	d := xdr.NewDecoder(sc.cred)
	d.Uint32() // stamp
	machine := d.Opaque(255)
	uid, gid := d.Uint32(), d.Uint32()
	n := d.Uint32()
	if string(machine) != "testhost" || uid != 1000 || gid != 50 || n != MaxGroups {
		t.Fatalf("cred machine %q uid %d gid %d groups %d", machine, uid, gid, n)
	}
	for i := 0; i < MaxGroups; i++ {
		if g := d.Uint32(); g != uint32(100+i) {
			t.Fatalf("group %d = %d", i, g)
		}
	}
	if d.Err() != nil || d.Len() != 0 {
		t.Fatalf("cred body: %v, %d bytes left", d.Err(), d.Len())
	}
}

func TestTimeoutResendsOnNewConnectionWithSameXid(t *testing.T) {
	var mu sync.Mutex
	seen := map[uint32][]int32{} // xid -> connections it arrived on
	s := newTestServer(t, func(c *serverCall) []byte {
		mu.Lock()
		seen[c.xid] = append(seen[c.xid], c.conn)
		mu.Unlock()
		if c.conn == 1 {
			return nil // the first connection loses every call
		}
		return acceptedReply(c.xid, nil)
	})
	c := newTestClient(t, s.addr(), Config{Timeout: 200 * time.Millisecond, Retrans: 3})
	if _, err := echo(context.Background(), c, 1, nil, nil); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(seen) != 1 {
		t.Fatalf("%d xids seen, want 1", len(seen))
	}
	for _, conns := range seen {
		if len(conns) != 2 || conns[0] != 1 || conns[1] != 2 {
			t.Fatalf("call went out on connections %v, want [1 2]", conns)
		}
	}
	if n := c.opStats(1).Timeouts.Load(); n != 1 {
		t.Errorf("timeouts = %d, want 1", n)
	}
}

func TestSoftMountFailsAfterRetrans(t *testing.T) {
	var calls atomic.Int32
	s := newTestServer(t, func(c *serverCall) []byte {
		calls.Add(1)
		return nil
	})
	c := newTestClient(t, s.addr(), Config{Timeout: 50 * time.Millisecond, Retrans: 2, Soft: true})
	_, err := echo(context.Background(), c, 1, nil, nil)
	if !errors.Is(err, ErrTimeout) {
		t.Fatalf("err = %v, want ErrTimeout", err)
	}
	if n := calls.Load(); n != 3 {
		t.Errorf("call sent %d times, want 3 (1 + retrans 2)", n)
	}
}

func TestHardMountRidesThroughServerRestart(t *testing.T) {
	s := newTestServer(t, func(c *serverCall) []byte { return acceptedReply(c.xid, nil) })
	addr := s.addr()
	var logs []string
	var lmu sync.Mutex
	c := newTestClient(t, addr, Config{Timeout: 100 * time.Millisecond, Retrans: 1, Logf: func(f string, a ...any) {
		lmu.Lock()
		logs = append(logs, f)
		lmu.Unlock()
	}})
	if _, err := echo(context.Background(), c, 1, nil, nil); err != nil {
		t.Fatal(err)
	}
	s.close()
	done := make(chan error, 1)
	go func() {
		_, err := echo(context.Background(), c, 1, nil, nil)
		done <- err
	}()
	time.Sleep(700 * time.Millisecond)
	select {
	case err := <-done:
		t.Fatalf("call returned while the server was down: %v", err)
	default:
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		t.Skipf("cannot listen again on %s: %v", addr, err)
	}
	s2 := &testServer{ln: ln, handle: func(c *serverCall) []byte { return acceptedReply(c.xid, nil) }}
	s2.wg.Add(1)
	go s2.serve()
	defer s2.close()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("call did not complete after the server came back")
	}
	lmu.Lock()
	defer lmu.Unlock()
	if len(logs) < 2 {
		t.Errorf("log %q, want not responding then OK", logs)
	}
}

func TestServerRefusals(t *testing.T) {
	s := newTestServer(t, func(c *serverCall) []byte {
		var e xdr.Encoder
		e.Uint32(0)
		e.Uint32(c.xid)
		e.Uint32(MsgReply)
		switch c.proc {
		case 1: // PROG_MISMATCH 3..3
			e.Uint32(MsgAccepted)
			e.Uint32(0)
			e.Uint32(0)
			e.Uint32(uint32(ProgMismatch))
			e.Uint32(3)
			e.Uint32(3)
		case 2: // AUTH_ERROR, AUTH_BADCRED
			e.Uint32(MsgDenied)
			e.Uint32(1)
			e.Uint32(1)
		case 3: // truncated
			e.Uint32(MsgAccepted)
		case 4: // PROC_UNAVAIL
			e.Uint32(MsgAccepted)
			e.Uint32(0)
			e.Uint32(0)
			e.Uint32(uint32(ProcUnavail))
		}
		binary.BigEndian.PutUint32(e.Buf, 1<<31|uint32(len(e.Buf)-4))
		return e.Buf
	})
	c := newTestClient(t, s.addr(), Config{})
	var ae *AcceptError
	if _, err := echo(context.Background(), c, 1, nil, nil); !errors.As(err, &ae) || ae.Stat != ProgMismatch || ae.Low != 3 {
		t.Errorf("prog mismatch: %v", err)
	}
	var de *DeniedError
	if _, err := echo(context.Background(), c, 2, nil, nil); !errors.As(err, &de) || !de.AuthError || de.AuthStat != 1 {
		t.Errorf("auth error: %v", err)
	}
	if _, err := echo(context.Background(), c, 3, nil, nil); !errors.Is(err, ErrGarbageReply) {
		t.Errorf("truncated reply: %v", err)
	}
	if _, err := echo(context.Background(), c, 4, nil, nil); !errors.As(err, &ae) || ae.Stat != ProcUnavail {
		t.Errorf("proc unavail: %v", err)
	}
}

func TestHostileRecordsDropTheConnectionOnly(t *testing.T) {
	var n atomic.Int32
	s := newTestServer(t, func(c *serverCall) []byte {
		switch n.Add(1) {
		case 1: // a record that claims 2 GiB
			return []byte{0xff, 0xff, 0xff, 0xff, 1, 2, 3, 4}
		case 2: // a reply to an xid nobody asked for, then the real one
			return append(acceptedReply(c.xid+1000, nil), acceptedReply(c.xid, []byte{0, 0, 0, 7})...)
		}
		return acceptedReply(c.xid, []byte{0, 0, 0, 9})
	})
	c := newTestClient(t, s.addr(), Config{Timeout: time.Second})
	call := c.NewCall(1, nil)
	defer call.Release()
	if err := c.Do(context.Background(), call); err != nil {
		t.Fatal(err)
	}
	if got := binary.BigEndian.Uint32(call.Reply.Body); got != 7 {
		t.Fatalf("body %d, want 7 from the second connection", got)
	}
	tr := c.Transport().(*TCP)
	if tr.stats.BadXids.Load() != 1 || tr.stats.ConnectCount.Load() != 2 {
		t.Errorf("bad_xids %d connects %d, want 1 and 2", tr.stats.BadXids.Load(), tr.stats.ConnectCount.Load())
	}
}

func TestConnectRefusedSoft(t *testing.T) {
	ln, _ := net.Listen("tcp", "127.0.0.1:0")
	addr := ln.Addr().String()
	ln.Close()
	c := newTestClient(t, addr, Config{Timeout: 100 * time.Millisecond, Retrans: 1, Soft: true})
	_, err := echo(context.Background(), c, 1, nil, nil)
	if !errors.Is(err, ErrConnect) || !strings.Contains(err.Error(), "connection refused") {
		t.Fatalf("err = %v, want ErrConnect saying the connection was refused", err)
	}
}

func TestInterruptAbandonsOnlyTheCall(t *testing.T) {
	s := newTestServer(t, func(c *serverCall) []byte {
		if c.proc == 9 {
			return nil
		}
		return acceptedReply(c.xid, nil)
	})
	c := newTestClient(t, s.addr(), Config{})
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	if _, err := echo(ctx, c, 9, nil, nil); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("err = %v", err)
	}
	if _, err := echo(context.Background(), c, 1, nil, nil); err != nil {
		t.Fatal(err)
	}
	if n := s.conns.Load(); n != 1 {
		t.Errorf("%d connections: an interrupted call must not drop the connection", n)
	}
}

func TestMultiFragmentRecord(t *testing.T) {
	s := newTestServer(t, func(c *serverCall) []byte {
		full := acceptedReply(c.xid, make([]byte, 10000))[4:]
		var out []byte
		for len(full) > 0 {
			n := min(len(full), 3000)
			mark := uint32(n)
			if n == len(full) {
				mark |= 1 << 31
			}
			out = binary.BigEndian.AppendUint32(out, mark)
			out = append(out, full[:n]...)
			full = full[n:]
		}
		return out
	})
	c := newTestClient(t, s.addr(), Config{})
	call := c.NewCall(1, nil)
	defer call.Release()
	if err := c.Do(context.Background(), call); err != nil {
		t.Fatal(err)
	}
	if len(call.Reply.Body) != 10000 {
		t.Fatalf("body of %d bytes, want 10000", len(call.Reply.Body))
	}
}

func FuzzParseReplyHeader(f *testing.F) {
	f.Add(acceptedReply(7, []byte{1, 2, 3, 4})[4:])
	f.Add([]byte{0, 0, 0, 7, 0, 0, 0, 1, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 3})
	f.Fuzz(func(t *testing.T, msg []byte) {
		off, err := parseReplyHeader(msg, 7)
		if err == nil && (off < 0 || off > len(msg)) {
			t.Fatalf("offset %d outside message of %d bytes", off, len(msg))
		}
	})
}

func TestMultiSpreadsCalls(t *testing.T) {
	var perConn [3]atomic.Int32
	s := newTestServer(t, func(c *serverCall) []byte {
		perConn[min(c.conn, 2)].Add(1)
		time.Sleep(20 * time.Millisecond)
		return acceptedReply(c.xid, nil)
	})
	m := NewMulti(NewTCP(TCPConfig{Addr: s.addr()}), NewTCP(TCPConfig{Addr: s.addr()}))
	c := NewClient(m, Config{Prog: 100003, Vers: 3, Timeout: 5 * time.Second})
	defer c.Close()
	var wg sync.WaitGroup
	for range 20 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if _, err := echo(context.Background(), c, 1, nil, nil); err != nil {
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	if s.conns.Load() != 2 || perConn[1].Load() == 0 || perConn[2].Load() == 0 {
		t.Fatalf("%d connections, calls per connection %d and %d", s.conns.Load(), perConn[1].Load(), perConn[2].Load())
	}
	if lines := strings.Count(m.XprtStats(), "xprt:"); lines != 1 {
		t.Errorf("stats have %d joins, want 2 lines", lines)
	}
}
