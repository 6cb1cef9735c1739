package sunrpc

import (
	"errors"
	"sync"
	"time"
)

// The receive budget: the bytes of large call records the server holds
// from TCP connections at once, being received or in service.
const (
	// recordBudget bounds those bytes: the part of a record beyond its
	// first freeRecordBytes is read only once reserved, and the
	// reservation lasts until its call is answered. A crowd of clients
	// that each send most of a large record and stop holds at most this
	// plus freeRecordBytes per connection; small calls (every NFS call but
	// a large WRITE) never wait for it.
	recordBudget    = 64 << 20
	freeRecordBytes = 64 << 10
)

// errNoBudget means a fragment waited for its reservation for the whole
// idle timeout.
var errNoBudget = errors.New("sunrpc: no room to receive a call for the idle timeout")

// recordReservation reserves the budget for the record one connection is
// reading (RecordReader.Reserve).
type recordReservation struct {
	budget  *byteBudget
	wait    time.Duration   // longest wait for a reservation
	quit    <-chan struct{} // the server is closing
	holding int             // bytes reserved for the record being read
}

// reserve makes sure the part of a record of size bytes beyond the free
// bytes is reserved.
func (rv *recordReservation) reserve(size int) error {
	if need := size - freeRecordBytes - rv.holding; need > 0 {
		if !rv.budget.acquire(need, rv.wait, rv.quit) {
			return errNoBudget
		}
		rv.holding += need
	}
	return nil
}

// take hands over the reservation of the record read last.
func (rv *recordReservation) take() int {
	n := rv.holding
	rv.holding = 0
	return n
}

// byteBudget is a count of bytes that readers reserve before they read and
// release when done; a reader waits while the budget is spent.
type byteBudget struct {
	mu      sync.Mutex
	free    int
	changed chan struct{} // closed and replaced at each release
}

func (b *byteBudget) init(n int) {
	b.free = n
	b.changed = make(chan struct{})
}

// acquire reserves n bytes, waiting at most wait (forever if wait <= 0) and
// never once quit is closed. It reports whether it got them.
func (b *byteBudget) acquire(n int, wait time.Duration, quit <-chan struct{}) bool {
	var timeout <-chan time.Time
	if wait > 0 {
		t := time.NewTimer(wait)
		defer t.Stop()
		timeout = t.C
	}
	for {
		b.mu.Lock()
		if b.free >= n {
			b.free -= n
			b.mu.Unlock()
			return true
		}
		changed := b.changed
		b.mu.Unlock()
		select {
		case <-changed:
		case <-timeout:
			return false
		case <-quit:
			return false
		}
	}
}

// tryAcquire reserves n bytes if the budget has them, without waiting.
func (b *byteBudget) tryAcquire(n int) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.free < n {
		return false
	}
	b.free -= n
	return true
}

func (b *byteBudget) release(n int) {
	if n == 0 {
		return
	}
	b.mu.Lock()
	b.free += n
	close(b.changed)
	b.changed = make(chan struct{})
	b.mu.Unlock()
}

// TryReserve takes n bytes of the server's memory budget, which the large
// parts of TCP call records come out of too, for a transport's own buffers
// (RPC-over-RDMA's), if it has them; it never waits.
func (s *Server) TryReserve(n int) bool { return s.receiving.tryAcquire(n) }

// Unreserve gives back n bytes TryReserve took.
func (s *Server) Unreserve(n int) { s.receiving.release(n) }

const (
	// connReadBuffer is a TCP connection's read buffer.
	connReadBuffer = 64 << 10
	// runtimeSlack is the Go runtime's own memory (and its program's
	// caches) on top of what clients make the server hold.
	runtimeSlack = 16 << 20
)

// HeapBound is the Go heap the server's TCP clients can make it hold, at
// most: the memory budget, and per connection (MaxConns; 256 if it has no
// bound) the first part of a record and the read buffer, with the
// runtime's own on top. A process that serves only this server may make
// it its soft memory limit (debug.SetMemoryLimit), so that the garbage
// collector returns what clients left behind before the heap doubles past
// it (Go's default lets the heap reach twice what was live). Buffers of
// other transports (RPC-over-RDMA's registered memory) are not on the
// heap: they add their own.
func (s *Server) HeapBound() int64 {
	conns := s.cfg.MaxConns
	if conns <= 0 {
		conns = 256
	}
	return recordBudget + int64(conns)*(freeRecordBytes+connReadBuffer) + runtimeSlack
}
