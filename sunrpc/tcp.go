package sunrpc

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"os"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// TCPConfig configures a TCP transport.
type TCPConfig struct {
	Addr string // host:port of the server
	// ReservedPort binds the local end to a privileged port (665-1023), as
	// the Linux client's resvport does; servers that export with "secure"
	// (knfsd's default) accept only such connections. It needs root.
	ReservedPort bool
	// MaxCalls is the number of calls in flight at once (the slot table);
	// more wait in a backlog. Default 128.
	MaxCalls int
	// MaxRecord is the largest reply accepted; a larger one is a protocol
	// error that drops the connection. Default 4 MiB.
	MaxRecord int
	// IdleTimeout closes a connection with no call in flight for this
	// long; the next call reconnects. Default 5 minutes.
	IdleTimeout time.Duration
	// Logf, if set, receives connection events.
	Logf func(format string, args ...any)
	// Rebind, if set, is asked for the server's address again when a
	// connection cannot be made (as the kernel's autobind asks rpcbind
	// again): a service whose port is its portmapper's choice, such as a
	// lock manager, may come back on another port after a restart. Its
	// answer replaces Addr.
	Rebind func(ctx context.Context) (string, error)
}

// Reconnect backoff: the first attempt after a lost connection is
// immediate; after a failed one the wait doubles from minBackoff to
// maxBackoff. The Linux client starts at 3 s, but a userspace server
// restarts in well under a second and a hard mount should notice quickly.
const (
	minBackoff = 100 * time.Millisecond
	maxBackoff = 10 * time.Second
)

// TCP is the record-marking transport of RFC 5531 section 11 over TCP.
type TCP struct {
	cfg     TCPConfig
	addr    atomic.Pointer[string] // cfg.Addr, or Rebind's last answer
	slots   chan struct{}
	conns   Redialer[*tcpConn]
	stats   XprtCounters
	srcPort atomic.Int64 // of the last connection, for the "xprt:" line
}

// NewTCP returns a TCP transport to cfg.Addr. It connects on first use.
func NewTCP(cfg TCPConfig) *TCP {
	if cfg.MaxCalls <= 0 {
		cfg.MaxCalls = 128
	}
	if cfg.MaxRecord <= 0 {
		cfg.MaxRecord = 4 << 20
	}
	cfg.MaxRecord = min(cfg.MaxRecord, MaxBuffer)
	if cfg.IdleTimeout <= 0 {
		cfg.IdleTimeout = 5 * time.Minute
	}
	t := &TCP{cfg: cfg, slots: make(chan struct{}, cfg.MaxCalls)}
	t.addr.Store(&cfg.Addr)
	t.conns = Redialer[*tcpConn]{MinBackoff: minBackoff, MaxBackoff: maxBackoff,
		Dial: t.dial, Alive: (*tcpConn).alive, Hangup: func(c *tcpConn) { c.fail(ErrClosed) },
		// A caller waiting out the backoff dials as soon as the server
		// is back, within its own timeouts, as over RDMA.
		Probe: t.probe}
	return t
}

// probe reports whether the server takes a TCP connection now (the
// Redialer's Probe): a refused connect costs a round trip, a taken one is
// closed at once. It binds no reserved port, which are few and would
// linger in TIME_WAIT.
func (t *TCP) probe(ctx context.Context) bool {
	var d net.Dialer
	nc, err := d.DialContext(ctx, "tcp", t.Addr())
	if err != nil {
		return false
	}
	_ = nc.Close()
	return true
}

// Addr returns the server's address: TCPConfig.Addr, or where Rebind
// last said the server is.
func (t *TCP) Addr() string { return *t.addr.Load() }

// RoundTrip implements Transport.
func (t *TCP) RoundTrip(ctx context.Context, call *Call) error {
	deadline := call.Deadline()
	t.stats.Used(call.Started())
	if err := t.takeSlot(ctx, deadline); err != nil {
		return err
	}
	defer t.putSlot()

	conn, err := t.conns.Get(ctx, deadline)
	if err != nil {
		return err
	}
	if conn.register(call) != nil {
		return fmt.Errorf("%w: %s: %v", ErrDisconnected, t.Addr(), conn.cause())
	}
	t.stats.Sent()
	call.SentAt = time.Now()
	if err := conn.send(call, deadline); err != nil {
		conn.forget(call)
		t.drop(conn, err)
		return fmt.Errorf("%w: %s: send: %v", ErrDisconnected, t.Addr(), err)
	}
	err = conn.calls.Wait(ctx, call)
	if err == nil {
		return nil
	}
	conn.armIdle()
	if errors.Is(err, ErrTimeout) {
		t.drop(conn, ErrTimeout)
	}
	if errors.Is(err, ErrDisconnected) {
		return fmt.Errorf("%w: %s: %v", ErrDisconnected, t.Addr(), conn.cause())
	}
	return err
}

