package soft_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/rdmafs/rdmafs/verbs"
	"github.com/rdmafs/rdmafs/verbs/soft"
)

// env is a soft device with a client and a server PD and a listener.
type env struct {
	t        *testing.T
	p        *soft.Provider
	dev      verbs.Device
	cpd, spd verbs.PD
	ln       verbs.Listener
}

func newEnv(t *testing.T) *env {
	t.Helper()
	p := soft.New()
	p.RNRTimeout = 500 * time.Millisecond
	dev, err := p.Open(context.Background(), "", "")
	if err != nil {
		t.Fatal(err)
	}
	e := &env{t: t, p: p, dev: dev}
	t.Cleanup(func() { dev.Close() })
	for _, pd := range []*verbs.PD{&e.cpd, &e.spd} {
		if *pd, err = dev.AllocPD(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			if err := (*pd).Close(); err != nil {
				t.Error(err)
			}
		})
	}
	if e.ln, err = e.spd.Listen("127.0.0.1:0"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.ln.Close() })
	return e
}

func cfg() verbs.ConnConfig {
	return verbs.ConnConfig{SendDepth: 16, RecvDepth: 16, MaxSendSGE: 2, MaxRecvSGE: 2, ResponderResources: 2, InitiatorDepth: 2}
}

func (e *env) dial() (verbs.Conn, error) { return e.dialWith(cfg()) }

func (e *env) dialWith(cc verbs.ConnConfig) (verbs.Conn, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	return e.cpd.Dial(ctx, e.ln.Addr(), cc)
}

func (e *env) pair() (c, s verbs.Conn) { return e.pairWith(cfg()) }

// pairWith connects with the client's configuration cc (the server's is
// cfg()); the test's cleanup closes both ends.
func (e *env) pairWith(cc verbs.ConnConfig) (c, s verbs.Conn) {
	e.t.Helper()
	ch := make(chan verbs.Conn, 1)
	go func() {
		r, err := e.ln.Accept(context.Background())
		if err != nil {
			ch <- nil
			return
		}
		s, _ := r.Accept(cfg())
		ch <- s
	}()
	c, err := e.dialWith(cc)
	s = <-ch
	if err != nil || s == nil {
		e.t.Fatalf("connect: %v", err)
	}
	e.t.Cleanup(func() { c.Close(); s.Close() })
	return c, s
}

func (e *env) region(pd verbs.PD, n int, access verbs.Access) verbs.MR {
	e.t.Helper()
	mem, err := verbs.AllocMemory(n)
	if err != nil {
		e.t.Fatal(err)
	}
	mr, err := pd.Register(mem, 0, n, access)
	if err != nil {
		e.t.Fatal(err)
	}
	e.t.Cleanup(func() { mr.Deregister(); mem.Free() })
	return mr
}

func wait(t *testing.T, c verbs.Conn, n int) []verbs.Completion {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var out []verbs.Completion
	buf := make([]verbs.Completion, 8)
	for len(out) < n {
		k, _ := c.Poll(buf[:min(8, n-len(out))])
		out = append(out, buf[:k]...)
		if k == 0 {
			if err := c.Wait(ctx); err != nil {
				t.Fatalf("waiting for completion %d: %v (have %+v)", len(out)+1, err, out)
			}
		}
	}
	return out
}

func endedWith(t *testing.T, c verbs.Conn, want string) {
	t.Helper()
	select {
	case <-c.Done():
	case <-time.After(10 * time.Second):
		t.Fatalf("connection did not end")
	}
	if err := c.Err(); !errors.Is(err, verbs.ErrDisconnected) || !strings.Contains(err.Error(), want) {
		t.Errorf("Err %v, want ErrDisconnected and %q", err, want)
	}
}

const rw = verbs.AccessLocalWrite | verbs.AccessRemoteWrite | verbs.AccessRemoteRead

