package xprtrdma

import (
	"fmt"
	"strconv"
	"sync"

	"github.com/rdmafs/rdmafs/rpcrdma"
	"github.com/rdmafs/rdmafs/verbs"
)

// Memory registration follows Config.MemReg (the memreg mount option): a
// registrar per strategy, chosen when a connection is set up.

// MemReg is how the transport registers the memory that RDMA reads and
// writes: it decides how the server gets at the buffers a call's chunks
// name, and so how long it can. The memreg mount option names these
// strategies by their String.
type MemReg int

const (
	// MemRegMW binds a type 2 memory window over each chunk's buffer for
	// one call and invalidates it before the call completes: by the
	// server's Send With Invalidate, or a local invalidation the call
	// waits for. Exposure: a chunk's buffer, while its call is out. Cost:
	// a bind work request per chunk, an invalidation per reply the server
	// did not invalidate. The default.
	MemRegMW MemReg = iota
	// MemRegRegister registers each chunk's buffer for its call and
	// deregisters it before the call completes. Exposure as MemRegMW;
	// cost: a registration and a deregistration (system calls that pin
	// and unpin pages) per chunk. The fallback for devices without memory
	// windows.
	MemRegRegister
	// MemRegPersistent registers all chunk buffers once, for remote read
	// and write. Exposure: every chunk buffer, to the server, for as long
	// as the connection's protection domain lives, whatever call it is
	// lent to. Cost: none per call. Only for fabrics where the server is
	// trusted.
	MemRegPersistent
)

// String is the strategy's word in the memreg option.
func (m MemReg) String() string {
	switch m {
	case MemRegMW:
		return "mw"
	case MemRegRegister:
		return "register"
	case MemRegPersistent:
		return "persistent"
	}
	return "MemReg(" + strconv.Itoa(int(m)) + ")"
}

// remoteInvalidateOK reports whether the server may invalidate the rkeys
// of strategy m with Send With Invalidate, which the client then
// advertises in its RFC 8797 private data. Only memory windows can be
// invalidated remotely: the rkey of a plain registration (register,
// persistent) cannot, and a server that tries breaks the connection
// (remote invalid request).
func remoteInvalidateOK(m MemReg) bool { return m == MemRegMW }

// registrar exposes parts of the chunk arena to the server for one call.
type registrar interface {
	// arenaAccess is what the chunk arena's registration allows.
	arenaAccess() verbs.Access
	// expose makes n bytes of the chunk arena from off reachable by the
	// server with access during r, and returns the segment that names
	// them. Work requests it needs are queued in r and posted with r's
	// Send, before it, in one post.
	expose(r *request, off, n int, access verbs.Access) (rpcrdma.Segment, error)
	// revoke ends r's exposures. The server invalidated rkey inv already
	// if hasInv. It reports whether the call must wait for an
	// invalidation to complete (invalidated).
	revoke(r *request, inv uint32, hasInv bool) (wait bool, err error)
	// invalidated learns that the invalidation revoke posted for r has
	// completed.
	invalidated(r *request)
	// forget ends r's exposures without posting anything, for a call
	// that will not complete on a live connection (it was not sent, or
	// its connection is gone): registrations are undone; windows stay
	// bound until close (an invalidation would complete after r is), and
	// so do those whose binds a failed post may or may not have posted.
	forget(r *request)
	// close frees what the registrar holds once no completion can come:
	// teardown has drained the completion queue, or its queue pair is
	// gone. A second close does nothing.
	close()
}

var (
	_ registrar = persistent{}
	_ registrar = perCall{}
	_ registrar = (*windows)(nil)
)

// persistent exposes the arena's one registration.
type persistent struct{ ep *endpoint }

func (p persistent) arenaAccess() verbs.Access {
	return verbs.AccessLocalWrite | verbs.AccessRemoteRead | verbs.AccessRemoteWrite
}

func (p persistent) expose(_ *request, off, n int, _ verbs.Access) (rpcrdma.Segment, error) {
	mr, rel, err := p.ep.chunks.at(off)
	if err != nil {
		return rpcrdma.Segment{}, err
	}
	return rpcrdma.Segment{Handle: mr.RKey(), Length: uint32(n), Offset: mr.Addr() + uint64(rel)}, nil
}

func (p persistent) revoke(*request, uint32, bool) (bool, error) { return false, nil }

func (p persistent) invalidated(*request) {}

func (p persistent) forget(*request) {}

func (p persistent) close() {}

// perCall registers each chunk for its call.
type perCall struct{ ep *endpoint }

func (p perCall) arenaAccess() verbs.Access { return verbs.AccessLocalWrite }

func (p perCall) expose(r *request, off, n int, access verbs.Access) (rpcrdma.Segment, error) {
	mr, err := p.ep.pd.Register(p.ep.t.chunks.Mem(), off, n, access|verbs.AccessLocalWrite)
	if err != nil {
		return rpcrdma.Segment{}, err
	}
	p.ep.t.stats.hardwayRegister.Add(1)
	r.mrs = append(r.mrs, mr)
	return rpcrdma.Segment{Handle: mr.RKey(), Length: uint32(n), Offset: mr.Addr()}, nil
}

