package soft

import (
	"context"
	"errors"
	"fmt"
	"net"
	"runtime"
	"sync"
	"syscall"
	"time"

	"github.com/rdmafs/rdmafs/verbs"
)

// A connection runs two goroutines. The sender works through the send
// queue in order (executing binds and invalidations itself, putting
// SENDs, WRITEs and READ requests on the wire) and sends the responses the
// reader queues. The reader executes the peer's requests (in the order they
// arrive, as an RC responder does) and the peer's responses complete this
// side's work requests. Everything they share is under conn.mu; only the
// sender writes to the TCP connection and only the reader reads from it.
//
// Memory a work request names is written (receives, RDMA Read targets)
// only under conn.mu, checking that the request was not flushed: once a
// flush completion is out, the memory is the user's again.
//
// A work request's state (sendWQE, recvWQE) is reused for a later one once
// it has completed normally (recycleSendLocked, recycleRecvLocked), so
// that a steady flow of work requests allocates nothing; a flushed one is
// never reused, because the goroutine that was working on it may still
// look at its flushed flag.

// lingerTimeout bounds how long an ending connection tries to send its
// last frames (a NAK, a DISCONNECT) to a peer that does not read them.
const lingerTimeout = 2 * time.Second

// faultVendorErr is the vendor error of a completion failed by a test
// hook, so that it can be told apart.
const faultVendorErr = 0x50f7

type connState uint8

const (
	stateUp connState = iota
	stateDown
)

// errStop ends the reader quietly: the connection has already ended.
var errStop = errors.New("stop")

// sendWQE is a posted send work request.
type sendWQE struct {
	id       uint64
	op       verbs.Opcode
	signaled bool
	sgl      []sge
	sgBuf    [4]sge
	length   int
	raddr    uint64
	rkey     uint32
	invRKey  uint32

	mw         *mw
	bindMR     *mr
	bindOff    int
	bindLen    int
	bindAccess verbs.Access
	newKey     uint32
	oldKey     uint32 // the window's key before: back to it if the bind fails

	seq     uint64       // wire sequence number (remote operations)
	done    bool         // finished, with status
	status  verbs.Status //
	failure error        // what went wrong when status is not success
	flushed bool         // completed by a flush: its memory is the user's again
}

// revertBind gives a window whose bind failed or was flushed its key back
// (MW.RKey changed when the bind was posted), unless a later bind was
// posted meanwhile.
func (w *sendWQE) revertBind() {
	if w.op == verbs.OpBindMW {
		w.mw.posted.CompareAndSwap(w.newKey, w.oldKey)
	}
}

// recvWQE is a posted receive.
type recvWQE struct {
	id      uint64
	sgl     []sge
	sgBuf   [2]sge
	length  int
	flushed bool
}

// response is something the sender sends for the reader.
type response struct {
	typ  frameType // frameAck, frameNak, frameReadResp, frameDisconnect
	seq  uint64
	code nakCode
	mr   *mr // READ response: the source
	off  int
	n    int
}

type conn struct {
	p           *Provider
	pd          *pd
	nc          net.Conn
	fr          *frameReader
	fw          *frameWriter
	cfg         verbs.ConnConfig
	peerPrivate []byte
	ord, ird    int // RDMA Reads this end may have out / may serve at once
	local       string
	remote      string
	cq          *cq
	recvPosted  chan struct{} // PostRecv wakes a reader waiting for a receive
	done        chan struct{}
	waitTimer   *time.Timer // WaitUntil's, made once

	mu        sync.Mutex
	kick      sync.Cond // on mu: wakes the sender
	state     connState
	err       error
	linger    bool           // the sender sends the queued responses before closing
	sq        fifo[*sendWQE] // posted in order; the first sqNext went through the sender
	sqNext    int            //
	nextSeq   uint64         // next request's sequence number
	unacked   fifo[*sendWQE] // SENDs and WRITEs on the wire, in order
	reads     fifo[*sendWQE] // READs on the wire, in order
	rq        fifo[*recvWQE] // posted receives
	rqActive  *recvWQE       // the receive the reader is filling
	resp      []response     // for the sender, in order
	spare     []response     // the sender's last batch, for reuse
	expectSeq uint64         // the peer's next request
	readsIn   int            // the peer's READs taken and not answered yet
	closed    bool           //
	freeSend  []*sendWQE     // completed send work requests, for reuse
	freeRecv  []*recvWQE     // completed receives, for reuse

	wg sync.WaitGroup
}

