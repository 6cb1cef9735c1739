package xprtrdma

import (
	"slices"
	"sync"
	"time"

	"golang.org/x/sys/unix"
)

// Reserved chunk buffers: a FUSE ring's entries hold chunk buffers for
// the mount's life (ReserveReplyBuffers), into which the server writes
// READ data and from which it pulls WRITE data. What a mount pins should
// follow what its calls use, as the arenas' slabs do: the slabs of those
// buffers are registered on a connection when a call first uses them
// (slabMRs.at) and deregistered once a period (shrinkAfter) has gone by
// in which no call used them, while the connection has no call in
// flight. An idle mount so pins no more through io_uring than through
// /dev/fuse.

// maxReserved bounds the chunk buffers ReserveReplyBuffers hands out, on
// top of ChunkBuffers: with the default 1 MiB rsize, 128 MiB more that a
// busy mount may pin.
const maxReserved = 128

// reservedSlabs are the chunk arena's slabs that hold reserved buffers.
type reservedSlabs struct {
	mu    sync.Mutex
	count map[int]int // slab: reserved buffers in it
	timer *time.Timer // unpinIdle's, while any are reserved
}

// ReserveReplyBuffers implements sunrpc.ReplyBuffers: up to n chunk
// buffers of size bytes for a FUSE ring's entries, beyond those calls
// use (at most maxReserved in all). The server writes a READ's data
// straight into one when the call names it as ReplyInto, and pulls a
// WRITE's payload from one without a copy. None when size is more than
// a chunk buffer holds.
func (t *Transport) ReserveReplyBuffers(n, size int) (bufs [][]byte, release func()) {
	rs := &t.reserved
	rs.mu.Lock()
	held := 0
	for _, c := range rs.count {
		held += c
	}
	rs.mu.Unlock()
	n = min(n, maxReserved-held)
	if n <= 0 || size > t.chunks.BlockSize() {
		return nil, nil
	}
	// The slabs are registered as calls use them, well after the mount:
	// a registration the system refused then would fail calls, and the
	// connections that register every active slab. So the buffers are
	// reserved only where all that a busy mount may pin is allowed.
	if most := t.small.BlockSize()*t.small.Len() + t.chunks.BlockSize()*(t.chunks.Len()+n); !memLockAllows(most) {
		t.logOnce("xprtrdma: FUSE ring buffers stay apart from the transport's, and their data is copied: %s", MemLockHint())
		return nil, nil
	}
	r := t.chunks.Reserve(n)
	if r == nil {
		return nil, nil
	}
	var slabs []int
	bufs = make([][]byte, n)
	for i, b := range r.Blocks {
		bufs[i] = b.Bytes()[:size:size]
		slabs = append(slabs, b.Slab())
	}
	rs.mu.Lock()
	if rs.count == nil {
		rs.count = make(map[int]int)
	}
	for _, i := range slabs {
		rs.count[i]++
	}
	if rs.timer == nil {
		rs.timer = time.AfterFunc(shrinkAfter, t.unpinIdleTick)
	}
	rs.mu.Unlock()
	// Reserve leaves the slabs it activates unregistered, but it may
	// have taken free blocks of slabs that calls had registered: until
	// a call uses them, they need not be.
	t.unpinIdle(true)
	return bufs, func() {
		rs.mu.Lock()
		for _, i := range slabs {
			if rs.count[i]--; rs.count[i] == 0 {
				delete(rs.count, i)
			}
		}
		if len(rs.count) == 0 && rs.timer != nil {
			rs.timer.Stop()
			rs.timer = nil
		}
		rs.mu.Unlock()
		r.Release()
	}
}

// memLockAllows reports whether the process may pin n bytes: it has
// CAP_IPC_LOCK, or RLIMIT_MEMLOCK is at least n.
func memLockAllows(n int) bool {
	hdr := unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3}
	var caps [2]unix.CapUserData
	if unix.Capget(&hdr, &caps[0]) == nil && caps[0].Effective&(1<<unix.CAP_IPC_LOCK) != 0 {
		return true
	}
	var lim unix.Rlimit
	return unix.Getrlimit(unix.RLIMIT_MEMLOCK, &lim) == nil && (lim.Cur == unix.RLIM_INFINITY || lim.Cur >= uint64(n))
}

// unpinIdleTick is unpinIdle every shrinkAfter while buffers are
// reserved.
func (t *Transport) unpinIdleTick() {
	t.unpinIdle(false)
	rs := &t.reserved
	rs.mu.Lock()
	if rs.timer != nil {
		rs.timer.Reset(shrinkAfter)
	}
	rs.mu.Unlock()
}

// unpinIdle deregisters, on every connection, the reserved slabs no call
// used since the last look (all: whether used or not).
func (t *Transport) unpinIdle(all bool) {
	rs := &t.reserved
	rs.mu.Lock()
	slabs := make([]int, 0, len(rs.count))
	for i := range rs.count {
		slabs = append(slabs, i)
	}
	rs.mu.Unlock()
	slices.Sort(slabs)
	t.epsMu.Lock()
	eps := slices.Clone(t.eps)
	t.epsMu.Unlock()
	for _, ep := range eps {
		ep.unpinIdle(slabs, all)
	}
}

// unpinIdle deregisters those of slabs that no call used since the last
// look (or all of them), if the connection has no call in flight: none
// may still have them named in a work request or exposed to the server.
// Calls wait meanwhile to post (the post lock), and register a slab
// again when they next use it.
func (ep *endpoint) unpinIdle(slabs []int, all bool) {
	m := &ep.chunks
	var idle []int
	for _, i := range slabs {
		if used := m.used[i].Swap(false); (all || !used) && m.tab[i].Load() != nil {
			idle = append(idle, i)
		}
	}
	if len(idle) == 0 {
		return
	}
	ep.postMu.Lock()
	defer ep.postMu.Unlock()
	if ep.closed || !ep.quiet() {
		return
	}
	for _, i := range idle {
		m.drop(i)
	}
}

// quiet reports whether no call of the connection is in flight or being
// revoked. A request whose reply was delivered may still wait for the
// completion of its Send, which is unsignaled and may wait for the next
// call's (sendQueue): the server has answered it, so it took the Send,
// and the memory the Send named is the caller's again, as a payload is
// once RoundTrip returns.
func (ep *endpoint) quiet() bool {
	ep.mu.Lock()
	defer ep.mu.Unlock()
	for i := range ep.reqs {
		if s := ep.reqs[i].state; s != reqFree && s != reqDelivered {
			return false
		}
	}
	return true
}
