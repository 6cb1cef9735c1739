package soft

import (
	"sync"
	"time"

	"github.com/rdmafs/rdmafs/verbs"
)

// cq is a connection's completion queue. Completions are appended in the
// order the connection produces them (which keeps each queue's order) and
// polled from the front. Waiters sleep on notify, a channel with room for
// one wake-up, so Wait needs no lock and no busy loop.
type cq struct {
	mu     sync.Mutex
	q      []verbs.Completion
	head   int // q[head:] are ready
	depth  int
	notify chan struct{}

	// A completion delayed by a fault hook holds back every later one
	// (completions stay in order) until the timer releases them.
	held  []verbs.Completion
	timer *time.Timer
}

func newCQ(depth int) *cq {
	return &cq{depth: depth, notify: make(chan struct{}, 1)}
}

// push appends c and reports whether the queue now holds more than its
// depth: an overrun, which on hardware is a CQ error that breaks the
// connection. The completion is kept either way: an error completion is
// never dropped. delay, when > 0, holds c (and those after it) back.
func (q *cq) push(c verbs.Completion, delay time.Duration) (overrun bool) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.timer != nil || delay > 0 {
		q.held = append(q.held, c)
		if q.timer == nil {
			q.timer = time.AfterFunc(delay, q.release)
		}
		return q.lenLocked() > q.depth
	}
	q.q = append(q.q, c)
	q.wakeLocked()
	return q.lenLocked() > q.depth
}

func (q *cq) lenLocked() int { return len(q.q) - q.head + len(q.held) }

// release ends a fault hook's delay.
func (q *cq) release() {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.timer == nil {
		return
	}
	q.timer = nil
	q.q = append(q.q, q.held...)
	q.held = q.held[:0]
	q.wakeLocked()
}

func (q *cq) wakeLocked() {
	select {
	case q.notify <- struct{}{}:
	default:
	}
}

// wake wakes a waiter without adding a completion (the connection ended).
func (q *cq) wake() {
	select {
	case q.notify <- struct{}{}:
	default:
	}
}

// poll moves up to len(wcs) ready completions into wcs.
func (q *cq) poll(wcs []verbs.Completion) int {
	q.mu.Lock()
	defer q.mu.Unlock()
	n := copy(wcs, q.q[q.head:])
	q.head += n
	if q.head == len(q.q) {
		q.q = q.q[:0]
		q.head = 0
	} else if q.head > 1024 && q.head > len(q.q)/2 {
		q.q = q.q[:copy(q.q, q.q[q.head:])]
		q.head = 0
	}
	return n
}

// ready reports whether poll would return something, and whether
// completions are held back by a delay.
func (q *cq) ready() (ready, held bool) {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.head < len(q.q), q.timer != nil
}

// stop ends a delay for good (the connection is closed).
func (q *cq) stop() {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.timer != nil {
		q.timer.Stop()
		q.timer = nil
	}
}