func (t *TCP) takeSlot(ctx context.Context, deadline time.Time) error {
	select {
	case t.slots <- struct{}{}:
	default:
		t.stats.Backlog.Add(1)
		defer t.stats.Backlog.Add(-1)
		timer := time.NewTimer(time.Until(deadline))
		defer timer.Stop()
		select {
		case t.slots <- struct{}{}:
		case <-ctx.Done():
			return ctx.Err()
		case <-timer.C:
			return ErrTimeout
		}
	}
	t.stats.Inflight.Add(1)
	return nil
}

func (t *TCP) putSlot() {
	t.stats.Inflight.Add(-1)
	<-t.slots
}

// plainNetError strips the operation and addresses from a dial error,
// which the caller names better.
func plainNetError(err error) error {
	var se *os.SyscallError
	if errors.As(err, &se) {
		return se.Err
	}
	return err
}

// sleepUntil waits for ch to close, ctx to end or the deadline to pass.
func sleepUntil(ctx context.Context, deadline time.Time, ch <-chan struct{}) error {
	timer := time.NewTimer(time.Until(deadline))
	defer timer.Stop()
	select {
	case <-ch:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	case <-timer.C:
		return ErrTimeout
	}
}

// dial connects (the Redialer's Dial); ctx carries the deadline. A
// failed attempt wraps ErrConnect.
func (t *TCP) dial(ctx context.Context) (*tcpConn, error) {
	start := time.Now()
	defer func() { t.stats.ConnectTime.Add(int64(time.Since(start))) }()
	addr := t.Addr()
	nc, err := t.dialSocket(ctx, addr)
	if err != nil && t.cfg.Rebind != nil && ctx.Err() == nil {
		if a, rerr := t.cfg.Rebind(ctx); rerr == nil && a != addr {
			if t.cfg.Logf != nil {
				t.cfg.Logf("sunrpc: %s: cannot connect (%v); the server's portmapper now says %s", addr, plainNetError(err), a)
			}
			t.addr.Store(&a)
			addr = a
			nc, err = t.dialSocket(ctx, addr)
		}
	}
	if err != nil {
		if ctx.Err() != nil && !errors.Is(ctx.Err(), context.DeadlineExceeded) {
			return nil, ctx.Err()
		}
		return nil, fmt.Errorf("%w to %s: %w", ErrConnect, addr, plainNetError(err))
	}
	t.stats.ConnectCount.Add(1)
	if a, ok := nc.LocalAddr().(*net.TCPAddr); ok {
		t.srcPort.Store(int64(a.Port))
	}
	c := newTCPConn(nc, t.cfg, addr)
	go c.readLoop(t)
	return c, nil
}

// dialSocket connects to addr, from a reserved port if configured.
func (t *TCP) dialSocket(ctx context.Context, addr string) (net.Conn, error) {
	var d net.Dialer
	if !t.cfg.ReservedPort {
		t.stats.BindCount.Add(1)
		return d.DialContext(ctx, "tcp", addr)
	}
	const lo, hi = 665, 1023
	first := lo + rand.IntN(hi-lo+1)
	var lastErr error
	for i := 0; i <= hi-lo; i++ {
		port := lo + (first-lo+i)%(hi-lo+1)
		d.LocalAddr = &net.TCPAddr{Port: port}
		t.stats.BindCount.Add(1)
		nc, err := d.DialContext(ctx, "tcp", addr)
		if err == nil {
			return nc, nil
		}
		lastErr = err
		switch {
		case errors.Is(err, syscall.EADDRINUSE), errors.Is(err, syscall.EADDRNOTAVAIL):
			continue
		case errors.Is(err, syscall.EACCES), errors.Is(err, syscall.EPERM):
			return nil, fmt.Errorf("binding a reserved source port needs root (mount option noresvport avoids it): %w", err)
		}
		return nil, err
	}
	return nil, fmt.Errorf("no reserved source port free: %w", lastErr)
}

// drop closes conn because of err and forgets it. A connection the server
// closed before it delivered any reply counts as a failed attempt, so a
// server that accepts and hangs up at once is not redialled in a loop.
func (t *TCP) drop(conn *tcpConn, err error) {
	t.conns.Drop(conn, !conn.replied.Load() && !errors.Is(err, ErrTimeout))
	conn.fail(err)
}

// connectionWorks forgets the backoff once a connection has carried a reply.
func (t *TCP) connectionWorks(conn *tcpConn) {
	if !conn.replied.Swap(true) {
		t.conns.Worked()
	}
}

// XprtStats implements Transport, in the format of the Linux TCP transport:
// srcport bind_count connect_count connect_time idle_time sends recvs
// bad_xids req_u bklog_u max_slots sending_u pending_u.
func (t *TCP) XprtStats() string {
	return fmt.Sprintf("tcp %d %s %d %d %d",
		t.srcPort.Load(), t.stats.Common(), t.cfg.MaxCalls, 0, t.stats.Inflight.Load())
}

