package xprtrdma

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rdmafs/rdmafs/rpcrdma"
	"github.com/rdmafs/rdmafs/sunrpc"
	"github.com/rdmafs/rdmafs/verbs"
)

// endpoint is one connection to the server and its verbs resources: the
// device, a protection domain, the arenas' registrations, the queue pair,
// and the table of calls in flight (like the kernel's rpcrdma_ep). A new
// connection gets a new endpoint; the arenas stay with the transport.
type endpoint struct {
	t       *Transport
	dev     verbs.Device
	pd      verbs.PD
	conn    verbs.Conn
	smallMR verbs.MR
	chunkMR verbs.MR
	reg     registrar

	inlineSend, inlineRecv int // negotiated with the server (RFC 8797)
	credits                int // asked of the server: slot_table_entries, or what the device holds

	// postMu orders posting against teardown: RoundTrip holds it shared
	// while it posts, teardown exclusively before it destroys the queue
	// pair.
	postMu sync.RWMutex
	closed bool // under postMu

	mu       sync.Mutex
	granted  int // credits the server granted, at least 1
	inflight int // calls holding a credit
	wake     chan struct{}
	pending  map[uint32]*request
	reqs     []request
	free     []*request
	err      error
	lost     chan struct{}
	loopDone chan struct{} // closed when the completion loop ends
	down     chan struct{} // closed when teardown has released everything
	idle     *time.Timer

	hdr    rpcrdma.Header // the completion loop's header scratch
	worked atomic.Bool    // a reply came: the connection is good
}

// dial makes a connection to the server and its endpoint.
func (t *Transport) dial(ctx context.Context) (*endpoint, error) {
	cfg := &t.cfg
	t.stats.bindCount.Add(1)
	dev, err := cfg.Provider.Open(ctx, "", cfg.Addr)
	if err != nil {
		return nil, err
	}
	ep := &endpoint{t: t, dev: dev, lost: make(chan struct{}), wake: make(chan struct{}),
		loopDone: make(chan struct{}), down: make(chan struct{}), granted: 1, pending: make(map[uint32]*request)}
	if err := ep.setup(ctx); err != nil {
		ep.release()
		return nil, err
	}
	ep.idle = time.AfterFunc(cfg.IdleTimeout, ep.closeIfIdle)
	go ep.completions()
	return ep, nil
}

