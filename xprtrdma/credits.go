package xprtrdma

import (
	"context"
	"fmt"
	"time"

	"github.com/rdmafs/rdmafs/sunrpc"
	"github.com/rdmafs/rdmafs/verbs"
)

// Credits: how many calls may be out at once. The client asks the server
// for as many as its slot table has (within what the device's queues
// hold) and never has more calls out than the server's last grant, as
// the kernel's transport.c and rpc_rdma.c count them.

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
// calls are out as the server granted, until the try's deadline.
func (ep *endpoint) credit(ctx context.Context, deadline time.Time) (*request, error) {
	r, wake, err := ep.tryCredit()
	if r != nil || err != nil {
		return r, err
	}
	t := ep.t
	t.stats.Backlog.Add(1)
	defer t.stats.Backlog.Add(-1)
	t.stats.creditWaits.Add(1)
	// Only a call that waits needs a timer: most find a credit free.
	timer := time.NewTimer(time.Until(deadline))
	defer timer.Stop()
	for {
		select {
		case <-wake:
		case <-ep.turn:
			// Nobody polls the completion queue: this caller does
			// until a credit comes back (the calls holding them may
			// have no caller waiting any more).
			rerr := ep.reap(ctx, deadline, func() bool {
				r, wake, err = ep.tryCredit()
				return r != nil || err != nil
			})
			ep.passTurn()
			if r != nil || err != nil {
				return r, err
			}
			return nil, rerr
		case <-ep.calls.Lost():
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-timer.C:
			return nil, sunrpc.ErrTimeout
		}
		if r, wake, err = ep.tryCredit(); r != nil || err != nil {
			return r, err
		}
	}
}

// tryCredit takes a credit and a request if the server's grant allows
// another call and a request is free; otherwise it returns the channel
// that the next credit or request given back closes. It fails once the
// connection has.
func (ep *endpoint) tryCredit() (*request, <-chan struct{}, error) {
	ep.mu.Lock()
	defer ep.mu.Unlock()
	if err := ep.calls.Err(); err != nil {
		return nil, nil, fmt.Errorf("xprtrdma: %w: %v", sunrpc.ErrDisconnected, err)
	}
	if ep.inflight < ep.granted && len(ep.free) > 0 {
		ep.inflight++
		r := ep.free[len(ep.free)-1]
		ep.free = ep.free[:len(ep.free)-1]
		ep.idle.Stop()
		return r, nil, nil
	}
	if ep.wake == nil {
		ep.wake = make(chan struct{})
	}
	return nil, ep.wake, nil
}

// wakeLocked wakes the calls waiting for a credit or a request. The
// channel they wait on exists only while one waits (tryCredit makes it,
// this closes and forgets it), so giving a credit back when nobody waits
// costs no allocation. The caller holds ep.mu.
func (ep *endpoint) wakeLocked() {
	if ep.wake != nil {
		close(ep.wake)
		ep.wake = nil
	}
}

func (ep *endpoint) returnCredit() {
	ep.mu.Lock()
	ep.inflight--
	ep.wakeLocked()
	if ep.inflight == 0 && ep.calls.Err() == nil {
		ep.idle.Reset(ep.t.cfg.IdleTimeout)
	}
	ep.mu.Unlock()
}