func TestRefuseConnects(t *testing.T) {
	e := newEnv(t)
	e.p.RefuseConnects(1)
	_, err := e.dial()
	var rej *verbs.RejectError
	if !errors.As(err, &rej) || rej.Reason != 28 || len(rej.PrivateData) != 0 {
		t.Fatalf("refused dial: %v, want a consumer reject without private data", err)
	}
	c, _ := e.pair() // the next one is accepted
	if c.Err() != nil {
		t.Fatal(c.Err())
	}
}

func TestDrop(t *testing.T) {
	e := newEnv(t)
	c, s := e.pair()
	buf := e.region(e.spd, 4096, rw)
	for i := range 3 {
		if err := s.PostRecv(&verbs.RecvWR{ID: uint64(i), SGL: []verbs.SGE{{MR: buf, Length: 100}}}); err != nil {
			t.Fatal(err)
		}
	}
	if !soft.Drop(c) {
		t.Fatal("Drop refused a soft connection")
	}
	endedWith(t, c, "test hook")
	endedWith(t, s, "connection lost")
	wcs := wait(t, s, 3)
	for i, wc := range wcs {
		if wc.ID != uint64(i) || wc.Status != verbs.StatusWRFlushErr {
			t.Errorf("completion %d after a drop: %+v", i, wc)
		}
	}
}

func TestDropConnections(t *testing.T) {
	e := newEnv(t)
	var cs []verbs.Conn
	for range 3 {
		c, s := e.pair()
		cs = append(cs, c, s)
	}
	if n := e.p.DropConnections(); n < 3 {
		t.Errorf("DropConnections dropped %d of 3 connections", n)
	}
	for _, c := range cs {
		select {
		case <-c.Done():
		case <-time.After(10 * time.Second):
			t.Fatalf("a connection survived DropConnections")
		}
	}
}

func TestFailNextCompletion(t *testing.T) {
	e := newEnv(t)
	c, s := e.pair()
	a := e.region(e.cpd, 4096, rw)
	b := e.region(e.spd, 4096, rw)
	e.p.FailNextCompletion(verbs.CompRecv, verbs.StatusLocProtErr)
	for i := range 2 {
		s.PostRecv(&verbs.RecvWR{ID: uint64(10 + i), SGL: []verbs.SGE{{MR: b, Length: 100}}})
	}
	c.PostSend(&verbs.SendWR{ID: 1, Opcode: verbs.OpSend, Signaled: true, SGL: []verbs.SGE{{MR: a, Length: 10}}})
	wcs := wait(t, s, 2)
	if wcs[0].ID != 10 || wcs[0].Status != verbs.StatusLocProtErr || wcs[0].VendorErr != 0x50f7 {
		t.Errorf("failed completion: %+v", wcs[0])
	}
	if wcs[1].ID != 11 || wcs[1].Status != verbs.StatusWRFlushErr {
		t.Errorf("the next receive: %+v, want flushed", wcs[1])
	}
	endedWith(t, s, "test hook")
	endedWith(t, c, "")
}

func TestDelayNextCompletion(t *testing.T) {
	e := newEnv(t)
	c, s := e.pair()
	a := e.region(e.cpd, 4096, rw)
	b := e.region(e.spd, 4096, rw)
	for i := range 2 {
		s.PostRecv(&verbs.RecvWR{ID: uint64(10 + i), SGL: []verbs.SGE{{MR: b, Length: 100}}})
	}
	e.p.DelayNextCompletion(verbs.CompSend, 300*time.Millisecond)
	start := time.Now()
	for i := range 2 {
		c.PostSend(&verbs.SendWR{ID: uint64(i), Opcode: verbs.OpSend, Signaled: true, SGL: []verbs.SGE{{MR: a, Length: 10}}})
	}
	wait(t, s, 2) // the receiver is not delayed
	if time.Since(start) > 200*time.Millisecond {
		t.Errorf("receives took %v", time.Since(start))
	}
	wcs := wait(t, c, 2)
	if d := time.Since(start); d < 280*time.Millisecond {
		t.Errorf("delayed completion after %v, want 300ms", d)
	}
	if wcs[0].ID != 0 || wcs[1].ID != 1 || wcs[0].Status != 0 || wcs[1].Status != 0 {
		t.Errorf("completions %+v, want 0 and 1 in order", wcs)
	}
}

