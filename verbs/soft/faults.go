package soft

import (
	"sync"
	"time"

	"github.com/rdmafs/rdmafs/verbs"
)

// Fault hooks, for tests of the layers above verbs. They act on every
// device, listener and connection of the Provider they are called on.

type completionFault struct {
	status verbs.Status
	delay  time.Duration
}

type faults struct {
	mu     sync.Mutex
	refuse int // connection requests to reject; < 0: all
	next   map[verbs.CompletionOp]completionFault
}

// take returns (and forgets) the fault set for the next completion of op.
func (f *faults) take(op verbs.CompletionOp) (completionFault, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	cf, ok := f.next[op]
	if ok {
		delete(f.next, op)
	}
	return cf, ok
}

func (f *faults) set(op verbs.CompletionOp, cf completionFault) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.next == nil {
		f.next = make(map[verbs.CompletionOp]completionFault)
	}
	f.next[op] = cf
}

// takeRefuse reports whether to refuse a connection request.
func (f *faults) takeRefuse() bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	switch {
	case f.refuse < 0:
		return true
	case f.refuse > 0:
		f.refuse--
		return true
	}
	return false
}

// RefuseConnects is a test hook: this provider's listeners reject the next
// n connection requests (n < 0: all of them until RefuseConnects(0))
// before Accept sees them; the dialer gets a *verbs.RejectError with
// Reason 28 and no private data.
func (p *Provider) RefuseConnects(n int) {
	p.faults.mu.Lock()
	defer p.faults.mu.Unlock()
	p.faults.refuse = n
}

// DropConnections is a test hook: it breaks every open connection of this
// provider at once, as a failed link would: each ends with an error
// (wrapping verbs.ErrDisconnected) and flushes its work requests, and the
// peer sees the TCP connection reset. It returns how many it dropped.
func (p *Provider) DropConnections() int {
	p.mu.Lock()
	cs := make([]*conn, 0, len(p.conns))
	for c := range p.conns {
		cs = append(cs, c)
	}
	p.mu.Unlock()
	n := 0
	for _, c := range cs {
		if !c.ended() {
			c.drop()
			n++
		}
	}
	return n
}

// Drop is a test hook: it breaks c, a connection of a soft provider, as
// DropConnections does. It reports false for another provider's
// connection.
func Drop(c verbs.Conn) bool {
	sc, ok := c.(*conn)
	if ok {
		sc.drop()
	}
	return ok
}

// FailNextCompletion is a test hook: the next successful completion of op
// on any connection of this provider is delivered with status st instead
// (and VendorErr 0x50f7). As on hardware, an error completion ends the
// connection: the work requests after it are flushed and the peer sees
// the connection break. A signaled work request is needed for a send-side
// completion to be seen.
func (p *Provider) FailNextCompletion(op verbs.CompletionOp, st verbs.Status) {
	p.faults.set(op, completionFault{status: st})
}

// DelayNextCompletion is a test hook: the next successful completion of
// op on any connection of this provider becomes visible to Poll only
// after d, and so do the completions that connection produces meanwhile
// (they stay in order).
func (p *Provider) DelayNextCompletion(op verbs.CompletionOp, d time.Duration) {
	p.faults.set(op, completionFault{delay: d})
}
