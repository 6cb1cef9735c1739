package xprtrdma

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/rdmafs/rdmafs/rpcrdma"
	"github.com/rdmafs/rdmafs/sunrpc"
	"github.com/rdmafs/rdmafs/verbs"
)

// The send path: a call that holds a credit takes its buffers, passes the
// post lock into the table of calls in flight, and has its Receive and
// then its Send posted, the Send in one post with the binds of its memory
// windows chained before it (the kernel's xprt_rdma_send_request and
// rpcrdma_post_sends, and frwr_send, which chains its registrations).

// send sends call with the credit and request r (from credit) and
// registers it for its reply; the reply completes r. Every wait (for a
// Send or Receive buffer, for a chunk buffer) comes before the post lock,
// and ends at the try's deadline or when the connection does, so teardown
// never waits for a call that waits.
func (ep *endpoint) send(ctx context.Context, deadline time.Time, r *request, call *sunrpc.Call) error {
	t := ep.t
	ep.mu.Lock()
	r.reset(call)
	ep.mu.Unlock()
	var recv *rpcrdma.Block
	fail := func(err error) error {
		if recv != nil {
			recv.Release()
		}
		ep.calls.Remove(call)
		ep.unwind(r)
		return err
	}
	p, err := ep.plan(call)
	if err != nil {
		t.stats.failedMarshal.Add(1)
		return fail(err)
	}
	if r.send, err = ep.getBlock(ctx, deadline, t.small); err != nil {
		return fail(ep.waitError(err))
	}
	if recv, err = ep.getBlock(ctx, deadline, t.small); err != nil {
		return fail(ep.waitError(err))
	}
	if err := ep.take(ctx, deadline, r, &p); err != nil {
		return fail(ep.waitError(err))
	}

	ep.postMu.RLock()
	defer ep.postMu.RUnlock()
	if ep.closed {
		return fail(fmt.Errorf("xprtrdma: %w", sunrpc.ErrDisconnected))
	}
	// From here teardown, which waits for the post lock, finds the call
	// in flight and owns its buffers if it never completes; before, the
	// call's own failure gives them back (never both).
	if err := ep.calls.Add(call, r); err != nil {
		return fail(fmt.Errorf("xprtrdma: %w", err))
	}
	ep.mu.Lock()
	r.state = reqPosted
	ep.mu.Unlock()
	var h rpcrdma.Header
	if err := ep.marshal(r, &p, &h); err != nil {
		// A chunk could not be exposed (a registration or a window
		// failed; nothing was posted): the connection is dropped.
		ep.reg.forget(r)
		ep.fail(err)
		return fail(fmt.Errorf("xprtrdma: %w: %v", sunrpc.ErrDisconnected, err))
	}
	// A Receive for the reply goes up before the Send.
	err = ep.postRecv(r, recv)
	recv = nil // posted, or given back by postRecv
	if err != nil {
		ep.reg.forget(r)
		ep.fail(err)
		return fail(fmt.Errorf("xprtrdma: %w: %v", sunrpc.ErrDisconnected, err))
	}
	ep.mu.Lock()
	r.waiting++ // the Send's completion
	ep.mu.Unlock()
	t.stats.Sent()
	call.SentAt = time.Now()
	if err := ep.sends.post(ep.conn, r); err != nil {
		// The Send was not posted, and maybe not all of the binds
		// before it were (verbs.PostError): forget leaves the windows
		// bound until close.
		ep.reg.forget(r)
		ep.fail(err)
		ep.mu.Lock()
		r.waiting--
		ep.mu.Unlock()
		return fail(fmt.Errorf("xprtrdma: %w: %v", sunrpc.ErrDisconnected, err))
	}
	return nil
}

// getBlock takes a free block of a or, when there is none, waits for one
// until the try's deadline, ctx's end or the connection's. Only a call
// that has to wait pays for the deadline's context and timer.
func (ep *endpoint) getBlock(ctx context.Context, deadline time.Time, a *rpcrdma.Arena) (*rpcrdma.Block, error) {
	if b := a.TryGetOrGrow(); b != nil {
		return b, nil
	}
	wctx, cancel := context.WithDeadline(ctx, deadline)
	defer cancel()
	return a.Get(wctx, ep.calls.Lost())
}

// waitError is the error of a call whose wait for a buffer ended: the
// context's, or the connection's end.
func (ep *endpoint) waitError(err error) error {
	if errors.Is(err, rpcrdma.ErrLost) {
		return fmt.Errorf("xprtrdma: %w: %v", sunrpc.ErrDisconnected, ep.cause())
	}
	return err
}

// unwind gives back what a call that was never sent took: its blocks and
// its credit. Its exposures were revoked or never posted.
func (ep *endpoint) unwind(r *request) {
	for _, b := range []*rpcrdma.Block{r.send, r.write, r.reply, r.stage} {
		if b != nil {
			b.Release()
		}
	}
	ep.mu.Lock()
	// Under the lock: teardown looks at every request's state.
	r.send, r.write, r.reply, r.stage, r.call = nil, nil, nil, nil, nil
	r.state = reqFree
	ep.free = append(ep.free, r)
	ep.mu.Unlock()
	ep.returnCredit()
}

// postRecv posts the Receive buffer b, which goes up before r's Send (with
// r's work request), or gives it back if it cannot.
func (ep *endpoint) postRecv(r *request, b *rpcrdma.Block) error {
	mr, off, err := ep.small.at(b.Off())
	if err != nil {
		b.Release()
		return err
	}
	r.recvSGL[0] = verbs.SGE{MR: mr, Offset: off, Length: ep.t.small.BlockSize()}
	r.recvWR = verbs.RecvWR{ID: rpcrdma.WRID(wrRecv, b.Index()), SGL: r.recvSGL[:]}
	if err := ep.conn.PostRecv(&r.recvWR); err != nil {
		b.Release()
		return err
	}
	return nil
}
