package sunrpc

import (
	"context"
	"errors"
	"sync"
	"time"
)

// Redialer keeps a transport's one connection to its server: it dials when
// there is none, one caller at a time while the others wait for it, and
// after a failed attempt waits a backoff that doubles from MinBackoff to
// MaxBackoff before the next. Both the TCP and the RPC-over-RDMA transport
// keep their connection in one.
//
// The backoff spaces out attempts that fail; it must not keep a caller
// waiting once the server is back. With Probe, a caller that waits out a
// backoff asks every ProbeEvery whether the server answers, and dials at
// once when it answers after it had been seen not to (a restart): a
// server that answers all along but whose connections fail still gets
// the whole backoff, probed once a wait rather than every ProbeEvery.
type Redialer[C comparable] struct {
	MinBackoff, MaxBackoff time.Duration
	// Dial makes a connection; ctx carries the caller's deadline. Its
	// error should wrap ErrConnect when the server refused or did not
	// answer, so the next attempt backs off.
	Dial func(ctx context.Context) (C, error)
	// Alive reports whether a connection is still up.
	Alive func(C) bool
	// Hangup closes a connection dialled while Close was called.
	Hangup func(C)
	// Probe, if set, reports whether anything answers at the server's
	// address now, cheaply (a refused TCP connect costs one round trip)
	// and without making a connection of the transport.
	Probe func(ctx context.Context) bool
	// ProbeEvery is how often a waiting caller probes; default 200 ms.
	ProbeEvery time.Duration

	mu       sync.Mutex
	conn     C
	have     bool
	dialing  chan struct{} // closed when the attempt under way ends
	backoff  time.Duration
	nextDial time.Time
	closed   bool
	peerGone bool // a probe found nothing answering since the last connection
}

// Get returns the live connection, dialling one if there is none. Running
// out of time, by deadline, while waiting to dial is ErrTimeout; after
// Close it is ErrClosed.
func (r *Redialer[C]) Get(ctx context.Context, deadline time.Time) (C, error) {
	var zero C
	for {
		r.mu.Lock()
		if r.closed {
			r.mu.Unlock()
			return zero, ErrClosed
		}
		if r.have && r.Alive(r.conn) {
			c := r.conn
			r.mu.Unlock()
			return c, nil
		}
		r.conn, r.have = zero, false
		if ch := r.dialing; ch != nil {
			r.mu.Unlock()
			if err := sleepUntil(ctx, deadline, ch); err != nil {
				return zero, err
			}
			continue
		}
		ch := make(chan struct{})
		r.dialing = ch
		wait := time.Until(r.nextDial)
		r.mu.Unlock()

		c, err := r.dialAfter(ctx, deadline, wait)
		gone := false
		if err != nil && isConnectError(err) && r.Probe != nil {
			// Whether the server is away, or answers and fails the
			// connections: only in the first case does its coming back
			// end the backoff.
			pctx, cancel := context.WithTimeout(ctx, r.probeEvery())
			gone = !r.Probe(pctx)
			cancel()
		}

		r.mu.Lock()
		r.dialing = nil
		close(ch)
		if err == nil && r.closed {
			// Close came while dialling.
			r.mu.Unlock()
			r.Hangup(c)
			return zero, ErrClosed
		}
		if err != nil {
			if isConnectError(err) {
				r.backOffLocked()
				r.peerGone = r.peerGone || gone
			}
			r.mu.Unlock()
			return c, err
		}
		r.conn, r.have, r.peerGone = c, true, false
		r.mu.Unlock()
		return c, nil
	}
}

func (r *Redialer[C]) probeEvery() time.Duration {
	if r.ProbeEvery > 0 {
		return r.ProbeEvery
	}
	return 200 * time.Millisecond
}

// waitBackoff waits until the backoff ends, or, with Probe, until the
// server answers again after it was seen away. It reports whether it
// waited all of wait (false: the server is back).
func (r *Redialer[C]) waitBackoff(ctx context.Context, wait time.Duration) (bool, error) {
	timer := time.NewTimer(wait)
	defer timer.Stop()
	var tick <-chan time.Time
	if r.Probe != nil {
		t := time.NewTicker(r.probeEvery())
		defer t.Stop()
		tick = t.C
	}
	for {
		select {
		case <-timer.C:
			return true, nil
		case <-ctx.Done():
			return false, ctx.Err()
		case <-tick:
			pctx, cancel := context.WithTimeout(ctx, r.probeEvery())
			up := r.Probe(pctx)
			cancel()
			r.mu.Lock()
			gone := r.peerGone
			if !up {
				r.peerGone = true
			}
			r.mu.Unlock()
			if up && gone {
				return false, nil
			}
			if up {
				// It answers and was not seen away: only a restart
				// would end the backoff, and none can be seen
				// without seeing it away first. Probing on would
				// connect to it every tick for nothing.
				tick = nil
			}
		}
	}
}

func isConnectError(err error) bool { return errors.Is(err, ErrConnect) }

// dialAfter waits out the backoff, then dials.
func (r *Redialer[C]) dialAfter(ctx context.Context, deadline time.Time, wait time.Duration) (C, error) {
	var zero C
	if wait > 0 {
		short := wait >= time.Until(deadline)
		if short {
			wait = time.Until(deadline)
		}
		all, err := r.waitBackoff(ctx, wait)
		if err != nil {
			return zero, err
		}
		if all && short {
			return zero, ErrTimeout
		}
	}
	dctx, cancel := context.WithDeadline(ctx, deadline)
	defer cancel()
	return r.Dial(dctx)
}

// backOffLocked delays the next attempt.
func (r *Redialer[C]) backOffLocked() {
	r.backoff = min(max(2*r.backoff, r.MinBackoff), r.MaxBackoff)
	r.nextDial = time.Now().Add(r.backoff)
}

// Drop forgets c if it is the current connection. With backOff (c failed
// rather than idled), the next attempt waits the backoff.
func (r *Redialer[C]) Drop(c C, backOff bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.have && r.conn == c {
		var zero C
		r.conn, r.have = zero, false
		if backOff {
			r.backOffLocked()
		}
	}
}

// Backoff returns the wait before the next attempt, if one is due.
func (r *Redialer[C]) Backoff() time.Duration {
	r.mu.Lock()
	defer r.mu.Unlock()
	return max(time.Until(r.nextDial), 0)
}

// Worked forgets the backoff: a connection carried a reply.
func (r *Redialer[C]) Worked() {
	r.mu.Lock()
	r.backoff, r.nextDial = 0, time.Time{}
	r.mu.Unlock()
}

// Close makes every later Get fail and returns the current connection, if
// any, for the caller to close.
func (r *Redialer[C]) Close() (C, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.closed = true
	c, have := r.conn, r.have
	var zero C
	r.conn, r.have = zero, false
	return c, have
}
