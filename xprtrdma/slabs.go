package xprtrdma

import (
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/rdmafs/rdmafs/rpcrdma"
	"github.com/rdmafs/rdmafs/verbs"
)

// The transport's arenas grow and shrink by slabs (rpcrdma.Arena); each
// connection registers every active slab in its protection domain: when
// the slab is activated (the transport's Hooks), when the connection is
// set up, or, should a connection have missed one, when a call first
// uses it. A retired slab's registrations are undone in every
// connection, so what a mount pins is what its calls have used lately.

// slabMRs are one connection's registrations of one arena, one per
// active slab.
type slabMRs struct {
	ep     *endpoint
	a      *rpcrdma.Arena
	access verbs.Access
	what   string // for errors: which buffers

	mu     sync.Mutex
	closed bool // the connection released its resources: register no more
	tab    []atomic.Pointer[slabMR]
	// used marks the slabs a call has used since unpinIdle last looked.
	used []atomic.Bool
}

// slabMR is the registration of one activation of a slab.
type slabMR struct {
	gen uint32
	mr  verbs.MR
}

func (m *slabMRs) init(ep *endpoint, a *rpcrdma.Arena, access verbs.Access, what string) {
	m.ep, m.a, m.access, m.what = ep, a, access, what
	m.tab = make([]atomic.Pointer[slabMR], a.Slabs())
	m.used = make([]atomic.Bool, a.Slabs())
}

// at returns the registration holding offset off of the arena, and off's
// place in it.
func (m *slabMRs) at(off int) (verbs.MR, int, error) {
	i, rel := m.a.SlabOf(off)
	if !m.used[i].Load() {
		m.used[i].Store(true)
	}
	if e := m.tab[i].Load(); e != nil && e.gen == m.a.Gen(i) {
		return e.mr, rel, nil
	}
	mr, err := m.register(i)
	return mr, rel, err
}

// register registers slab i, unless this connection has it registered
// already; a registration of an earlier activation is replaced.
func (m *slabMRs) register(i int) (verbs.MR, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return nil, fmt.Errorf("xprtrdma: registering %s: connection closed", m.what)
	}
	gen := m.a.Gen(i)
	if e := m.tab[i].Load(); e != nil {
		if e.gen == gen {
			return e.mr, nil
		}
		if err := e.mr.Deregister(); err != nil {
			return nil, fmt.Errorf("xprtrdma: %s: %w", m.what, err)
		}
		m.tab[i].Store(nil)
		m.ep.t.stats.unregistered(len(e.mr.Bytes()))
	}
	off, n := m.a.Slab(i)
	mr, err := m.ep.pd.Register(m.a.Mem(), off, n, m.access)
	if err != nil {
		return nil, registerError(m.what, n, err)
	}
	m.tab[i].Store(&slabMR{gen: gen, mr: mr})
	m.ep.t.stats.registeredBytes(n)
	return mr, nil
}

// drop undoes the registration of slab i; it reports false if one is
// left that could not be undone.
func (m *slabMRs) drop(i int) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	e := m.tab[i].Load()
	if e == nil {
		return true
	}
	if err := e.mr.Deregister(); err != nil {
		m.ep.t.logOnce("xprtrdma: %s: cannot undo the registration of a retired slab: %v", m.what, err)
		return false
	}
	m.tab[i].Store(nil)
	m.ep.t.stats.unregistered(len(e.mr.Bytes()))
	return true
}

// close undoes every registration, once the queue pair is gone.
func (m *slabMRs) close() {
	if m.a == nil {
		return
	}
	m.mu.Lock()
	m.closed = true
	m.mu.Unlock()
	for i := range m.tab {
		m.drop(i)
	}
}

// ErrMemLock is wrapped by the error of a registration the system refused
// for want of lockable memory (ENOMEM or EPERM: a registration pins its
// pages, which count against RLIMIT_MEMLOCK).
var ErrMemLock = errors.New("xprtrdma: the system refused to pin (register) buffers")

// registerError is the error of a failed registration of n bytes of
// what.
func registerError(what string, n int, err error) error {
	if errors.Is(err, syscall.ENOMEM) || errors.Is(err, syscall.EPERM) {
		return fmt.Errorf("%w: registering %d KiB of %s: %w", ErrMemLock, n>>10, what, err)
	}
	return fmt.Errorf("xprtrdma: registering %d KiB of %s: %w", n>>10, what, err)
}

// The transport registers the slabs its arenas activate in every
// connection it has.
var _ rpcrdma.Hooks = (*slabHooks)(nil)

// slabHooks are the transport's rpcrdma.Hooks.
type slabHooks struct{ t *Transport }

// Activate registers slab i of a in every connection. If one refuses,
// those made are undone: the arena stays the size it is.
func (h slabHooks) Activate(a *rpcrdma.Arena, i int) error {
	t := h.t
	t.epsMu.Lock()
	defer t.epsMu.Unlock()
	for j, ep := range t.eps {
		if _, err := ep.mrsOf(a).register(i); err != nil {
			for _, done := range t.eps[:j] {
				done.mrsOf(a).drop(i)
			}
			if errors.Is(err, ErrMemLock) {
				now, _ := a.ActiveBytes()
				t.logOnce("%v; %s stay at %d KiB (%s)", err, ep.mrsOf(a).what, now>>10, MemLockHint())
			} else {
				t.logOnce("%v", err)
			}
			return err
		}
	}
	return nil
}

// Deactivate undoes every connection's registration of slab i of a.
func (h slabHooks) Deactivate(a *rpcrdma.Arena, i int) bool {
	t := h.t
	t.epsMu.Lock()
	defer t.epsMu.Unlock()
	ok := true
	for _, ep := range t.eps {
		ok = ep.mrsOf(a).drop(i) && ok
	}
	return ok
}

// mrsOf is the endpoint's registrations of a.
func (ep *endpoint) mrsOf(a *rpcrdma.Arena) *slabMRs {
	if a == ep.t.small {
		return &ep.small
	}
	return &ep.chunks
}

// MemLockHint says what RLIMIT_MEMLOCK is and which options lower what a
// mount pins.
func MemLockHint() string {
	var lim unix.Rlimit
	limit := "unknown"
	if err := unix.Getrlimit(unix.RLIMIT_MEMLOCK, &lim); err == nil {
		limit = fmt.Sprintf("%d KiB", lim.Cur>>10)
		if lim.Cur == ^uint64(0) {
			limit = "unlimited"
		}
	}
	return fmt.Sprintf("RLIMIT_MEMLOCK (ulimit -l) is %s; raise it, or lower rsize/wsize "+
		"(a chunk buffer each) or slot_table_entries (Send and Receive buffers)", limit)
}