func (p perCall) revoke(r *request, _ uint32, _ bool) (bool, error) {
	var first error
	for _, mr := range r.mrs {
		if err := mr.Deregister(); err != nil && first == nil {
			first = err
		}
	}
	r.mrs = r.mrs[:0]
	return false, first
}

func (p perCall) invalidated(*request) {}

func (p perCall) forget(r *request) { _, _ = p.revoke(r, 0, false) }

func (p perCall) close() {}

// windows binds a memory window per chunk.
type windows struct {
	ep     *endpoint
	mu     sync.Mutex
	free   []verbs.MW
	closed bool // by close, which frees each window once
}

func (w *windows) arenaAccess() verbs.Access { return verbs.AccessLocalWrite | verbs.AccessMWBind }

func (w *windows) get() (verbs.MW, error) {
	w.mu.Lock()
	if n := len(w.free); n > 0 {
		mw := w.free[n-1]
		w.free = w.free[:n-1]
		w.mu.Unlock()
		w.ep.t.stats.mwReused.Add(1)
		return mw, nil
	}
	w.mu.Unlock()
	mw, err := w.ep.pd.AllocMW()
	if err == nil {
		w.ep.t.stats.mwAllocated.Add(1)
	}
	return mw, err
}

func (w *windows) put(mws ...verbs.MW) {
	w.mu.Lock()
	w.free = append(w.free, mws...)
	w.mu.Unlock()
}

// nextRKey gives a window's next binding a new key: the low byte is the
// consumer's to change, so an old key stops matching.
func nextRKey(rkey uint32) uint32 { return rkey&^0xff | (rkey+1)&0xff }

// expose takes a window for the chunk and queues its bind in r.binds (the
// Send's post posts it). The window is r's from here: in r.mws, bound or
// not, until revoke, or until close if the call fails (forget).
func (w *windows) expose(r *request, off, n int, access verbs.Access) (rpcrdma.Segment, error) {
	if r.nbinds == len(r.binds) {
		return rpcrdma.Segment{}, fmt.Errorf("xprtrdma: a call exposes at most %d chunks", len(r.binds))
	}
	mr, rel, err := w.ep.chunks.at(off)
	if err != nil {
		return rpcrdma.Segment{}, err
	}
	mw, err := w.get()
	if err != nil {
		return rpcrdma.Segment{}, err
	}
	rkey := nextRKey(mw.RKey())
	r.binds[r.nbinds] = verbs.SendWR{
		ID:     rpcrdma.WRID(wrBind, r.slot),
		Opcode: verbs.OpBindMW,
		MW:     mw, BindMR: mr, Offset: rel, Length: n,
		BindAccess: access, NewRKey: rkey,
	}
	r.nbinds++
	r.mws = append(r.mws, boundWindow{mw: mw, rkey: rkey})
	return rpcrdma.Segment{Handle: rkey, Length: uint32(n), Offset: mr.Addr() + uint64(rel)}, nil
}

// revoke invalidates the windows the server did not, with one local
// invalidation each; the last is signaled and the call waits for it. It
// runs in the goroutine that holds the turn at the completion queue,
// which posts from the endpoint's work request for it (ep.invWR).
func (w *windows) revoke(r *request, inv uint32, hasInv bool) (bool, error) {
	// The windows to invalidate go to r.invalidating, empty since the
	// last call's invalidation completed, so its array is reused.
	todo := r.invalidating[:0]
	for _, b := range r.mws {
		if hasInv && b.rkey == inv {
			w.put(b.mw)
			continue
		}
		todo = append(todo, b)
	}
	r.mws = r.mws[:0]
	r.invalidating = todo
	ep := w.ep
	for i, b := range todo {
		ep.invWR = verbs.SendWR{
			ID: rpcrdma.WRID(wrLocalInv, r.slot), Opcode: verbs.OpLocalInv,
			InvalidateRKey: b.rkey, Signaled: i == len(todo)-1,
		}
		if err := ep.conn.PostSend(&ep.invWR); err != nil {
			return false, err
		}
		ep.t.stats.localInv.Add(1)
	}
	return len(todo) > 0, nil
}

// invalidated gives back the windows of r once their invalidation
// completed.
func (w *windows) invalidated(r *request) {
	for _, b := range r.invalidating {
		w.put(b.mw)
	}
	r.invalidating = r.invalidating[:0]
}

func (w *windows) forget(*request) {}

// close closes every window: the free ones and those still bound for
// requests that never completed.
func (w *windows) close() {
	w.mu.Lock()
	closed := w.closed
	w.closed = true
	w.mu.Unlock()
	if closed {
		return
	}
	for _, mw := range w.free {
		mw.Close()
	}
	// A caller that took its credit before the connection failed
	// may still reset its (free, windowless) request under ep.mu:
	// read the requests' windows under it too.
	ep := w.ep
	ep.mu.Lock()
	for i := range ep.reqs {
		r := &ep.reqs[i]
		for _, b := range r.mws {
			b.mw.Close()
		}
		for _, b := range r.invalidating {
			b.mw.Close()
		}
	}
	ep.mu.Unlock()
}

type boundWindow struct {
	mw   verbs.MW
	rkey uint32
}
