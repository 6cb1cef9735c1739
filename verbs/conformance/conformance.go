// Package conformance is the one test suite every provider of package
// verbs must pass: Run(t, provider, device, addr). The soft provider runs
// it in its package tests; the ibverbs provider on an RDMA device (in the
// project's qemu guest, SoftRoCE).
//
// Each subtest makes its own connections (errors end them, as on
// hardware), with the client and the server in separate protection
// domains of one device. The last subtest checks that closing everything
// left no goroutine and no file descriptor behind.
package conformance

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/rdmafs/rdmafs/verbs"
)

// timeout bounds every wait of the suite: generous, for SoftRoCE under
// qemu's software emulation.
const timeout = 60 * time.Second

// Run runs the suite against p. device is the device name ("" for the one
// that routes to addr); addr is the address listeners bind to: an IP or a
// host:port (port 0 picks one), e.g. "127.0.0.1:0" for the soft provider or
// the IP of the RDMA device's network interface.
func Run(t *testing.T, p verbs.Provider, device, addr string) {
	if _, _, err := net.SplitHostPort(addr); err != nil {
		addr = net.JoinHostPort(addr, "0")
	}
	s := &suite{p: p, device: device, addr: addr}

	// Libraries may keep what they open once per process (librdmacm keeps
	// each device open): one connection first, then the baseline.
	t.Run("WarmUp", s.testWarmUp)
	var base counts
	// Counted in a subtest, as NoLeaks counts: each runs in a goroutine.
	t.Run("Baseline", func(t *testing.T) { base = snapshot() })

	t.Run("Device", s.testDevice)
	t.Run("ConnectPrivateData", s.testConnectPrivateData)
	t.Run("PrivateDataLimits", s.testPrivateDataLimits)
	t.Run("Reject", s.testReject)
	t.Run("DialNoListener", s.testDialNoListener)
	t.Run("SendRecvSizes", s.testSendRecvSizes)
	t.Run("SendRecvSGL", s.testSendRecvSGL)
	t.Run("SendTooLong", s.testSendTooLong)
	t.Run("ReceiverNotReady", s.testReceiverNotReady)
	t.Run("RNRRetryExceeded", s.testRNRRetryExceeded)
	t.Run("RDMAWriteRead", s.testRDMAWriteRead)
	t.Run("RDMAWriteReadSGL", s.testRDMAWriteReadSGL)
	t.Run("BadRKey", s.testBadRKey)
	t.Run("OutOfBounds", s.testOutOfBounds)
	t.Run("AccessRights", s.testAccessRights)
	t.Run("Deregister", s.testDeregister)
	t.Run("MemoryWindowLocalInvalidate", s.testMWLocalInvalidate)
	t.Run("MemoryWindowRemoteInvalidate", s.testMWRemoteInvalidate)
	t.Run("MemoryWindowRange", s.testMWRange)
	t.Run("MemoryWindowRebind", s.testMWRebind)
	t.Run("ChainBindSend", s.testChainBindSend)
	t.Run("CompletionOrder", s.testCompletionOrder)
	t.Run("Unsignaled", s.testUnsignaled)
	t.Run("PostErrors", s.testPostErrors)
	t.Run("ChainPostError", s.testChainPostError)
	t.Run("ChainLimits", s.testChainLimits)
	t.Run("WaitContext", s.testWaitContext)
	t.Run("WaitUntil", s.testWaitUntil)
	t.Run("Polling", s.testPolling)
	t.Run("FlushOnDisconnect", s.testFlushOnDisconnect)
	t.Run("CloseOrder", s.testCloseOrder)
	t.Run("ManyConnections", s.testManyConnections)
	t.Run("NoLeaks", func(t *testing.T) { checkLeaks(t, base) })
}

type suite struct {
	p      verbs.Provider
	device string
	addr   string
}

// fixture is one subtest's device, with a PD for each end and a listener
// on the server's.
type fixture struct {
	t        *testing.T
	s        *suite
	dev      verbs.Device
	cpd, spd verbs.PD
	ln       verbs.Listener
}

func (s *suite) setup(t *testing.T) *fixture {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	dev, err := s.p.Open(ctx, s.device, s.addr)
	if err != nil {
		t.Fatalf("open device %q for %s: %v", s.device, s.addr, err)
	}
	f := &fixture{t: t, s: s, dev: dev}
	t.Cleanup(func() {
		if err := dev.Close(); err != nil {
			t.Errorf("close device: %v", err)
		}
	})
	f.cpd = f.allocPD()
	f.spd = f.allocPD()
	f.ln, err = f.spd.Listen(s.addr)
	if err != nil {
		t.Fatalf("listen on %s: %v", s.addr, err)
	}
	t.Cleanup(func() {
		if err := f.ln.Close(); err != nil {
			t.Errorf("close listener: %v", err)
		}
	})
	return f
}

