package xprtrdma

import (
	"context"
	"fmt"
	"time"

	"github.com/rdmafs/rdmafs/sunrpc"
)

// The turn at the completion queue. The kernel client takes a reply in
// the completion's softirq and wakes the waiting task once. A Go program
// that polled the queue in a goroutine of its own would wake it once per
// completion event and then hand each reply to its caller's goroutine:
// two wake-ups, each of which lets the scheduler start another thread
// to look for work, per call. Instead one goroutine at a time polls: the
// one that holds the turn, a caller waiting for its own reply. It handles
// every completion it finds (other calls' replies go to their callers)
// until its reply is delivered, sleeping on the queue meanwhile, then
// gives the turn to a caller that waits for it. A lone call's reply thus
// wakes its own caller and nobody else. A caller waiting for a credit
// takes the turn too while it waits, so that calls whose callers stopped
// waiting still give their credits back; teardown takes it for good.

// reapLook is how long a goroutine that holds the turn sleeps on the
// queue at most before it looks at its context again: it waits in the
// netpoller, where a context's end does not reach it. The end of a
// request's context (a fatal signal) is itself noticed only every 200 ms
// (fs's killPoll).
const reapLook = 200 * time.Millisecond

// takeTurn takes the turn at the completion queue if nobody holds it.
func (ep *endpoint) takeTurn() bool {
	select {
	case <-ep.turn:
		return true
	default:
		return false
	}
}

// passTurn gives the turn back, to the next goroutine that waits for it
// or to whichever asks next.
func (ep *endpoint) passTurn() { ep.turn <- struct{}{} }

// await waits for call's reply, taking the turn at the completion queue
// whenever it is free.
func (ep *endpoint) await(ctx context.Context, call *sunrpc.Call) error {
	if !ep.takeTurn() {
		turned, err := ep.calls.WaitTurn(ctx, call, ep.turn)
		if !turned {
			return err
		}
	}
	defer ep.passTurn()
	if err := ep.reap(ctx, call.Deadline(), func() bool { return ep.calls.Delivered(call) }); err != nil {
		return ep.calls.GiveUp(call, err)
	}
	ep.calls.Take(call)
	return nil
}

// reap handles completions until done reports true, sleeping on the
// completion queue while there are none; the caller holds the turn. It
// returns nil once done, and otherwise ErrDisconnected when the
// connection fails, ctx's error when ctx ends, or ErrTimeout at the
// deadline.
func (ep *endpoint) reap(ctx context.Context, deadline time.Time, done func() bool) error {
	for {
		n, err := ep.conn.Poll(ep.wcs)
		if err != nil {
			ep.fail(err)
			return ep.lostError()
		}
		for i := range ep.wcs[:n] {
			ep.complete(&ep.wcs[i])
		}
		if done() {
			return nil
		}
		if n == len(ep.wcs) {
			continue // maybe more
		}
		select {
		case <-ep.calls.Lost():
			return ep.lostError()
		case <-ep.conn.Done():
			// Before watchEnd notices: the queue would not sleep.
			ep.fail(ep.conn.Err())
			return ep.lostError()
		default:
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		now := time.Now()
		if !now.Before(deadline) {
			return sunrpc.ErrTimeout
		}
		// WaitUntil polls before it sleeps: no empty Poll first.
		wake := now.Add(reapLook)
		if deadline.Before(wake) {
			wake = deadline
		}
		if err := ep.conn.WaitUntil(wake); err != nil {
			ep.fail(err)
			return ep.lostError()
		}
	}
}

func (ep *endpoint) lostError() error {
	return fmt.Errorf("xprtrdma: %w: %v", sunrpc.ErrDisconnected, ep.cause())
}

// keepTurn takes the turn for good, once the connection has ended, and
// reports whether it did within wait: the goroutine that holds it sees
// the end and gives it back.
func (ep *endpoint) keepTurn(wait time.Duration) bool {
	timer := time.NewTimer(wait)
	defer timer.Stop()
	select {
	case <-ep.turn:
		return true
	case <-timer.C:
		return false
	}
}

// drain handles the flushes of everything posted on a connection that
// ended, until the queue has given them all (verbs.Conn.Wait's end) or
// wait passes; the caller holds the turn for good. It reports whether the
// queue drained.
func (ep *endpoint) drain(wait time.Duration) bool {
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	for {
		n, err := ep.conn.Poll(ep.wcs)
		if err != nil {
			return false
		}
		for i := range ep.wcs[:n] {
			ep.complete(&ep.wcs[i])
		}
		if n == len(ep.wcs) {
			continue
		}
		if err := ep.conn.Wait(ctx); err != nil {
			// Take what the last flush produced.
			for {
				n, perr := ep.conn.Poll(ep.wcs)
				for i := range ep.wcs[:n] {
					ep.complete(&ep.wcs[i])
				}
				if n == 0 || perr != nil {
					break
				}
			}
			return ctx.Err() == nil
		}
	}
}

// completionBatch is how many completions a goroutine that holds the turn
// takes from the queue at once.
const completionBatch = 32