// setup allocates the protection domain, chooses the registration
// strategy and the credits the device can serve, connects, and registers
// the arenas (after the connect: an attempt the server refuses costs no
// registration).
func (ep *endpoint) setup(ctx context.Context) error {
	t := ep.t
	cfg := &t.cfg
	var err error
	if ep.pd, err = ep.dev.AllocPD(); err != nil {
		return err
	}
	caps := ep.dev.Caps()
	memreg := cfg.MemReg
	if memreg == MemRegMW && !caps.MemoryWindows {
		t.logOnce("memreg=mw: device %s has no memory windows; registering per call instead (memreg=register)", ep.dev.Name())
		memreg = MemRegRegister
	}
	switch memreg {
	case MemRegMW:
		ep.reg = &windows{ep: ep}
	case MemRegRegister:
		ep.reg = perCall{ep: ep}
	default:
		ep.reg = persistent{ep: ep}
	}
	ep.credits = fitCredits(cfg.Credits, memreg, caps)
	if ep.credits < cfg.Credits {
		send, recv := queueDepths(cfg.Credits, memreg)
		t.logOnce("slot_table_entries=%d: device %s holds %d work requests per queue and %d completions, "+
			"%d credits with memreg=%v need %d and %d; asking for %d credits",
			cfg.Credits, ep.dev.Name(), caps.MaxQPWR, caps.MaxCQE, cfg.Credits, memreg, max(send, recv), send+recv, ep.credits)
	}
	ep.reqs = make([]request, ep.credits)
	for i := range ep.reqs {
		ep.reqs[i].slot = i
		ep.free = append(ep.free, &ep.reqs[i])
	}

	send, recv := queueDepths(ep.credits, memreg)
	own := rpcrdma.PrivateData{SendSize: cfg.MaxInlineWrite, RecvSize: cfg.MaxInlineRead}
	if remoteInvalidateOK(memreg) {
		own.Flags |= rpcrdma.PrivRemoteInvalidate
	}
	start := time.Now()
	ep.conn, err = ep.pd.Dial(ctx, cfg.Addr, verbs.ConnConfig{
		SendDepth: send, RecvDepth: recv,
		MaxSendSGE: 3, MaxRecvSGE: 1,
		// The server pulls read chunks with RDMA Read: let it have as
		// many outstanding as the device allows (Linux asks for up to
		// 255; svcrdma refuses 0). The client issues none.
		ResponderResources: uint8(min(max(caps.MaxQPRdAtom, 1), 255)),
		InitiatorDepth:     0,
		PrivateData:        own.Encode(),
		Timeout:            cfg.ConnectTimeout,
	})
	t.stats.connectTime.Add(int64(time.Since(start)))
	if err != nil {
		return err
	}
	if err := ep.register(); err != nil {
		ep.conn.Close()
		ep.conn = nil
		return err
	}
	t.stats.connectCount.Add(1)
	peer, _ := rpcrdma.DecodePrivateData(ep.conn.PeerPrivateData())
	ep.inlineSend = min(cfg.MaxInlineWrite, peer.RecvSize, t.small.BlockSize())
	ep.inlineRecv = min(cfg.MaxInlineRead, peer.SendSize, t.small.BlockSize())
	return nil
}

// register registers the transport's arenas in the endpoint's PD.
func (ep *endpoint) register() error {
	t := ep.t
	var err error
	if ep.smallMR, err = ep.pd.Register(t.small.Mem(), 0, len(t.small.Mem().Bytes()), verbs.AccessLocalWrite); err != nil {
		return fmt.Errorf("registering the Send and Receive buffers: %w", err)
	}
	if ep.chunkMR, err = ep.pd.Register(t.chunks.Mem(), 0, len(t.chunks.Mem().Bytes()), ep.reg.arenaAccess()); err != nil {
		return fmt.Errorf("registering the chunk buffers: %w", err)
	}
	return nil
}

// queueDepths are the work requests a connection's queues must hold for
// n credits under strategy m: per call a Send and, with memory windows,
// up to two binds and two local invalidations; a Receive per call; and
// some spare.
func queueDepths(n int, m MemReg) (send, recv int) {
	perCall := 1
	if m == MemRegMW {
		perCall = 5
	}
	return perCall*n + 8, n + 8
}

// fitCredits is the largest number of credits, up to want, whose queues
// and completion queue the device can hold (as the Linux client lowers
// its slot table to what the device takes).
func fitCredits(want int, m MemReg, caps verbs.Caps) int {
	fits := func(n int) bool {
		send, recv := queueDepths(n, m)
		return (caps.MaxQPWR <= 0 || max(send, recv) <= caps.MaxQPWR) &&
			(caps.MaxCQE <= 0 || send+recv <= caps.MaxCQE)
	}
	if fits(want) {
		return want
	}
	lo, hi := 1, want
	for lo < hi {
		mid := (lo + hi + 1) / 2
		if fits(mid) {
			lo = mid
		} else {
			hi = mid - 1
		}
	}
	return lo
}

