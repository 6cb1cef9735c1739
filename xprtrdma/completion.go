package xprtrdma

import (
	"github.com/rdmafs/rdmafs/rpcrdma"
	"github.com/rdmafs/rdmafs/verbs"
)

// Completions: every work completion of a connection comes through
// complete (the kernel's rpcrdma_wc_* handlers in verbs.c). No goroutine
// of its own polls the completion queue: one goroutine at a time does,
// the one that holds the connection's turn (reaper.go), which is a caller
// waiting for its reply while nobody polls.

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
