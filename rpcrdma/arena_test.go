package rpcrdma

import (
	"errors"
	"sync"
	"testing"
	"time"
)

// hooks records what a growing arena asks its owner to register, and
// refuses to register beyond limit slabs (as RLIMIT_MEMLOCK would).
type hooks struct {
	mu         sync.Mutex
	registered map[int]bool
	limit      int
}

func (h *hooks) Activate(a *Arena, i int) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.limit > 0 && len(h.registered) >= h.limit {
		return errors.New("over the limit")
	}
	h.registered[i] = true
	return nil
}

func (h *hooks) Deactivate(a *Arena, i int) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	delete(h.registered, i)
	return true
}

func (h *hooks) count() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.registered)
}

func take(a *Arena, n int) []*Block {
	var out []*Block
	for len(out) < n {
		b := a.TryGet()
		if b == nil && a.Grow() {
			continue
		}
		if b == nil {
			break
		}
		out = append(out, b)
	}
	return out
}

// TestGrowingArena: an arena of 64 blocks in slabs of 8 registers one slab
// at first, grows by a slab at a time as blocks are taken, never beyond
// its size, and, once the blocks are back and a period passes unused,
// retires all but its first slab; its blocks hold their contents while
// handed out.
func TestGrowingArena(t *testing.T) {
	h := &hooks{registered: map[int]bool{}}
	a, err := NewGrowingArena(64, 4096, 8, 1, 50*time.Millisecond, h)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	if h.count() != 1 || a.Free() != 8 {
		t.Fatalf("new arena: %d slabs registered, %d blocks free; want 1 and 8", h.count(), a.Free())
	}
	held := take(a, 20)
	if len(held) != 20 || h.count() != 3 {
		t.Fatalf("20 blocks taken: got %d, %d slabs registered; want 20 and 3", len(held), h.count())
	}
	for i, b := range held {
		b.Bytes()[0] = byte(i)
	}
	more := take(a, 100)
	if len(held)+len(more) != 64 || h.count() != 8 {
		t.Fatalf("all taken: %d blocks, %d slabs; want 64 and 8", len(held)+len(more), h.count())
	}
	for _, b := range more {
		b.Release()
	}
	// Blocks still out keep their slabs.
	time.Sleep(200 * time.Millisecond)
	if h.count() != 3 {
		t.Fatalf("20 blocks out, idle: %d slabs registered, want 3", h.count())
	}
	for i, b := range held {
		if b.Bytes()[0] != byte(i) {
			t.Fatalf("block %d changed while handed out", i)
		}
		b.Release()
	}
	deadline := time.Now().Add(5 * time.Second)
	for h.count() > 1 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if h.count() != 1 || a.Free() != 8 || a.Out() != 0 {
		t.Fatalf("idle: %d slabs registered, %d free, %d out; want 1, 8, 0", h.count(), a.Free(), a.Out())
	}
	// It grows again.
	if again := take(a, 64); len(again) != 64 {
		t.Fatalf("taken again: %d, want 64", len(again))
	}
}

// TestGrowingArenaSteadyUse: a load that keeps using 12 blocks keeps the
// two slabs it needs through many periods, and never more.
func TestGrowingArenaSteadyUse(t *testing.T) {
	h := &hooks{registered: map[int]bool{}}
	a, err := NewGrowingArena(64, 4096, 8, 1, 20*time.Millisecond, h)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	activations := 0
	for range 50 {
		before := h.count()
		blocks := take(a, 12)
		if len(blocks) != 12 {
			t.Fatalf("took %d of 12", len(blocks))
		}
		if h.count() > before {
			activations++
		}
		time.Sleep(5 * time.Millisecond)
		for _, b := range blocks {
			b.Release()
		}
	}
	if h.count() != 2 || activations > 1 {
		t.Fatalf("steady load of 12 blocks: %d slabs registered, %d activations; want 2 and 1", h.count(), activations)
	}
}

// TestGrowingArenaLimit: when registering a slab fails, the arena stays
// at the slabs it has, and calls get no more blocks.
func TestGrowingArenaLimit(t *testing.T) {
	h := &hooks{registered: map[int]bool{}, limit: 2}
	a, err := NewGrowingArena(64, 4096, 8, 1, time.Minute, h)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	if got := take(a, 64); len(got) != 16 || a.Len() != 16 {
		t.Fatalf("limit of 2 slabs: took %d, Len %d; want 16 and 16", len(got), a.Len())
	}
}

// TestFixedArena: NewArena hands out all its blocks from the start and
// never grows.
func TestFixedArena(t *testing.T) {
	a, err := NewArena(5, 4096)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	if a.Free() != 5 {
		t.Fatalf("fixed arena: %d free, want 5", a.Free())
	}
	if got := take(a, 10); len(got) != 5 || a.Grow() {
		t.Fatalf("took %d, want 5, and no growth", len(got))
	}
}

// TestArenaReserve: an arena mapping 64 blocks limited to 32 for calls
// hands out 16 more to Reserve while calls hold all 32, without
// registering their slabs; calls still get no more than 32; what Reserve
// cannot give whole it does not give at all; and Release puts the limit
// back.
func TestArenaReserve(t *testing.T) {
	h := &hooks{registered: map[int]bool{}}
	a, err := NewGrowingArena(64, 4096, 8, 1, time.Minute, h)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	a.Limit(32)
	calls := take(a, 64)
	if len(calls) != 32 {
		t.Fatalf("calls took %d blocks with a limit of 32", len(calls))
	}
	r := a.Reserve(16)
	if r == nil || len(r.Blocks) != 16 {
		t.Fatalf("Reserve(16) with the calls' 32 out: %v", r)
	}
	if more := take(a, 8); len(more) != 0 {
		t.Errorf("calls took %d blocks beyond their 32 once 16 were reserved", len(more))
	}
	if r2 := a.Reserve(24); r2 != nil {
		t.Errorf("Reserve(24) with 16 blocks left unmapped gave %d", len(r2.Blocks))
	}
	// The reserved blocks' slabs are their users' to register.
	if a.Out() != 48 || h.count() != 4 {
		t.Errorf("%d blocks out, %d slabs registered; want 48 and the calls' 4", a.Out(), h.count())
	}
	r.Release()
	if a.Len() != 32 || a.Out() != 32 {
		t.Errorf("after Release: Len %d, %d out; want 32 and 32", a.Len(), a.Out())
	}
}