// newConn starts an established connection.
func newConn(pd *pd, nc net.Conn, fr *frameReader, fw *frameWriter, cfg verbs.ConnConfig, peerPrivate []byte, ord, ird int) *conn {
	c := &conn{
		p: pd.dev.p, pd: pd, nc: nc, fr: fr, fw: fw, cfg: cfg,
		peerPrivate: peerPrivate, ord: ord, ird: ird,
		local: nc.LocalAddr().String(), remote: nc.RemoteAddr().String(),
		cq:         newCQ(cfg.CQDepth),
		recvPosted: make(chan struct{}, 1),
		done:       make(chan struct{}),
		nextSeq:    1,
		expectSeq:  1,
	}
	c.kick.L = &c.mu
	c.p.addConn(c)
	c.wg.Add(2)
	go c.sendLoop()
	go c.readLoop()
	return c
}

// --- the verbs.Conn methods

func (c *conn) PostSend(wr *verbs.SendWR) error {
	n := 0
	for w := wr; w != nil && n <= verbs.MaxChain; w = w.Next {
		n++
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	var err error
	switch {
	case n > verbs.MaxChain:
		err = fmt.Errorf("chain of more than %d work requests: %w", verbs.MaxChain, syscall.EINVAL)
	case c.state != stateUp:
		err = c.err
	case c.sq.len()+n > c.cfg.SendDepth:
		err = fmt.Errorf("send queue full (%d work requests): %w", c.cfg.SendDepth, syscall.ENOMEM)
	}
	// The chain's work requests go in one by one, and the sender sees
	// none of them before the lock is let go.
	posted := 0
	for ; wr != nil && err == nil; wr = wr.Next {
		w := c.takeSendLocked()
		if err = c.fillSendWQE(w, wr); err != nil {
			c.recycleSendLocked(w) // never posted: nothing else has seen it
			err = &verbs.PostError{Posted: posted, Err: err}
			break
		}
		if w.op == verbs.OpBindMW {
			w.mw.posted.Store(w.newKey)
		}
		c.sq.push(w)
		posted++
	}
	if posted > 0 {
		c.kick.Signal()
	}
	if err != nil {
		return &verbs.VerbError{Verb: "post_send", Err: err}
	}
	return nil
}

// takeSendLocked returns a send work request's state to fill: a reused
// one, or a new one.
func (c *conn) takeSendLocked() *sendWQE {
	if n := len(c.freeSend); n > 0 {
		w := c.freeSend[n-1]
		c.freeSend = c.freeSend[:n-1]
		return w
	}
	return new(sendWQE)
}

// recycleSendLocked keeps w for reuse. The caller makes sure nothing
// refers to w any more: it completed normally (completeInOrderLocked) or
// was never posted.
func (c *conn) recycleSendLocked(w *sendWQE) {
	*w = sendWQE{} // and so keeps no region or window alive
	c.freeSend = append(c.freeSend, w)
}

// fillSendWQE checks wr and copies it into w.
func (c *conn) fillSendWQE(w *sendWQE, wr *verbs.SendWR) error {
	*w = sendWQE{id: wr.ID, op: wr.Opcode, signaled: wr.Signaled}
	var err error
	switch wr.Opcode {
	case verbs.OpSend, verbs.OpSendWithInv, verbs.OpRDMAWrite:
		w.sgl, w.length, err = c.sgList(w.sgBuf[:0], wr.SGL, c.cfg.MaxSendSGE, false)
		w.raddr, w.rkey, w.invRKey = wr.RemoteAddr, wr.RKey, wr.InvalidateRKey
	case verbs.OpRDMARead:
		if c.ord == 0 {
			return fmt.Errorf("RDMA Read on a connection whose initiator depth is 0 (ConnConfig.InitiatorDepth, and the peer's ResponderResources): %w", syscall.EINVAL)
		}
		w.sgl, w.length, err = c.sgList(w.sgBuf[:0], wr.SGL, c.cfg.MaxSendSGE, true)
		w.raddr, w.rkey = wr.RemoteAddr, wr.RKey
	case verbs.OpBindMW:
		win, ok := wr.MW.(*mw)
		r, ok2 := wr.BindMR.(*mr)
		switch {
		case !ok || !ok2:
			return fmt.Errorf("bind: window or region not of the soft provider: %w", syscall.EINVAL)
		case win.pd != c.pd || r.pd != c.pd:
			return fmt.Errorf("bind: window or region of another protection domain: %w", syscall.EINVAL)
		case len(wr.SGL) > 0:
			return fmt.Errorf("bind with SGEs: %w", syscall.EINVAL)
		}
		w.mw, w.bindMR, w.bindOff, w.bindLen, w.bindAccess = win, r, wr.Offset, wr.Length, wr.BindAccess
		w.newKey = wr.NewRKey
		cur := win.posted.Load()
		w.oldKey = cur
		if w.newKey == 0 {
			w.newKey = cur&^0xff | (cur+1)&0xff
		} else if w.newKey>>8 != cur>>8 {
			return fmt.Errorf("bind: new rkey %#x does not keep the window's index (rkey %#x): %w", w.newKey, cur, syscall.EINVAL)
		}
	case verbs.OpLocalInv:
		if len(wr.SGL) > 0 {
			return fmt.Errorf("local invalidate with SGEs: %w", syscall.EINVAL)
		}
		w.invRKey = wr.InvalidateRKey
	default:
		return fmt.Errorf("opcode %v: %w", wr.Opcode, syscall.EINVAL)
	}
	return err
}

func (c *conn) PostRecv(wr *verbs.RecvWR) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	r := c.takeRecvLocked()
	r.id = wr.ID
	var err error
	r.sgl, r.length, err = c.sgList(r.sgBuf[:0], wr.SGL, c.cfg.MaxRecvSGE, true)
	n := c.rq.len()
	if c.rqActive != nil {
		n++
	}
	switch {
	case err != nil:
	case c.state != stateUp:
		err = c.err
	case n >= c.cfg.RecvDepth:
		err = fmt.Errorf("receive queue full (%d work requests): %w", c.cfg.RecvDepth, syscall.ENOMEM)
	}
	if err != nil {
		c.recycleRecvLocked(r) // never posted: nothing else has seen it
		return &verbs.VerbError{Verb: "post_recv", Err: err}
	}
	c.rq.push(r)
	select {
	case c.recvPosted <- struct{}{}:
	default:
	}
	return nil
}