// credit takes a credit and a request for a call, waiting while as many
// calls are out as the server granted.
func (ep *endpoint) credit(ctx context.Context, deadline <-chan time.Time) (*request, error) {
	t := ep.t
	waited := false
	for {
		ep.mu.Lock()
		if ep.err != nil {
			ep.mu.Unlock()
			if waited {
				t.stats.backlog.Add(-1)
			}
			return nil, fmt.Errorf("rpcrdma: %w: %v", sunrpc.ErrDisconnected, ep.err)
		}
		if ep.inflight < ep.granted && len(ep.free) > 0 {
			ep.inflight++
			r := ep.free[len(ep.free)-1]
			ep.free = ep.free[:len(ep.free)-1]
			ep.idle.Stop()
			ep.mu.Unlock()
			if waited {
				t.stats.backlog.Add(-1)
			}
			return r, nil
		}
		wake := ep.wake
		ep.mu.Unlock()
		if !waited {
			waited = true
			t.stats.backlog.Add(1)
			t.stats.creditWaits.Add(1)
		}
		select {
		case <-wake:
		case <-ep.lost:
		case <-ctx.Done():
			t.stats.backlog.Add(-1)
			return nil, ctx.Err()
		case <-deadline:
			t.stats.backlog.Add(-1)
			return nil, sunrpc.ErrTimeout
		}
	}
}

// wakeLocked wakes calls waiting for a credit. The caller holds ep.mu.
func (ep *endpoint) wakeLocked() {
	close(ep.wake)
	ep.wake = make(chan struct{})
}

// send sends call with the credit and request r (from credit) and
// registers it for its reply; the reply completes r. Every wait (for a
// Send or Receive buffer, for a chunk buffer) comes before the post lock,
// and ends when the connection does, so teardown never waits for a call
// that waits.
func (ep *endpoint) send(ctx context.Context, r *request, call *sunrpc.Call) error {
	t := ep.t
	ep.mu.Lock()
	r.reset(call)
	ep.mu.Unlock()
	var recv *rpcrdma.Block
	fail := func(err error) error {
		if recv != nil {
			recv.Release()
		}
		ep.mu.Lock()
		delete(ep.pending, call.Xid)
		ep.mu.Unlock()
		ep.unwind(r)
		return err
	}
	p, err := ep.plan(call)
	if err != nil {
		t.stats.failedMarshal.Add(1)
		return fail(err)
	}
	if r.send, err = t.small.Get(ctx, ep.lost); err != nil {
		return fail(ep.waitError(err))
	}
	if recv, err = t.small.Get(ctx, ep.lost); err != nil {
		return fail(ep.waitError(err))
	}
	if err := ep.take(ctx, r, &p); err != nil {
		return fail(ep.waitError(err))
	}

	ep.postMu.RLock()
	defer ep.postMu.RUnlock()
	if ep.closed {
		return fail(fmt.Errorf("rpcrdma: %w", sunrpc.ErrDisconnected))
	}
	// From here teardown, which waits for the post lock, finds the call
	// in flight and owns its buffers if it never completes; before, the
	// call's own failure gives them back (never both).
	ep.mu.Lock()
	ep.pending[call.Xid] = r
	r.posted = true
	ep.mu.Unlock()
	var wr verbs.SendWR
	var sgl [3]verbs.SGE
	var h rpcrdma.Header
	if err := ep.marshal(r, &p, &h, &wr, &sgl); err != nil {
		// A bind or registration failed: the connection is broken.
		// Registrations made for the call are undone here; windows bound
		// for it can only be invalidated by ending the connection (an
		// invalidation would complete after the request is gone).
		ep.revokeUnsent(r)
		ep.fail(err)
		return fail(fmt.Errorf("rpcrdma: %w: %v", sunrpc.ErrDisconnected, err))
	}
	// A Receive for the reply goes up before the Send.
	err = ep.postRecv(recv)
	recv = nil // posted, or given back by postRecv
	if err != nil {
		ep.revokeUnsent(r)
		ep.fail(err)
		return fail(fmt.Errorf("rpcrdma: %w: %v", sunrpc.ErrDisconnected, err))
	}
	ep.mu.Lock()
	r.waiting++ // the Send's completion
	ep.mu.Unlock()
	t.stats.sends.Add(1)
	t.stats.reqU.Add(uint64(t.stats.inflight.Load()))
	t.stats.bklogU.Add(uint64(t.stats.backlog.Load()))
	call.SentAt = time.Now()
	if err := ep.conn.PostSend(&wr); err != nil {
		ep.fail(err)
		ep.mu.Lock()
		r.waiting--
		ep.mu.Unlock()
		return fail(fmt.Errorf("rpcrdma: %w: %v", sunrpc.ErrDisconnected, err))
	}
	return nil
}