// Close implements Transport.
func (t *TCP) Close() error {
	if c, ok := t.conns.Close(); ok {
		c.fail(ErrClosed)
	}
	return nil
}

// tcpConn is one TCP connection and the calls waiting for replies on it.
type tcpConn struct {
	nc   net.Conn
	cfg  TCPConfig
	addr string // the server's, as dialled

	wmu sync.Mutex
	iov [5][]byte
	hdr [4]byte

	calls   *Pending[struct{}]
	idle    *time.Timer
	replied atomic.Bool // a reply has arrived on this connection
}

func newTCPConn(nc net.Conn, cfg TCPConfig, addr string) *tcpConn {
	if tc, ok := nc.(*net.TCPConn); ok {
		_ = tc.SetNoDelay(true)
	}
	c := &tcpConn{nc: nc, cfg: cfg, addr: addr, calls: NewPending[struct{}](ForgetAbandoned)}
	c.idle = time.AfterFunc(cfg.IdleTimeout, c.closeIfIdle)
	return c
}

// register records call as waiting for a reply; it fails once the
// connection has.
func (c *tcpConn) register(call *Call) error {
	// Stopped first: an idle timer the reader re-arms meanwhile finds
	// the call when it fires.
	c.idle.Stop()
	return c.calls.Add(call, struct{}{})
}

// forget takes back a call that was not sent.
func (c *tcpConn) forget(call *Call) {
	c.calls.Remove(call)
	c.armIdle()
}

// armIdle starts the idle timeout once no call is in flight.
func (c *tcpConn) armIdle() {
	if c.calls.Len() == 0 && c.calls.Err() == nil {
		c.idle.Reset(c.cfg.IdleTimeout)
	}
}

func (c *tcpConn) closeIfIdle() {
	if c.calls.Len() == 0 {
		c.fail(errors.New("idle"))
	}
}

// fail closes the connection; calls waiting on it return ErrDisconnected.
func (c *tcpConn) fail(err error) {
	if !c.calls.Fail(err) {
		return
	}
	c.idle.Stop()
	_ = c.nc.Close()
	if c.cfg.Logf != nil && !errors.Is(err, ErrClosed) {
		c.cfg.Logf("sunrpc: %s: connection closed: %v", c.addr, err)
	}
}

func (c *tcpConn) alive() bool {
	select {
	case <-c.calls.Lost():
		return false
	default:
		return true
	}
}

func (c *tcpConn) cause() error { return c.calls.Err() }

// send writes the call as one record: the head, the payload with its pad
// and the tail, in one writev.
func (c *tcpConn) send(call *Call, deadline time.Time) error {
	pad := padBytes(len(call.Payload))
	n := len(call.Head) + len(call.Payload) + len(pad) + len(call.Tail)
	c.wmu.Lock()
	defer c.wmu.Unlock()
	PutRecordMark(c.hdr[:], n)
	c.iov = [5][]byte{c.hdr[:], call.Head, call.Payload, pad, call.Tail}
	bufs := net.Buffers(c.iov[:])
	_ = c.nc.SetWriteDeadline(deadline)
	_, err := bufs.WriteTo(c.nc)
	c.iov = [5][]byte{}
	return err
}

var zeroPad [4]byte

func padBytes(n int) []byte { return zeroPad[:(4-n&3)&3] }

// readLoop reads reply records and hands each to the call with its xid.
func (c *tcpConn) readLoop(t *TCP) {
	rr := &RecordReader{R: bufio.NewReaderSize(c.nc, 64<<10), MaxRecord: c.cfg.MaxRecord}
	for {
		buf, err := c.readRecord(rr)
		if err != nil {
			t.drop(c, err)
			return
		}
		if len(buf.B) < 4 {
			buf.Release()
			t.drop(c, fmt.Errorf("reply record of %d bytes", len(buf.B)))
			return
		}
		if !c.calls.Deliver(binary.BigEndian.Uint32(buf.B), Reply{Msg: buf.B}, buf) {
			t.stats.BadXids.Add(1)
			buf.Release()
			continue
		}
		c.armIdle()
		t.stats.Recvs.Add(1)
		t.connectionWorks(c)
	}
}

// readRecord reads the fragments of one record into a pooled buffer.
func (c *tcpConn) readRecord(rr *RecordReader) (*Buffer, error) {
	var buf *Buffer
	size := 0
	for {
		n, last, err := rr.Fragment()
		if err != nil {
			if buf != nil {
				buf.Release()
			}
			return nil, err
		}
		if buf == nil {
			buf = GetBuffer(n)
		} else if size+n > cap(buf.B) {
			bigger := GetBuffer(size + n)
			copy(bigger.B, buf.B[:size])
			buf.Release()
			buf = bigger
		}
		buf.B = buf.B[:size+n]
		if _, err := io.ReadFull(rr.R, buf.B[size:]); err != nil {
			buf.Release()
			return nil, err
		}
		size += n
		if last {
			return buf, nil
		}
	}
}
