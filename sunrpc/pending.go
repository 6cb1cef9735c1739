package sunrpc

import (
	"context"
	"fmt"
	"sync"
	"time"
)

// Pending is the table of the calls in flight on one connection, the
// part every transport has alike (the Linux client's receive queue, which
// xprt_lookup_rqst searches). A call goes in before it is sent (Add); the
// connection's reader gives it the reply with its xid (Deliver, after a
// Claim when taking the reply apart takes a while); its caller waits for
// that in Wait, which also ends when the connection fails (Fail), the
// call's context ends or the try's timeout passes.
//
// The caller and the reader race for a call whose caller stops waiting
// just as its reply comes; the table settles it under one lock: either
// the reply was delivered and Wait returns nil, or the caller has its
// call back and Deliver reports that nobody took the reply, which stays
// the transport's to give back. A transport never touches a call after
// its caller has it back: the caller may reuse it at once.
//
// R is what the transport keeps with each call (RPC-over-RDMA: the
// request that holds the call's buffers and credit).
type Pending[R any] struct {
	abandoned Abandoned

	mu    sync.Mutex
	calls map[uint32]pendingEntry[R]
	err   error
	lost  chan struct{} // closed by Fail
}

// pendingEntry is a call in the table: waiting for its reply, claimed by
// the reader (its reply on the way), or abandoned (call nil: the caller
// stopped waiting and has it back).
type pendingEntry[R any] struct {
	call    *Call
	r       R
	claimed bool
}

// Abandoned is what becomes of the entry of a call whose caller stops
// waiting before its reply comes.
type Abandoned int

const (
	// ForgetAbandoned drops the entry: a reply that comes later is to
	// no call (the bad_xids counter). For a transport whose calls hold
	// nothing until their reply (TCP).
	ForgetAbandoned Abandoned = iota
	// KeepAbandoned keeps the entry until the reply comes, so that the
	// transport can give back what the call holds (RPC-over-RDMA: a
	// credit, its chunks' exposure); Claim still finds it, Deliver
	// reports that nobody took the reply.
	KeepAbandoned
)

// NewPending returns an empty table.
func NewPending[R any](a Abandoned) *Pending[R] {
	return &Pending[R]{abandoned: a, calls: make(map[uint32]pendingEntry[R]), lost: make(chan struct{})}
}

// Add puts call, which r goes with, in the table. It fails with an error
// wrapping ErrDisconnected once the table has failed.
func (p *Pending[R]) Add(call *Call, r R) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.err != nil {
		return fmt.Errorf("%w: %v", ErrDisconnected, p.err)
	}
	p.calls[call.Xid] = pendingEntry[R]{call: call, r: r}
	return nil
}

// Remove takes out a call that was added but will not be sent.
func (p *Pending[R]) Remove(call *Call) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if e, ok := p.calls[call.Xid]; ok && e.call == call {
		delete(p.calls, call.Xid)
	}
}

// Claim finds the call whose reply, with xid, has come, for a transport
// that takes the reply apart before it delivers it: the call stays in the
// table, but no second reply finds it. ok is false when no call waits for
// xid.
func (p *Pending[R]) Claim(xid uint32) (r R, ok bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	e, ok := p.calls[xid]
	if !ok || e.claimed {
		return r, false
	}
	e.claimed = true
	p.calls[xid] = e
	return e.r, true
}

// Deliver gives reply, whose memory buf holds, to the caller of the call
// with xid and takes the call out of the table. It reports whether the
// caller took it: false when it had stopped waiting or no call waits for
// xid; the reply and buf are then still the transport's.
func (p *Pending[R]) Deliver(xid uint32, reply Reply, buf Releaser) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	e, ok := p.calls[xid]
	if !ok {
		return false
	}
	delete(p.calls, xid)
	if e.call == nil {
		return false
	}
	reply.buf = buf
	e.call.Reply = reply
	e.call.done <- struct{}{}
	return true
}

// Wait waits for call's reply. It returns nil once the reply is in
// call.Reply, and otherwise ErrDisconnected when the table fails first,
// ctx's error when ctx ends first, or ErrTimeout when the try's timeout
// passes first; the caller then has its call back.
func (p *Pending[R]) Wait(ctx context.Context, call *Call) error {
	_, err := p.wait(ctx, call, nil, call.timeout)
	return err
}

// WaitTurn is Wait for a transport whose callers take turns at reading
// the replies (RPC-over-RDMA's completion queue, which one goroutine at a
// time polls): it also returns, with turned true and the call still
// waiting, when it receives the turn from turn. The try's timeout counts
// from the call's start (Deadline), so that a caller that comes back
// after its turn does not wait longer in all.
func (p *Pending[R]) WaitTurn(ctx context.Context, call *Call, turn <-chan struct{}) (turned bool, err error) {
	return p.wait(ctx, call, turn, time.Until(call.Deadline()))
}

// wait is Wait and WaitTurn (a nil turn never comes), with the timeout d.
func (p *Pending[R]) wait(ctx context.Context, call *Call, turn <-chan struct{}, d time.Duration) (turned bool, err error) {
	if call.timer == nil {
		call.timer = time.NewTimer(d)
	} else {
		call.timer.Reset(d)
	}
	defer call.timer.Stop()
	select {
	case <-call.done:
		return false, nil
	case <-turn:
		return true, nil
	case <-p.lost:
		err = ErrDisconnected
	case <-ctx.Done():
		err = ctx.Err()
	case <-call.timer.C:
		err = ErrTimeout
	}
	return false, p.GiveUp(call, err)
}

// Delivered reports whether call's reply has been delivered, for a
// caller that reads replies itself: Take takes it.
func (p *Pending[R]) Delivered(call *Call) bool { return len(call.done) > 0 }

// Take takes call's delivered reply (Delivered): it is in call.Reply.
func (p *Pending[R]) Take(call *Call) { <-call.done }

// GiveUp takes call back for its caller, who stops waiting because of
// err, and returns err; or, if its reply was delivered meanwhile, takes
// that and returns nil.
func (p *Pending[R]) GiveUp(call *Call, err error) error {
	if p.abandon(call) {
		return err
	}
	<-call.done // delivered as its caller gave up: take it
	return nil
}

// abandon takes call back from the table for its caller; false when its
// reply has been delivered.
func (p *Pending[R]) abandon(call *Call) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	e, ok := p.calls[call.Xid]
	if !ok || e.call != call {
		return false
	}
	if p.abandoned == KeepAbandoned || e.claimed {
		e.call = nil
		p.calls[call.Xid] = e
	} else {
		delete(p.calls, call.Xid)
	}
	return true
}

// Fail marks the connection failed because of err: calls waiting in Wait
// return ErrDisconnected, and Add fails. It reports whether this was the
// first failure.
func (p *Pending[R]) Fail(err error) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.err != nil {
		return false
	}
	p.err = err
	close(p.lost)
	return true
}

// Lost is closed when the table fails.
func (p *Pending[R]) Lost() <-chan struct{} { return p.lost }

// Err is the error the table failed with, or nil.
func (p *Pending[R]) Err() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.err
}

// Len is the number of calls in the table, abandoned ones kept included.
func (p *Pending[R]) Len() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.calls)
}