// waitError is the error of a call whose wait for a buffer ended: the
// context's, or the connection's end.
func (ep *endpoint) waitError(err error) error {
	if errors.Is(err, rpcrdma.ErrLost) {
		return fmt.Errorf("rpcrdma: %w: %v", sunrpc.ErrDisconnected, ep.cause())
	}
	return err
}

// revokeUnsent undoes the per-call registrations of a call that will not
// be sent. (Its windows, if any, die with the connection, which the
// caller ends.)
func (ep *endpoint) revokeUnsent(r *request) {
	if _, ok := ep.reg.(perCall); ok {
		ep.reg.revoke(r, 0, false)
	}
}

// unwind gives back what a call that was never sent took: its blocks and
// its credit. Its exposures were revoked or never posted.
func (ep *endpoint) unwind(r *request) {
	for _, b := range []*rpcrdma.Block{r.send, r.write, r.reply, r.stage} {
		if b != nil {
			b.Release()
		}
	}
	r.send, r.write, r.reply, r.stage, r.call = nil, nil, nil, nil, nil
	ep.mu.Lock()
	ep.free = append(ep.free, r)
	ep.mu.Unlock()
	ep.returnCredit()
}

func (ep *endpoint) returnCredit() {
	ep.mu.Lock()
	ep.inflight--
	ep.wakeLocked()
	if ep.inflight == 0 && ep.err == nil {
		ep.idle.Reset(ep.t.cfg.IdleTimeout)
	}
	ep.mu.Unlock()
}

// postRecv posts the Receive buffer b, or gives it back if it cannot.
func (ep *endpoint) postRecv(b *rpcrdma.Block) error {
	sge := [1]verbs.SGE{{MR: ep.smallMR, Offset: b.Off(), Length: ep.t.small.BlockSize()}}
	if err := ep.conn.PostRecv(&verbs.RecvWR{ID: rpcrdma.WRID(wrRecv, b.Index()), SGL: sge[:]}); err != nil {
		b.Release()
		return err
	}
	return nil
}

// abandon is called when the caller of r stops waiting (a timeout, an
// interrupt, a lost connection). It reports whether the reply was already
// delivered, in which case the caller must take it.
func (ep *endpoint) abandon(r *request) (delivered bool) {
	ep.mu.Lock()
	defer ep.mu.Unlock()
	if r.delivered {
		return true
	}
	r.abandoned = true
	return false
}

// completions handles the connection's work completions until it ends.
func (ep *endpoint) completions() {
	defer close(ep.loopDone)
	wcs := make([]verbs.Completion, 32)
	ctx := context.Background()
	for {
		n, err := ep.conn.Poll(wcs)
		if err != nil {
			ep.fail(err)
			return
		}
		for i := range wcs[:n] {
			ep.complete(&wcs[i])
		}
		if n == len(wcs) {
			continue // maybe more
		}
		// Wait polls before it sleeps: no empty Poll first.
		if err := ep.conn.Wait(ctx); err != nil {
			// Drain what the flush produced, then stop.
			for {
				n, perr := ep.conn.Poll(wcs)
				for i := range wcs[:n] {
					ep.complete(&wcs[i])
				}
				if n == 0 || perr != nil {
					break
				}
			}
			ep.fail(err)
			return
		}
	}
}