func (f *fixture) allocPD() verbs.PD {
	pd, err := f.dev.AllocPD()
	if err != nil {
		f.t.Fatalf("alloc PD: %v", err)
	}
	f.t.Cleanup(func() {
		if err := pd.Close(); err != nil {
			f.t.Errorf("close PD: %v", err)
		}
	})
	return pd
}

// defaultConfig is a connection of moderate size.
func defaultConfig() verbs.ConnConfig {
	return verbs.ConnConfig{
		SendDepth: 64, RecvDepth: 64, MaxSendSGE: 4, MaxRecvSGE: 4,
		ResponderResources: 4, InitiatorDepth: 4,
	}
}

// accepted is what the server side of connect saw.
type accepted struct {
	req  verbs.ConnRequest
	conn verbs.Conn
	err  error
}

// connect makes a connection from the client PD to the server's listener;
// the server accepts with scfg. Both are closed at the end of the test.
func (f *fixture) connect(ccfg, scfg verbs.ConnConfig) (client, server verbs.Conn, req verbs.ConnRequest) {
	f.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	ch := make(chan accepted, 1)
	go func() {
		r, err := f.ln.Accept(ctx)
		if err != nil {
			ch <- accepted{err: err}
			return
		}
		c, err := r.Accept(scfg)
		ch <- accepted{req: r, conn: c, err: err}
	}()
	c, err := f.cpd.Dial(ctx, f.ln.Addr(), ccfg)
	a := <-ch
	if a.conn != nil {
		f.t.Cleanup(func() { closeConn(f.t, a.conn) })
	}
	if err != nil {
		f.t.Fatalf("dial %s: %v (accept: %v)", f.ln.Addr(), err, a.err)
	}
	f.t.Cleanup(func() { closeConn(f.t, c) })
	if a.err != nil {
		f.t.Fatalf("accept: %v", a.err)
	}
	return c, a.conn, a.req
}

func closeConn(t *testing.T, c verbs.Conn) {
	if err := c.Close(); err != nil {
		t.Errorf("close connection: %v", err)
	}
}

// pair is connect with the default configuration.
func (f *fixture) pair() (client, server verbs.Conn) {
	c, s, _ := f.connect(defaultConfig(), defaultConfig())
	return c, s
}

// region is registered memory.
type region struct {
	mem *verbs.Memory
	mr  verbs.MR
	b   []byte
}

func (f *fixture) region(pd verbs.PD, size int, access verbs.Access) *region {
	f.t.Helper()
	mem, err := verbs.AllocMemory(size)
	if err != nil {
		f.t.Fatalf("allocate %d bytes: %v", size, err)
	}
	mr, err := pd.Register(mem, 0, size, access)
	if err != nil {
		mem.Free()
		f.t.Fatalf("register %d bytes (access %#x): %v", size, access, err)
	}
	r := &region{mem: mem, mr: mr, b: mr.Bytes()}
	f.t.Cleanup(func() {
		if err := mr.Deregister(); err != nil {
			f.t.Errorf("deregister: %v", err)
		}
		mem.Free()
	})
	if len(r.b) != size {
		f.t.Fatalf("MR.Bytes has %d bytes, registered %d", len(r.b), size)
	}
	return r
}

const (
	rwAccess  = verbs.AccessLocalWrite | verbs.AccessRemoteWrite | verbs.AccessRemoteRead
	recvAcces = verbs.AccessLocalWrite
)

// fill writes a pattern that differs with seed into b.
func fill(b []byte, seed uint64) {
	r := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	for i := range b {
		b[i] = byte(r.Uint32())
	}
}

func post(t *testing.T, c verbs.Conn, wr *verbs.SendWR) {
	t.Helper()
	if err := c.PostSend(wr); err != nil {
		t.Fatalf("post %v (id %d): %v", wr.Opcode, wr.ID, err)
	}
}

func postRecv(t *testing.T, c verbs.Conn, id uint64, sgl ...verbs.SGE) {
	t.Helper()
	if err := c.PostRecv(&verbs.RecvWR{ID: id, SGL: sgl}); err != nil {
		t.Fatalf("post receive %d: %v", id, err)
	}
}

// completions waits for n completions of c.
func completions(t *testing.T, c verbs.Conn, n int) []verbs.Completion {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	out := make([]verbs.Completion, 0, n)
	buf := make([]verbs.Completion, 16)
	for len(out) < n {
		k, err := c.Poll(buf[:min(len(buf), n-len(out))])
		if err != nil {
			t.Fatalf("poll: %v", err)
		}
		out = append(out, buf[:k]...)
		if k > 0 {
			continue
		}
		if err := c.Wait(ctx); err != nil {
			t.Fatalf("waiting for completion %d of %d (have %s): %v", len(out)+1, n, describe(out), err)
		}
	}
	return out
}