func TestLocalLengthError(t *testing.T) {
	e := newEnv(t)
	c, s := e.pair()
	a := e.region(e.cpd, 4096, rw)
	b := e.region(e.spd, 4096, rw)
	s.PostRecv(&verbs.RecvWR{ID: 1, SGL: []verbs.SGE{{MR: b, Length: 10}}})
	c.PostSend(&verbs.SendWR{ID: 2, Opcode: verbs.OpSend, SGL: []verbs.SGE{{MR: a, Length: 11}}})
	if wc := wait(t, s, 1)[0]; wc.Status != verbs.StatusLocLenErr {
		t.Errorf("receiver: %v, want a local length error", wc.Status)
	}
	if wc := wait(t, c, 1)[0]; wc.Status != verbs.StatusRemInvReqErr {
		t.Errorf("sender: %v, want a remote invalid request error", wc.Status)
	}
}

func TestWindowErrors(t *testing.T) {
	e := newEnv(t)
	bindable := e.region(e.spd, 8192, verbs.AccessLocalWrite|verbs.AccessMWBind)
	plain := e.region(e.spd, 8192, verbs.AccessLocalWrite)
	local := e.region(e.cpd, 8192, rw)
	mw, err := e.spd.AllocMW()
	if err != nil {
		t.Fatal(err)
	}
	defer mw.Close()
	bind := func(s verbs.Conn, id uint64, mr verbs.MR) verbs.Completion {
		t.Helper()
		if err := s.PostSend(&verbs.SendWR{ID: id, Opcode: verbs.OpBindMW, Signaled: true, MW: mw, BindMR: mr,
			Length: 4096, BindAccess: verbs.AccessRemoteWrite}); err != nil {
			t.Fatal(err)
		}
		return wait(t, s, 1)[0]
	}
	t.Run("RegionWithoutBindAccess", func(t *testing.T) {
		_, s := e.pair()
		if wc := bind(s, 1, plain); wc.Status != verbs.StatusMWBindErr {
			t.Errorf("bind to a region without AccessMWBind: %v", wc.Status)
		}
	})
	t.Run("BoundTwice", func(t *testing.T) {
		_, s := e.pair()
		if wc := bind(s, 1, bindable); wc.Status != verbs.StatusSuccess {
			t.Fatalf("bind: %v", wc.Status)
		}
		if err := bindable.Deregister(); err == nil {
			t.Fatalf("deregistered a region with a window bound to it")
		}
		if wc := bind(s, 2, bindable); wc.Status != verbs.StatusMWBindErr {
			t.Errorf("second bind without invalidation: %v", wc.Status)
		}
	})
	t.Run("OtherConnection", func(t *testing.T) {
		_, s := e.pair()
		c2, _ := e.pair()
		// Free the window (a local invalidation through any connection
		// of the PD), then bind it through s.
		s.PostSend(&verbs.SendWR{ID: 1, Opcode: verbs.OpLocalInv, InvalidateRKey: mw.RKey(), Signaled: true})
		if wc := wait(t, s, 1)[0]; wc.Status != verbs.StatusSuccess {
			t.Fatalf("local invalidate: %v", wc.Status)
		}
		if wc := bind(s, 2, bindable); wc.Status != verbs.StatusSuccess {
			t.Fatalf("bind: %v", wc.Status)
		}
		c2.PostSend(&verbs.SendWR{ID: 3, Opcode: verbs.OpRDMAWrite, SGL: []verbs.SGE{{MR: local, Length: 8}},
			RemoteAddr: bindable.Addr(), RKey: mw.RKey()})
		if wc := wait(t, c2, 1)[0]; wc.Status != verbs.StatusRemAccessErr {
			t.Errorf("write through a window bound to another connection: %v", wc.Status)
		}
	})
	t.Run("LocalInvalidateUnknown", func(t *testing.T) {
		_, s := e.pair()
		s.PostSend(&verbs.SendWR{ID: 1, Opcode: verbs.OpLocalInv, InvalidateRKey: 0xffffff00, Signaled: true})
		if wc := wait(t, s, 1)[0]; wc.Status != verbs.StatusGeneralErr {
			t.Errorf("invalidate an unknown key: %v", wc.Status)
		}
	})
	t.Run("RemoteInvalidateRegion", func(t *testing.T) {
		c, s := e.pair()
		s.PostRecv(&verbs.RecvWR{ID: 1, SGL: []verbs.SGE{{MR: plain, Length: 100}}})
		c.PostSend(&verbs.SendWR{ID: 2, Opcode: verbs.OpSendWithInv, InvalidateRKey: plain.RKey(), SGL: []verbs.SGE{{MR: local, Length: 8}}})
		if wc := wait(t, s, 1)[0]; wc.Status != verbs.StatusRemInvReqErr {
			t.Errorf("receiver of an invalidation of a region: %v", wc.Status)
		}
		if wc := wait(t, c, 1)[0]; wc.Status != verbs.StatusRemInvReqErr {
			t.Errorf("sender of an invalidation of a region: %v", wc.Status)
		}
	})
	t.Run("NewRKeyIndex", func(t *testing.T) {
		_, s := e.pair()
		err := s.PostSend(&verbs.SendWR{ID: 1, Opcode: verbs.OpBindMW, MW: mw, BindMR: bindable, Length: 10,
			BindAccess: verbs.AccessRemoteWrite, NewRKey: mw.RKey() + 0x100})
		if err == nil {
			t.Errorf("bind with a new rkey of another index was posted")
		}
	})
}

