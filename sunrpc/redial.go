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

	mu       sync.Mutex
	conn     C
	have     bool
	dialing  chan struct{} // closed when the attempt under way ends
	backoff  time.Duration
	nextDial time.Time
	closed   bool
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
			}
			r.mu.Unlock()
			return c, err
		}
		r.conn, r.have = c, true
		r.mu.Unlock()
		return c, nil
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
		timer := time.NewTimer(wait)
		defer timer.Stop()
		select {
		case <-timer.C:
		case <-ctx.Done():
			return zero, ctx.Err()
		}
		if short {
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