// complete handles one work completion.
func (ep *endpoint) complete(wc *verbs.Completion) {
	kind, n := rpcrdma.SplitWRID(wc.ID)
	if wc.Status != verbs.StatusSuccess && wc.Status != verbs.StatusWRFlushErr {
		ep.fail(wc.Err())
	}
	switch kind {
	case wrRecv:
		b := ep.t.small.Block(n)
		if wc.Status != verbs.StatusSuccess {
			b.Release()
			return
		}
		ep.t.stats.recvs.Add(1)
		ep.reply(b, int(wc.ByteLen), wc.InvalidatedRKey, wc.HasInvalidate)
	case wrSend, wrLocalInv:
		if n < 0 || n >= len(ep.reqs) {
			return
		}
		r := &ep.reqs[n]
		ep.mu.Lock()
		r.waiting--
		if kind == wrLocalInv {
			if w, ok := ep.reg.(*windows); ok {
				w.invalidated(r)
			}
			r.ready = r.replied
		}
		ep.mu.Unlock()
		ep.settle(r)
	case wrBind:
		// Binds are unsignaled; one that fails broke the connection.
	}
}

// reply handles a Receive: it decodes the transport header, finds the call
// and completes it.
func (ep *endpoint) reply(b *rpcrdma.Block, n int, inv uint32, hasInv bool) {
	t := ep.t
	data := b.Bytes()[:n]
	h := &ep.hdr
	hlen, derr := h.Decode(data)
	if derr != nil && len(data) < 4 {
		t.stats.badReplies.Add(1)
		b.Release()
		return
	}
	if derr != nil {
		h.Xid = uint32(data[0])<<24 | uint32(data[1])<<16 | uint32(data[2])<<8 | uint32(data[3])
	}
	ep.mu.Lock()
	r := ep.pending[h.Xid]
	if r == nil {
		ep.mu.Unlock()
		t.stats.badXids.Add(1)
		b.Release()
		return
	}
	delete(ep.pending, h.Xid)
	if derr == nil && h.Vers == rpcrdma.Version {
		// A grant of 0 counts as 1; more than asked for is not used.
		ep.granted = min(max(int(h.Credits), 1), ep.credits)
	}
	r.replied = true
	r.recv = b
	ep.inflight--
	ep.wakeLocked()
	ep.mu.Unlock()

	var err error
	switch {
	case derr != nil:
		err = fmt.Errorf("%w: %v", ErrBadReply, derr)
	case h.Vers != rpcrdma.Version:
		err = fmt.Errorf("%w: transport header version %d", ErrBadReply, h.Vers)
	case h.Proc == rpcrdma.ProcError:
		err = &RDMAError{Code: h.ErrCode, Low: h.VersLow, High: h.VersHigh}
	}
	var msg, payload []byte
	if err == nil {
		msg, payload, err = parseReply(r, h, data, hlen)
	}
	if err != nil {
		t.stats.badReplies.Add(1)
	} else {
		if !ep.worked.Swap(true) {
			t.connected()
		}
		t.stats.rdmaReplyBytes.Add(uint64(len(payload)))
		if h.Proc == rpcrdma.ProcNoMsg {
			t.stats.rdmaReplyBytes.Add(uint64(len(msg)))
		}
	}
	ep.mu.Lock()
	if !r.abandoned {
		// The caller still waits: the call is still its own.
		r.call.Reply = sunrpc.Reply{Msg: msg, Payload: payload, Err: err}
	}
	ep.mu.Unlock()

	// No rkey of the call may work once it completes.
	// The device reports which rkey a Send With Invalidate killed; the
	// client said it accepts them (RFC 8797), whatever the server's flags.
	wait, rerr := ep.reg.revoke(r, inv, hasInv)
	ep.mu.Lock()
	if rerr != nil {
		ep.mu.Unlock()
		ep.fail(rerr)
		ep.mu.Lock()
	}
	if wait {
		r.waiting++
	} else {
		r.ready = true
	}
	ep.mu.Unlock()
	ep.settle(r)
}

