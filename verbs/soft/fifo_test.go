package soft

import (
	"math/rand/v2"
	"testing"
)

// TestFifoKeepsOrder checks the ring against a slice through growth,
// wrap-around, emptying and clearing: a fixed pseudo-random sequence of
// pushes and pops, whose share of pushes changes every 1,000 steps so the
// queue both grows and drains.
func TestFifoKeepsOrder(t *testing.T) {
	rnd := rand.New(rand.NewPCG(1, 2))
	var q fifo[int]
	var want []int
	next := 0
	for step := range 20000 {
		pushShare := []int{70, 50, 30, 90, 10}[step/1000%5]
		switch {
		case step%7919 == 0:
			q.clear()
			want = want[:0]
		case len(want) == 0 || rnd.IntN(100) < pushShare:
			q.push(next)
			want = append(want, next)
			next++
		default:
			if got := q.pop(); got != want[0] {
				t.Fatalf("step %d: pop %d, want %d", step, got, want[0])
			}
			want = want[1:]
		}
		if q.len() != len(want) {
			t.Fatalf("step %d: len %d, want %d", step, q.len(), len(want))
		}
		for i, v := range want {
			if got := q.at(i); got != v {
				t.Fatalf("step %d: at(%d) = %d, want %d", step, i, got, v)
			}
		}
	}
}

// TestFifoReusesItsRing checks what the ring is for: once it has grown to
// the queue's depth, a steady flow through it allocates nothing.
func TestFifoReusesItsRing(t *testing.T) {
	var q fifo[*sendWQE]
	w := new(sendWQE)
	for range 3 {
		q.push(w)
	}
	q.pop()
	if n := testing.AllocsPerRun(1000, func() {
		q.push(w)
		q.pop()
	}); n > 0 {
		t.Errorf("%v allocations per push and pop, want 0", n)
	}
}