// takeRecvLocked returns a receive's state to fill: a reused one, or a
// new one.
func (c *conn) takeRecvLocked() *recvWQE {
	if n := len(c.freeRecv); n > 0 {
		r := c.freeRecv[n-1]
		c.freeRecv = c.freeRecv[:n-1]
		return r
	}
	return new(recvWQE)
}

// recycleRecvLocked keeps r for reuse. The caller makes sure nothing
// refers to r any more: it completed normally (onSend) or was never
// posted.
func (c *conn) recycleRecvLocked(r *recvWQE) {
	*r = recvWQE{}
	c.freeRecv = append(c.freeRecv, r)
}

func (c *conn) Poll(wcs []verbs.Completion) (int, error) {
	c.mu.Lock()
	closed := c.closed
	c.mu.Unlock()
	if closed {
		return 0, &verbs.VerbError{Verb: "poll_cq", Err: syscall.EBADF}
	}
	return c.cq.poll(wcs), nil
}

// maxSpin bounds a polling Wait's spin before it sleeps after all: goroutines
// that never block keep the Go scheduler from polling the network, which
// is what brings the completions here.
const maxSpin = 50 * time.Microsecond

func (c *conn) Wait(ctx context.Context) error {
	spinStart := time.Now()
	for {
		// A soft connection flushes everything before it marks itself
		// ended, so once it has ended, all that is left is what is ready
		// (or held back by a fault hook's delay). Look at the end first:
		// the other order misses the completions pushed in between.
		ended := c.ended()
		ready, held := c.cq.ready()
		if ready {
			return nil
		}
		if ended && !held {
			return c.Err()
		}
		if c.cfg.Polling && time.Since(spinStart) < maxSpin {
			if err := ctx.Err(); err != nil {
				return err
			}
			runtime.Gosched()
			continue
		}
		var done <-chan struct{}
		if !ended {
			done = c.done
		}
		select {
		case <-c.cq.notify:
		case <-done:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

func (c *conn) WaitUntil(deadline time.Time) error {
	spinStart := time.Now()
	for {
		if ready, _ := c.cq.ready(); ready || c.ended() {
			return nil
		}
		d := time.Until(deadline)
		if d <= 0 {
			return nil
		}
		if c.cfg.Polling && time.Since(spinStart) < maxSpin {
			runtime.Gosched()
			continue
		}
		if c.waitTimer == nil {
			c.waitTimer = time.NewTimer(d)
		} else {
			c.waitTimer.Reset(d)
		}
		select {
		case <-c.cq.notify:
		case <-c.done:
		case <-c.waitTimer.C:
		}
		c.waitTimer.Stop()
	}
}

func (c *conn) ended() bool {
	select {
	case <-c.done:
		return true
	default:
		return false
	}
}

func (c *conn) PeerPrivateData() []byte { return c.peerPrivate }
func (c *conn) Done() <-chan struct{}   { return c.done }
func (c *conn) LocalAddr() string       { return c.local }
func (c *conn) RemoteAddr() string      { return c.remote }

func (c *conn) Err() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.err
}

func (c *conn) Disconnect() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.state == stateUp {
		c.resp = append(c.resp, response{typ: frameDisconnect})
		c.failLocked(fmt.Errorf("%w: disconnected by this end", verbs.ErrDisconnected), true)
	}
	return nil
}

func (c *conn) Close() error {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return nil
	}
	c.closed = true
	c.mu.Unlock()
	c.Disconnect()
	c.wg.Wait()
	c.nc.Close()
	c.cq.stop()
	c.p.removeConn(c)
	c.pd.use(&c.pd.conns, -1)
	return nil
}

