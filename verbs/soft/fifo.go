package soft

// fifo is a first-in, first-out queue on a ring that grows as needed and
// is reused. A connection's queues of work requests are fifos: a slice
// popped from the front (s = s[1:]) gives up the capacity it pops, so a
// steady flow through it reallocates on every few appends, where a ring
// that has reached the queue's depth allocates nothing more.
type fifo[T any] struct {
	ring []T
	head int // index in ring of the first element
	n    int // elements queued
}

// len is the number of elements queued.
func (q *fifo[T]) len() int { return q.n }

// at returns the i-th element from the front.
func (q *fifo[T]) at(i int) T { return q.ring[(q.head+i)%len(q.ring)] }

// push appends v at the back.
func (q *fifo[T]) push(v T) {
	if q.n == len(q.ring) {
		ring := make([]T, max(2*len(q.ring), 8))
		for i := range q.n {
			ring[i] = q.at(i)
		}
		q.ring, q.head = ring, 0
	}
	q.ring[(q.head+q.n)%len(q.ring)] = v
	q.n++
}

// pop removes the front element and returns it; the queue must not be
// empty. Its slot is cleared, so the ring keeps nothing alive.
func (q *fifo[T]) pop() T {
	var zero T
	v := q.ring[q.head]
	q.ring[q.head] = zero
	q.head = (q.head + 1) % len(q.ring)
	q.n--
	return v
}

// clear empties the queue, keeping its ring.
func (q *fifo[T]) clear() {
	clear(q.ring)
	q.head, q.n = 0, 0
}
