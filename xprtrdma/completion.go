package xprtrdma

import (
	"context"

	"github.com/rdmafs/rdmafs/rpcrdma"
	"github.com/rdmafs/rdmafs/verbs"
)

// The completion loop: every work completion of a connection comes
// through here (the kernel's rpcrdma_wc_* handlers in verbs.c).

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
		ep.t.stats.Recvs.Add(1)
		ep.reply(b, int(wc.ByteLen), wc.InvalidatedRKey, wc.HasInvalidate)
	case wrSend:
		if n < 0 || n >= len(ep.reqs) {
			return
		}
		// This Send is done, and every one posted before it.
		ep.sends.completed(&ep.reqs[n], ep.sendDone)
	case wrLocalInv:
		if n < 0 || n >= len(ep.reqs) {
			return
		}
		r := &ep.reqs[n]
		ep.mu.Lock()
		r.waiting--
		ep.reg.invalidated(r)
		ep.mu.Unlock()
		ep.deliver(r) // its exposures are revoked
		ep.settle(r)
	case wrBind:
		// Binds are unsignaled; one that fails broke the connection.
	}
}

// sendDone learns that r's Send is done: its buffer is free once its
// reply is delivered.
func (ep *endpoint) sendDone(r *request) {
	ep.mu.Lock()
	r.waiting--
	ep.mu.Unlock()
	ep.settle(r)
}
