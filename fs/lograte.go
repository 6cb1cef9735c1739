package fs

import (
	"sync"
	"time"
)

// logRate lets a kind of message through at most once per period and
// counts what it held back, so that a program that fails the same way in
// a loop cannot fill the log, and the log still says how often.
type logRate struct {
	period time.Duration

	mu   sync.Mutex
	last time.Time
	held int
}

// allow reports whether a message may go now and, if so, how many were
// held back since the last one that went.
func (r *logRate) allow() (ok bool, held int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	now := time.Now()
	if !r.last.IsZero() && now.Sub(r.last) < r.period {
		r.held++
		return false, 0
	}
	r.last, held, r.held = now, r.held, 0
	return true, held
}