// drop breaks the connection as a failing link would (test hook).
func (c *conn) drop() {
	if tc, ok := c.nc.(*net.TCPConn); ok {
		tc.SetLinger(0) // a reset, not an orderly close
	}
	c.fail(fmt.Errorf("%w: connection dropped by a test hook", verbs.ErrDisconnected), false)
}

// --- ending

// fail ends the connection with err (which wraps verbs.ErrDisconnected).
func (c *conn) fail(err error, linger bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.failLocked(err, linger)
}

// failLocked ends the connection: the send queue's finished work requests
// complete with their status and the rest, and every receive, with
// StatusWRFlushErr, all in order. With linger the sender then sends the
// responses queued (a NAK, a DISCONNECT) before it closes the TCP
// connection; without, it is closed at once.
func (c *conn) failLocked(err error, linger bool) {
	if c.state != stateUp {
		return
	}
	c.state = stateDown
	c.err = err
	for i := range c.sq.len() {
		w := c.sq.at(i)
		st := verbs.StatusWRFlushErr
		if w.done {
			st = w.status
		} else {
			w.flushed = true
		}
		if st != verbs.StatusSuccess {
			w.revertBind()
		}
		c.completeLocked(w, st, false)
	}
	c.sq.clear()
	c.sqNext = 0
	c.unacked.clear()
	c.reads.clear()
	if r := c.rqActive; r != nil {
		r.flushed = true
		c.emitLocked(verbs.Completion{ID: r.id, Status: verbs.StatusWRFlushErr}, false)
		c.rqActive = nil
	}
	for i := range c.rq.len() {
		r := c.rq.at(i)
		r.flushed = true
		c.emitLocked(verbs.Completion{ID: r.id, Status: verbs.StatusWRFlushErr}, false)
	}
	c.rq.clear()
	if linger {
		c.linger = true
		c.nc.SetWriteDeadline(time.Now().Add(lingerTimeout))
	} else {
		c.resp = nil
		c.nc.Close()
	}
	close(c.done)
	c.kick.Broadcast()
	c.cq.wake()
}

// lost ends the connection for an I/O error.
func (c *conn) lost(err error) {
	c.fail(fmt.Errorf("%w: connection lost: %v", verbs.ErrDisconnected, err), false)
}

// --- completions

var compOps = [...]verbs.CompletionOp{
	verbs.OpSend:        verbs.CompSend,
	verbs.OpSendWithInv: verbs.CompSend,
	verbs.OpRDMAWrite:   verbs.CompRDMAWrite,
	verbs.OpRDMARead:    verbs.CompRDMARead,
	verbs.OpBindMW:      verbs.CompBindMW,
	verbs.OpLocalInv:    verbs.CompLocalInv,
}

// completeLocked produces w's completion with status st (none for an
// unsignaled success). With hooks the fault hooks may fail it; the error
// then says so and the caller must end the connection.
func (c *conn) completeLocked(w *sendWQE, st verbs.Status, hooks bool) error {
	if st == verbs.StatusSuccess && !w.signaled {
		return nil
	}
	wc := verbs.Completion{ID: w.id, Status: st, Op: compOps[w.op]}
	if w.op == verbs.OpRDMARead && st == verbs.StatusSuccess {
		wc.ByteLen = uint32(w.length)
	}
	return c.emitLocked(wc, hooks)
}