// completion waits for one completion and checks its id, status and, for
// a success, its operation.
func completion(t *testing.T, c verbs.Conn, id uint64, st verbs.Status, op verbs.CompletionOp) verbs.Completion {
	t.Helper()
	wc := completions(t, c, 1)[0]
	if wc.ID != id || wc.Status != st || (st == verbs.StatusSuccess && wc.Op != op) {
		t.Fatalf("completion %s, want id %d %v op %d", describe([]verbs.Completion{wc}), id, st, op)
	}
	return wc
}

func describe(wcs []verbs.Completion) string {
	var b strings.Builder
	b.WriteString("[")
	for i, wc := range wcs {
		if i > 0 {
			b.WriteString(" ")
		}
		fmt.Fprintf(&b, "{id %d %v op %d len %d", wc.ID, wc.Status, wc.Op, wc.ByteLen)
		if wc.HasInvalidate {
			fmt.Fprintf(&b, " inv %#x", wc.InvalidatedRKey)
		}
		b.WriteString("}")
	}
	b.WriteString("]")
	return b.String()
}

// noCompletion checks that c has no completion ready now.
func noCompletion(t *testing.T, c verbs.Conn) {
	t.Helper()
	var buf [4]verbs.Completion
	n, err := c.Poll(buf[:])
	if err != nil {
		t.Fatalf("poll: %v", err)
	}
	if n > 0 {
		t.Fatalf("unexpected completions %s", describe(buf[:n]))
	}
}

// ended waits for c to end and checks that Err says why.
func ended(t *testing.T, c verbs.Conn, who string) {
	t.Helper()
	select {
	case <-c.Done():
	case <-time.After(timeout):
		t.Fatalf("%s: connection did not end within %v", who, timeout)
	}
	err := c.Err()
	if err == nil {
		t.Fatalf("%s: connection ended but Err is nil", who)
	}
	if !errors.Is(err, verbs.ErrDisconnected) {
		t.Errorf("%s: Err %v does not wrap ErrDisconnected", who, err)
	}
	t.Logf("%s ended: %v", who, err)
}

// drain polls c until Wait reports that the connection ended and every
// completion was taken, and returns the completions.
func drain(t *testing.T, c verbs.Conn) []verbs.Completion {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	var out []verbs.Completion
	buf := make([]verbs.Completion, 16)
	for {
		n, err := c.Poll(buf)
		if err != nil {
			t.Fatalf("poll: %v", err)
		}
		out = append(out, buf[:n]...)
		if n > 0 {
			continue
		}
		if err := c.Wait(ctx); err != nil {
			if ctx.Err() != nil {
				t.Fatalf("Wait did not report the end of the connection: %v (completions %s)", err, describe(out))
			}
			if !errors.Is(err, verbs.ErrDisconnected) {
				t.Errorf("Wait after the end: %v, want an error wrapping ErrDisconnected", err)
			}
			return out
		}
	}
}

// --- leaks

type counts struct {
	goroutines int
	fds        int
}

func snapshot() counts {
	return counts{goroutines: runtime.NumGoroutine(), fds: openFDs()}
}

func openFDs() int {
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		return -1
	}
	return len(ents) - 1 // the directory being read
}

func fdList() string {
	ents, _ := os.ReadDir("/proc/self/fd")
	var b strings.Builder
	for _, e := range ents {
		l, _ := os.Readlink("/proc/self/fd/" + e.Name())
		fmt.Fprintf(&b, "\n  %s -> %s", e.Name(), l)
	}
	return b.String()
}

// checkLeaks waits (a little) for the goroutine and fd counts to come back
// to base.
func checkLeaks(t *testing.T, base counts) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	var now counts
	for {
		now = snapshot()
		if now.goroutines <= base.goroutines && now.fds <= base.fds || time.Now().After(deadline) {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	if now.goroutines > base.goroutines {
		buf := make([]byte, 1<<20)
		buf = buf[:runtime.Stack(buf, true)]
		t.Errorf("%d goroutines after closing everything, %d before:\n%s", now.goroutines, base.goroutines, buf)
	}
	if now.fds > base.fds {
		t.Errorf("%d open file descriptors after closing everything, %d before:%s", now.fds, base.fds, fdList())
	}
	if base.fds < 0 {
		t.Errorf("cannot count file descriptors (/proc/self/fd)")
	}
	t.Logf("goroutines %d (baseline %d), fds %d (baseline %d)", now.goroutines, base.goroutines, now.fds, base.fds)
}

// --- waiting for the other side in a goroutine

type result[T any] struct {
	v   T
	err error
}

func async[T any](f func() (T, error)) <-chan result[T] {
	ch := make(chan result[T], 1)
	go func() {
		v, err := f()
		ch <- result[T]{v, err}
	}()
	return ch
}