// settle delivers r's reply once it is ready, and frees r once nothing of
// it is in flight.
func (ep *endpoint) settle(r *request) {
	ep.mu.Lock()
	if r.ready && !r.delivered {
		r.delivered = true
		if r.abandoned {
			ep.mu.Unlock()
			ep.releaseReply(r)
			ep.mu.Lock()
		} else {
			bufs := replyBufferPool.Get().(*replyBuffers)
			bufs.blocks = [3]*rpcrdma.Block{r.recv, r.write, r.reply}
			r.recv, r.write, r.reply = nil, nil, nil
			r.call.Reply.SetBuffer(bufs)
			r.call.Done() <- struct{}{}
		}
	}
	if r.delivered && r.waiting == 0 && r.call != nil {
		if r.send != nil {
			r.send.Release()
			r.send = nil
		}
		if r.stage != nil {
			r.stage.Release()
			r.stage = nil
		}
		r.call = nil
		ep.free = append(ep.free, r)
		ep.wakeLocked()
	}
	ep.mu.Unlock()
}

// releaseReply gives back the reply buffers of a call nobody waits for.
func (ep *endpoint) releaseReply(r *request) {
	for _, b := range []*rpcrdma.Block{r.recv, r.write, r.reply} {
		if b != nil {
			b.Release()
		}
	}
	r.recv, r.write, r.reply = nil, nil, nil
}

// fail ends the connection because of err; calls waiting on it see lost
// closed. Teardown happens in the background once the queue pair is gone.
func (ep *endpoint) fail(err error) {
	ep.mu.Lock()
	if ep.err != nil {
		ep.mu.Unlock()
		return
	}
	ep.err = err
	close(ep.lost)
	if ep.idle != nil {
		ep.idle.Stop()
	}
	ep.mu.Unlock()
	ep.t.dropped(ep, err)
	go ep.teardown()
}

// teardown destroys the queue pair, after which the server can reach none
// of the endpoint's memory, and gives back every buffer of calls that will
// never complete.
func (ep *endpoint) teardown() {
	ep.postMu.Lock()
	ep.closed = true
	ep.postMu.Unlock()
	if ep.conn != nil {
		ep.conn.Close()
		<-ep.loopDone
	}
	ep.mu.Lock()
	for xid, r := range ep.pending {
		delete(ep.pending, xid)
		r.abandoned = true
	}
	var stuck []*request
	for i := range ep.reqs {
		if r := &ep.reqs[i]; r.call != nil && r.posted && !r.delivered {
			stuck = append(stuck, r)
		}
	}
	ep.mu.Unlock()
	for _, r := range stuck {
		ep.releaseReply(r)
		for _, b := range []*rpcrdma.Block{r.send, r.stage} {
			if b != nil {
				b.Release()
			}
		}
		r.send, r.stage = nil, nil
		if p, ok := ep.reg.(perCall); ok {
			p.revoke(r, 0, false)
		}
	}
	ep.release()
	close(ep.down)
}

// release frees the endpoint's verbs resources.
func (ep *endpoint) release() {
	if ep.chunkMR != nil {
		ep.chunkMR.Deregister()
	}
	if ep.smallMR != nil {
		ep.smallMR.Deregister()
	}
	if w, ok := ep.reg.(*windows); ok {
		for _, mw := range w.free {
			mw.Close()
		}
		for i := range ep.reqs {
			for _, b := range append(ep.reqs[i].mws, ep.reqs[i].invalidating...) {
				b.mw.Close()
			}
		}
	}
	if ep.pd != nil {
		ep.pd.Close()
	}
	if ep.dev != nil {
		ep.dev.Close()
	}
}

// closeIfIdle drops a connection nobody used for the idle timeout.
func (ep *endpoint) closeIfIdle() {
	ep.mu.Lock()
	idle := ep.inflight == 0 && len(ep.pending) == 0
	ep.mu.Unlock()
	if idle {
		ep.fail(errIdle)
	}
}

var errIdle = errors.New("idle")