// emitLocked puts wc on the completion queue. With hooks, a fault hook may
// fail or delay it; a failure, or an overrun of the queue, is returned
// and the caller must end the connection.
func (c *conn) emitLocked(wc verbs.Completion, hooks bool) error {
	var (
		delay time.Duration
		err   error
	)
	if hooks && wc.Status == verbs.StatusSuccess {
		if f, ok := c.p.faults.take(wc.Op); ok {
			delay = f.delay
			if f.status != verbs.StatusSuccess {
				wc.Status, wc.VendorErr = f.status, faultVendorErr
				err = fmt.Errorf("%w: completion of work request %d failed with %v by a test hook", verbs.ErrDisconnected, wc.ID, f.status)
			}
		}
	}
	if c.cq.push(wc, delay) && err == nil && hooks {
		err = fmt.Errorf("%w: completion queue overrun (more than %d completions not polled)", verbs.ErrDisconnected, c.cq.depth)
	}
	return err
}

// completeInOrderLocked completes the finished work requests at the head
// of the send queue; a failed one ends the connection.
func (c *conn) completeInOrderLocked() {
	for c.sqNext > 0 && c.sq.at(0).done {
		w := c.sq.pop()
		c.sqNext--
		err := c.completeLocked(w, w.status, true)
		if err == nil && w.status != verbs.StatusSuccess {
			err = fmt.Errorf("%w: %v: work request %d (%v): %v", verbs.ErrDisconnected, w.status, w.id, w.op, w.failure)
		}
		// Nothing refers to w now: it left unacked or reads when it
		// was done (onAck, onReadResponse), the reader is done
		// scattering a READ response into it before it marks it done,
		// and the sender reads nothing of a request once its last
		// byte is on the wire (writeRequest), which the peer needs to
		// acknowledge or answer it; binds and invalidations are done
		// by the sender under c.mu.
		c.recycleSendLocked(w)
		if err != nil {
			c.failLocked(err, false)
			return
		}
	}
}

// --- the sender

func (c *conn) sendable() bool {
	if c.sqNext == c.sq.len() {
		return false
	}
	return c.sq.at(c.sqNext).op != verbs.OpRDMARead || c.reads.len() < c.ord
}

func (c *conn) sendLoop() {
	defer c.wg.Done()
	defer c.nc.Close()
	for {
		c.mu.Lock()
		for c.state == stateUp && len(c.resp) == 0 && !c.sendable() {
			if c.fw.buffered() > 0 {
				c.mu.Unlock()
				if err := c.fw.flush(); err != nil {
					c.lost(err)
					return
				}
				c.mu.Lock()
				continue
			}
			c.kick.Wait()
		}
		if c.state != stateUp {
			resp, linger := c.resp, c.linger
			c.resp = nil
			c.mu.Unlock()
			if linger {
				for i := range resp {
					if c.writeResponse(&resp[i]) != nil {
						break
					}
				}
				c.fw.flush()
			}
			return
		}
		resp := c.resp
		c.resp = c.spare[:0]
		w := c.nextRequestLocked()
		c.mu.Unlock()

		for i := range resp {
			if err := c.writeResponse(&resp[i]); err != nil {
				c.sendFailed(err, nil)
				return
			}
			resp[i] = response{}
		}
		c.mu.Lock()
		c.spare = resp[:0]
		c.mu.Unlock()
		if w != nil {
			if err := c.writeRequest(w); err != nil {
				c.sendFailed(err, w)
				return
			}
		}
	}
}

// nextRequestLocked executes the local operations at the head of the
// unprocessed send queue and returns the next request to put on the wire,
// or nil.
func (c *conn) nextRequestLocked() *sendWQE {
	for c.state == stateUp && c.sendable() {
		w := c.sq.at(c.sqNext)
		c.sqNext++
		switch w.op {
		case verbs.OpBindMW, verbs.OpLocalInv:
			var err error
			st := verbs.StatusMWBindErr
			if w.op == verbs.OpBindMW {
				err = c.pd.dev.bind(c, w)
			} else {
				// rxe reports a failed local invalidation as a
				// local QP operation error: StatusGeneralErr.
				err, st = c.pd.dev.invalidate(c, w.invRKey, false), verbs.StatusGeneralErr
			}
			w.done = true
			if err != nil {
				w.status, w.failure = st, err
				w.revertBind()
			}
			c.completeInOrderLocked()
		default:
			w.seq = c.nextSeq
			c.nextSeq++
			if w.op == verbs.OpRDMARead {
				c.reads.push(w)
			} else {
				c.unacked.push(w)
			}
			return w
		}
	}
	return nil
}