func TestReadNeedsInitiatorDepth(t *testing.T) {
	e := newEnv(t)
	cc := cfg()
	cc.InitiatorDepth = 0
	c, s := e.pairWith(cc)
	a := e.region(e.cpd, 4096, rw)
	if err := c.PostSend(&verbs.SendWR{ID: 1, Opcode: verbs.OpRDMARead, SGL: []verbs.SGE{{MR: a, Length: 8}}, RemoteAddr: a.Addr(), RKey: a.RKey()}); err == nil {
		t.Errorf("RDMA Read posted with initiator depth 0")
	}
	// The server may read: it asked for 2, the client offered 2.
	if err := s.PostSend(&verbs.SendWR{ID: 1, Opcode: verbs.OpRDMARead, Signaled: true, SGL: []verbs.SGE{{MR: e.region(e.spd, 4096, rw), Length: 8}}, RemoteAddr: a.Addr(), RKey: a.RKey()}); err != nil {
		t.Fatal(err)
	}
	if wc := wait(t, s, 1)[0]; wc.Status != verbs.StatusSuccess {
		t.Errorf("server's RDMA Read: %v", wc.Status)
	}
}

func TestCompletionQueueOverrun(t *testing.T) {
	e := newEnv(t)
	cc := cfg()
	cc.CQDepth = 2
	c, _ := e.pairWith(cc)
	a := e.region(e.cpd, 4096, rw)
	remote := e.region(e.spd, 4096, rw)
	for i := range 3 {
		if err := c.PostSend(&verbs.SendWR{ID: uint64(i), Opcode: verbs.OpRDMAWrite, Signaled: true,
			SGL: []verbs.SGE{{MR: a, Length: 8}}, RemoteAddr: remote.Addr(), RKey: remote.RKey()}); err != nil {
			t.Fatal(err)
		}
	}
	endedWith(t, c, "overrun")
	// Nothing is dropped: the three completions are there.
	wcs := wait(t, c, 3)
	for i, wc := range wcs {
		if wc.ID != uint64(i) || wc.Status != verbs.StatusSuccess {
			t.Errorf("completion %d: %+v", i, wc)
		}
	}
}
