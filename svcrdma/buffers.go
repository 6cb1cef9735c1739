package svcrdma

import (
	"context"
	"fmt"
	"net/netip"
	"sync"
	"time"

	"github.com/rdmafs/rdmafs/rpcrdma"
	"github.com/rdmafs/rdmafs/verbs"
)

// A connection's buffers grow and shrink by slabs (rpcrdma.Arena), as the
// client's do (xprtrdma's slabs): an idle connection keeps the few it
// always needs, a busy one registers more as its calls find none free, and
// a slab left unused for a while is retired and its pages given back. The
// large buffers a connection has beyond its first come out of the
// server's memory budget (Config.Budget), shared with the other
// connections: when it is spent, a call waits for a buffer of its own
// connection to come back instead.

// Budget is memory the server's connections share, fairly among their
// hosts (sunrpc.Server's memory budget). TryReserve takes n bytes of it
// for a client at host if host's share and the budget allow, and never
// waits; Unreserve gives them back.
type Budget interface {
	TryReserve(host netip.Addr, n int) bool
	Unreserve(host netip.Addr, n int)
}

// shrinkAfter: a slab unused for 5 to 10 s is retired, as the client's (a
// variable for tests).
var shrinkAfter = 5 * time.Second

// slabRegs registers the slabs of one arena of one connection in the
// server's protection domain: rpcrdma.Hooks of the arena.
type slabRegs struct {
	s      *Server
	a      *rpcrdma.Arena // set at the first activation
	what   string         // for errors: which buffers
	budget Budget         // charged for the slabs beyond the first free ones; nil: none
	host   netip.Addr     // the client, whose share of the budget is charged
	free   int            // slabs active at once that are not charged

	mu      sync.Mutex
	closed  bool
	mrs     []verbs.MR // by slab, while active
	charged []int      // bytes of the budget slab i holds
	active  int
}

var _ rpcrdma.Hooks = (*slabRegs)(nil)

// errBudget means the server's memory budget has no room for another slab.
var errBudget = fmt.Errorf("svcrdma: memory budget spent: %w", rpcrdma.ErrNotNow)

func newSlabRegs(s *Server, what string, slabs, free int, budget Budget, host netip.Addr) *slabRegs {
	return &slabRegs{s: s, what: what, budget: budget, host: host, free: free, mrs: make([]verbs.MR, slabs), charged: make([]int, slabs)}
}

// Activate registers slab i of a, charging the budget unless the arena
// has fewer than its free slabs active.
func (r *slabRegs) Activate(a *rpcrdma.Arena, i int) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return fmt.Errorf("svcrdma: registering %s: connection closed", r.what)
	}
	r.a = a
	off, n := a.Slab(i)
	charge := 0
	if r.active >= r.free && r.budget != nil {
		if !r.budget.TryReserve(r.host, n) {
			return errBudget
		}
		charge = n
	}
	mr, err := r.s.pd.Register(a.Mem(), off, n, verbs.AccessLocalWrite)
	if err != nil {
		if charge > 0 {
			r.budget.Unreserve(r.host, charge)
		}
		return fmt.Errorf("svcrdma: registering %d KiB of %s: %w", n>>10, r.what, err)
	}
	r.mrs[i], r.charged[i] = mr, charge
	r.active++
	return nil
}

// Deactivate undoes the registration of slab i and gives back what it
// holds of the budget.
func (r *slabRegs) Deactivate(a *rpcrdma.Arena, i int) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.dropLocked(i)
}

func (r *slabRegs) dropLocked(i int) bool {
	mr := r.mrs[i]
	if mr == nil {
		return true
	}
	if err := mr.Deregister(); err != nil {
		r.s.logf("svcrdma: %s: cannot undo the registration of a retired slab: %v", r.what, err)
		return false
	}
	r.mrs[i] = nil
	if r.charged[i] > 0 {
		r.budget.Unreserve(r.host, r.charged[i])
		r.charged[i] = 0
	}
	r.active--
	return true
}

// sge is the scatter/gather entry of n bytes at off in block b.
func (r *slabRegs) sge(b *rpcrdma.Block, off, n int) verbs.SGE {
	_, rel := r.a.SlabOf(b.Off() + off)
	r.mu.Lock()
	mr := r.mrs[b.Slab()]
	r.mu.Unlock()
	return verbs.SGE{MR: mr, Offset: rel, Length: n}
}

// close undoes every registration, once the queue pair is gone.
func (r *slabRegs) close() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.closed = true
	for i := range r.mrs {
		r.dropLocked(i)
	}
}

// newArena makes a growing arena of n blocks of size bytes in slabs of
// slabBlocks, minSlabs of them always active, registered by regs.
func newArena(n, size, slabBlocks, minSlabs int, regs *slabRegs) (*rpcrdma.Arena, error) {
	return rpcrdma.NewGrowingArena(n, size, slabBlocks, minSlabs, shrinkAfter, regs)
}

// block returns a free block of a, growing a if none is, and waiting for
// one if it may not grow, until lost closes (the connection ended).
func block(a *rpcrdma.Arena, lost <-chan struct{}) (*rpcrdma.Block, error) {
	if b := a.TryGetOrGrow(); b != nil {
		return b, nil
	}
	return a.Get(context.Background(), lost)
}

// Sizes of a connection's arenas.
const (
	smallSlabBlocks = 64 // Send and Receive buffers per slab: 256 KiB at 4 KiB inline
)

// newBuffers sets up the connection's arenas. Sends and Receives: a
// Receive posted per credit, and up to two Sends per call slot (a reply
// and an RDMA_ERROR), with the calls' Receive buffers kept until their
// messages are served; always active, enough for the posted Receives.
// Pull and push buffers: one per call slot at most, one always.
func (c *svcConn) newBuffers() error {
	cfg := &c.s.cfg
	n := 6*cfg.Credits + 8
	slabs := (n + smallSlabBlocks - 1) / smallSlabBlocks
	minSmall := (cfg.Credits + 8 + smallSlabBlocks - 1) / smallSlabBlocks
	c.smallRegs = newSlabRegs(c.s, "send and receive buffers", slabs, slabs, nil, c.host)
	var err error
	if c.small, err = newArena(n, cfg.MaxInline, smallSlabBlocks, minSmall, c.smallRegs); err != nil {
		return err
	}
	size := (cfg.MaxIO + 4095) &^ 4095
	c.pullRegs = newSlabRegs(c.s, "pull buffers", 2*cfg.Credits, 1, cfg.Budget, c.host)
	if c.pull, err = newArena(2*cfg.Credits, size, 1, 1, c.pullRegs); err != nil {
		c.freeMemory()
		return err
	}
	c.pushRegs = newSlabRegs(c.s, "push buffers", 2*cfg.Credits, 1, cfg.Budget, c.host)
	if c.push, err = newArena(2*cfg.Credits, size, 1, 1, c.pushRegs); err != nil {
		c.freeMemory()
		return err
	}
	return nil
}