// errRegionGone is a region deregistered under a work request using it.
var errRegionGone = errors.New("memory region deregistered while a work request used it")

// sendFailed ends the connection after the sender failed: a region gone
// under w is w's local protection error, anything else a lost connection.
func (c *conn) sendFailed(err error, w *sendWQE) {
	if !errors.Is(err, errRegionGone) {
		c.lost(err)
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if w != nil && !w.flushed {
		w.done, w.status, w.failure = true, verbs.StatusLocProtErr, err
	}
	c.failLocked(fmt.Errorf("%w: %v", verbs.ErrDisconnected, err), false)
}

// writeRequest puts w on the wire. It reads w only before the frame's
// last byte is buffered (the payload's last piece is gathered first), and
// so before the peer can acknowledge or answer w: once w completes it may
// be reused (completeInOrderLocked) while the sender goes on.
func (c *conn) writeRequest(w *sendWQE) error {
	f := frame{seq: w.seq, length: uint32(w.length)}
	switch w.op {
	case verbs.OpSend:
		f.typ = frameSend
	case verbs.OpSendWithInv:
		f.typ, f.flags, f.rkey = frameSend, sendFlagInvalidate, w.invRKey
	case verbs.OpRDMAWrite:
		f.typ, f.rkey, f.addr = frameWrite, w.rkey, w.raddr
	case verbs.OpRDMARead:
		f.typ, f.rkey, f.addr = frameReadReq, w.rkey, w.raddr
	}
	if err := c.fw.frame(&f); err != nil {
		return err
	}
	if f.typ == frameReadReq {
		return nil
	}
	cu := cursor{sgl: w.sgl}
	return c.fw.payload(w.length, func(dst []byte) error {
		if !cu.gather(dst) {
			return errRegionGone
		}
		return nil
	})
}

func (c *conn) writeResponse(r *response) error {
	f := frame{typ: r.typ, seq: r.seq, code: r.code}
	if r.typ == frameReadResp {
		f.length = uint32(r.n)
	}
	if err := c.fw.frame(&f); err != nil {
		return err
	}
	if r.typ != frameReadResp {
		return nil
	}
	off := r.off
	err := c.fw.payload(r.n, func(dst []byte) error {
		if !r.mr.copyOut(dst, off) {
			return errRegionGone
		}
		off += len(dst)
		return nil
	})
	c.mu.Lock()
	c.readsIn--
	c.mu.Unlock()
	return err
}

// queueLocked queues a response for the sender; consecutive ACKs become
// one (an ACK acknowledges everything up to its sequence number).
func (c *conn) queueLocked(r response) {
	if n := len(c.resp); r.typ == frameAck && n > 0 && c.resp[n-1].typ == frameAck {
		c.resp[n-1].seq = r.seq
	} else {
		c.resp = append(c.resp, r)
	}
	c.kick.Signal()
}

// nakLocked fails the peer's request seq with code and ends the
// connection once the NAK is sent, as an RC responder does.
func (c *conn) nakLocked(seq uint64, code nakCode, err error) error {
	c.queueLocked(response{typ: frameNak, seq: seq, code: code})
	c.failLocked(fmt.Errorf("%w: %v", verbs.ErrDisconnected, err), true)
	return errStop
}

// --- the reader

func (c *conn) readLoop() {
	defer c.wg.Done()
	var f frame
	for {
		if err := c.fr.next(&f); err != nil {
			c.lost(err)
			return
		}
		var err error
		switch f.typ {
		case frameSend:
			err = c.onSend(&f)
		case frameWrite:
			err = c.onWrite(&f)
		case frameReadReq:
			err = c.onReadRequest(&f)
		case frameReadResp:
			err = c.onReadResponse(&f)
		case frameAck:
			err = c.onAck(&f)
		case frameNak:
			err = c.onNak(&f)
		case frameDisconnect:
			c.fail(fmt.Errorf("%w: disconnected by the peer", verbs.ErrDisconnected), false)
			return
		default:
			err = fmt.Errorf("unexpected %v frame on an established connection", f.typ)
		}
		if err != nil {
			if err != errStop {
				c.fail(fmt.Errorf("%w: protocol error from the peer: %v", verbs.ErrDisconnected, err), false)
			}
			return
		}
	}
}

// requestLocked checks that a request of the peer is the next one.
func (c *conn) requestLocked(f *frame) error {
	if c.state != stateUp {
		return errStop
	}
	if f.seq != c.expectSeq {
		return fmt.Errorf("%v with sequence number %d, expected %d", f.typ, f.seq, c.expectSeq)
	}
	c.expectSeq++
	return nil
}

// onSend takes a SEND into the first posted receive, waiting for one (RNR)
// up to the provider's bound.
func (c *conn) onSend(f *frame) error {
	n := int(f.length)
	c.mu.Lock()
	if err := c.requestLocked(f); err != nil {
		c.mu.Unlock()
		return err
	}
	if c.rq.len() == 0 {
		wait := c.p.rnrTimeout()
		timer := time.NewTimer(wait)
		for c.rq.len() == 0 && c.state == stateUp {
			c.mu.Unlock()
			expired := false
			select {
			case <-c.recvPosted:
			case <-c.done:
			case <-timer.C:
				expired = true
			}
			c.mu.Lock()
			if expired && c.rq.len() == 0 && c.state == stateUp {
				err := c.nakLocked(f.seq, nakRNRExceeded, fmt.Errorf("the peer's SEND found no receive posted for %v (receiver not ready)", wait))
				c.mu.Unlock()
				return err
			}
		}
		timer.Stop()
		if c.state != stateUp {
			c.mu.Unlock()
			return errStop
		}
	}
	r := c.rq.pop()
	if n > r.length {
		c.emitLocked(verbs.Completion{ID: r.id, Status: verbs.StatusLocLenErr}, false)
		err := c.nakLocked(f.seq, nakInvalidRequest, fmt.Errorf("local length error: a SEND of %d bytes for a receive of %d", n, r.length))
		c.mu.Unlock()
		return err
	}
	c.rqActive = r
	c.mu.Unlock()

	gone, err := c.scatterPayload(n, r.sgl, func() bool { return r.flushed })
	if err != nil {
		c.lost(err)
		return errStop
	}

	c.mu.Lock()
	defer c.mu.Unlock()
	if r.flushed || c.state != stateUp {
		return errStop
	}
	c.rqActive = nil
	if gone {
		c.emitLocked(verbs.Completion{ID: r.id, Status: verbs.StatusLocProtErr}, false)
		return c.nakLocked(f.seq, nakRemoteOp, errRegionGone)
	}
	wc := verbs.Completion{ID: r.id, Status: verbs.StatusSuccess, Op: verbs.CompRecv, ByteLen: uint32(n)}
	if f.flags&sendFlagInvalidate != 0 {
		if err := c.pd.dev.invalidate(c, f.rkey, true); err != nil {
			c.emitLocked(verbs.Completion{ID: r.id, Status: verbs.StatusRemInvReqErr}, false)
			return c.nakLocked(f.seq, nakInvalidRequest, fmt.Errorf("the peer's SEND with invalidate: %v", err))
		}
		wc.InvalidatedRKey, wc.HasInvalidate = f.rkey, true
	}
	// r is filled and left rq and rqActive under c.mu: nothing refers to
	// it any more.
	c.recycleRecvLocked(r)
	c.queueLocked(response{typ: frameAck, seq: f.seq})
	if err := c.emitLocked(wc, true); err != nil {
		c.failLocked(err, false)
		return errStop
	}
	return nil
}

// onWrite executes the peer's RDMA WRITE.
func (c *conn) onWrite(f *frame) error {
	c.mu.Lock()
	if err := c.requestLocked(f); err != nil {
		c.mu.Unlock()
		return err
	}
	var (
		r   *mr
		off int
	)
	if f.length > 0 {
		var err error
		r, off, err = c.pd.dev.resolve(c, f.rkey, f.addr, f.length, verbs.AccessRemoteWrite)
		if err != nil {
			err = c.nakLocked(f.seq, nakRemoteAccess, fmt.Errorf("remote access error: the peer's RDMA WRITE: %v", err))
			c.mu.Unlock()
			return err
		}
	}
	c.mu.Unlock()
	err := c.fr.payload(int(f.length), func(b []byte) {
		r.copyIn(off, b) // a region deregistered meanwhile takes nothing more
		off += len(b)
	})
	if err != nil {
		c.lost(err)
		return errStop
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.state != stateUp {
		return errStop
	}
	c.queueLocked(response{typ: frameAck, seq: f.seq})
	return nil
}

// onReadRequest queues the response to the peer's RDMA READ; the sender
// reads the memory as it sends it.
func (c *conn) onReadRequest(f *frame) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if err := c.requestLocked(f); err != nil {
		return err
	}
	if c.readsIn >= c.ird {
		return c.nakLocked(f.seq, nakInvalidRequest, fmt.Errorf("the peer has more than %d RDMA Reads outstanding (responder resources)", c.ird))
	}
	resp := response{typ: frameReadResp, seq: f.seq, n: int(f.length)}
	if f.length > 0 {
		var err error
		resp.mr, resp.off, err = c.pd.dev.resolve(c, f.rkey, f.addr, f.length, verbs.AccessRemoteRead)
		if err != nil {
			return c.nakLocked(f.seq, nakRemoteAccess, fmt.Errorf("remote access error: the peer's RDMA READ: %v", err))
		}
	}
	c.readsIn++
	c.queueLocked(resp)
	return nil
}

// onReadResponse completes the oldest RDMA READ in flight.
func (c *conn) onReadResponse(f *frame) error {
	c.mu.Lock()
	if c.state != stateUp {
		c.mu.Unlock()
		return errStop
	}
	if c.reads.len() == 0 || c.reads.at(0).seq != f.seq || int(f.length) != c.reads.at(0).length {
		c.mu.Unlock()
		return fmt.Errorf("READ response %d (%d bytes) matches no READ in flight", f.seq, f.length)
	}
	w := c.reads.pop()
	c.mu.Unlock()

	gone, err := c.scatterPayload(int(f.length), w.sgl, func() bool { return w.flushed })
	if err != nil {
		c.lost(err)
		return errStop
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if w.flushed || c.state != stateUp {
		return errStop
	}
	w.done = true
	if gone {
		w.status, w.failure = verbs.StatusLocProtErr, errRegionGone
	}
	c.completeInOrderLocked()
	c.kick.Signal() // a READ slot is free
	return nil
}

// onAck completes the SENDs and WRITEs the peer acknowledged.
func (c *conn) onAck(f *frame) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.state != stateUp {
		return errStop
	}
	if f.seq >= c.nextSeq {
		return fmt.Errorf("ACK of request %d, which was not sent", f.seq)
	}
	for c.unacked.len() > 0 && c.unacked.at(0).seq <= f.seq {
		c.unacked.pop().done = true
	}
	c.completeInOrderLocked()
	return nil
}

var nakStatus = [...]verbs.Status{
	nakRemoteAccess:   verbs.StatusRemAccessErr,
	nakInvalidRequest: verbs.StatusRemInvReqErr,
	nakRNRExceeded:    verbs.StatusRNRRetryExcErr,
	nakRemoteOp:       verbs.StatusRemOpErr,
}

// onNak fails the request the peer refused, and the connection.
func (c *conn) onNak(f *frame) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.state != stateUp {
		return errStop
	}
	var w *sendWQE
	switch {
	case c.unacked.len() > 0 && c.unacked.at(0).seq == f.seq:
		w = c.unacked.at(0)
	case c.reads.len() > 0 && c.reads.at(0).seq == f.seq:
		w = c.reads.at(0)
	default:
		return fmt.Errorf("NAK of request %d, which is not in flight", f.seq)
	}
	st := nakStatus[f.code]
	w.done, w.status = true, st
	c.failLocked(fmt.Errorf("%w: %v on work request %d (%v)", verbs.ErrDisconnected, st, w.id, w.op), false)
	return errStop
}

// scatterPayload reads the current frame's n payload bytes into sgl, under
// c.mu piece by piece, and drops them once flushed() (checked under c.mu)
// says the work request they were for is gone. gone reports that a region
// of sgl was deregistered on the way.
func (c *conn) scatterPayload(n int, sgl []sge, flushed func() bool) (gone bool, err error) {
	cu := cursor{sgl: sgl}
	err = c.fr.payload(n, func(b []byte) {
		c.mu.Lock()
		if !flushed() && !gone {
			gone = !cu.scatter(b)
		}
		c.mu.Unlock()
	})
	return gone, err
}
