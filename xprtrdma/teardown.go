package xprtrdma

import (
	"errors"
	"time"

	"github.com/rdmafs/rdmafs/rpcrdma"
	"github.com/rdmafs/rdmafs/sunrpc"
)

// The end of a connection: stop posting, destroy the queue pair, and give
// back what calls that will never complete hold (the kernel's
// rpcrdma_xprt_disconnect in verbs.c).

// fail ends the connection because of err; calls waiting on it return
// ErrDisconnected. Teardown happens in the background once the queue pair
// is gone.
func (ep *endpoint) fail(err error) {
	if !ep.calls.Fail(err) {
		return
	}
	ep.mu.Lock()
	if ep.idle != nil {
		ep.idle.Stop()
	}
	ep.mu.Unlock()
	ep.t.dropped(ep, err)
	go ep.teardown()
}

// watchEnd fails the endpoint when its connection ends (the peer
// disconnected, the device went away), which nobody polling the
// completion queue notices while no call waits for a reply.
func (ep *endpoint) watchEnd() {
	<-ep.conn.Done()
	ep.fail(ep.conn.Err())
}

// drainWait is how long teardown waits for the turn at the completion
// queue, and then for the flush of everything posted.
const drainWait = 5 * time.Second

// slowDestroy is how long the destruction of a connection may take before
// it is logged.
const slowDestroy = 5 * time.Second

// teardown destroys the queue pair, after which the server can reach none
// of the endpoint's memory, and gives back every buffer of calls that will
// never complete.
func (ep *endpoint) teardown() {
	ep.postMu.Lock()
	ep.closed = true
	ep.postMu.Unlock()
	if ep.conn != nil {
		// The queue pair goes to the error state, everything posted on
		// it flushes, and teardown, which takes the turn at the
		// completion queue for good, sees that. Then the windows go,
		// before the queue pair: rxe holds a reference to a queue pair
		// for every window bound on it, and destroying the queue pair
		// waits up to 50 s for them (the windows of calls lost with a
		// connection are still bound).
		ep.conn.Disconnect()
		close(ep.fenced)
		turned := ep.keepTurn(drainWait)
		if turned && ep.drain(drainWait) && ep.reg != nil {
			ep.reg.close()
		}
		// Otherwise the device does not flush: the windows go after
		// the queue pair.
		start := time.Now()
		ep.conn.Close()
		if d := time.Since(start); d > slowDestroy {
			// rxe, for one, waits up to 50 s for references to a queue
			// pair that are not given back; the admin should know why
			// the daemon lingers.
			ep.t.logf("xprtrdma: %s: the device took %v to destroy the queue pair of a connection that ended", ep.t.cfg.Addr, d.Round(time.Second))
		}
		if !turned {
			<-ep.turn // its holder found the queue gone
		}
	} else {
		close(ep.fenced)
	}
	// Nothing completes any more: the Sends whose completions did not
	// come (unsignaled ones after the last signaled) are done.
	ep.sends.drain(ep.sendDone)
	ep.mu.Lock()
	var stuck []*request
	for i := range ep.reqs {
		if r := &ep.reqs[i]; r.state == reqPosted || r.state == reqRevoking {
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
		ep.reg.forget(r)
	}
	ep.release()
	close(ep.down)
}

// release frees the endpoint's verbs resources.
func (ep *endpoint) release() {
	ep.t.removeEndpoint(ep)
	// Windows first: a region with windows bound cannot be
	// deregistered.
	if ep.reg != nil {
		ep.reg.close()
	}
	ep.chunks.close()
	ep.small.close()
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
	idle := ep.inflight == 0 && ep.calls.Len() == 0
	ep.mu.Unlock()
	if idle {
		ep.fail(errIdle)
	}
}

var errIdle = errors.New("idle")

// releaseReply gives back the reply buffers of a call that will never be
// delivered.
func (ep *endpoint) releaseReply(r *request) {
	for _, b := range []*rpcrdma.Block{r.recv, r.write, r.reply} {
		if b != nil {
			b.Release()
		}
	}
	r.recv, r.write, r.reply = nil, nil, nil
	r.result = sunrpc.Reply{}
}
