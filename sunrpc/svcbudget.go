package sunrpc

import (
	"errors"
	"net/netip"
	"sync"
	"time"
)

// The memory budget: the bytes of large call records the server holds from
// TCP connections at once, being received or in service, and the buffers
// other transports reserve (TryReserve: RPC-over-RDMA's beyond each
// connection's first). It is shared fairly among the client hosts: one
// host's connections, however many, cannot take what another needs.
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
	budget  *hostBudget
	host    netip.Addr      // the connection's client
	wait    time.Duration   // longest wait for a reservation
	quit    <-chan struct{} // the server is closing
	gone    <-chan struct{} // the server closed the connection
	holding int             // bytes reserved for the record being read
	waited  bool            // the last reserve waited for its bytes
}

// reserve makes sure the part of a record of size bytes beyond the free
// bytes is reserved.
func (rv *recordReservation) reserve(size int) error {
	rv.waited = false
	if need := size - freeRecordBytes - rv.holding; need > 0 {
		ok, waited := rv.budget.acquire(rv.host, need, rv.wait, rv.quit, rv.gone)
		rv.waited = waited
		if !ok {
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

// hostBudget is a count of bytes that readers reserve before they read and
// release when done, shared fairly among the hosts that hold or wait for
// some: a host may hold at most its share, the budget divided by one more
// than the hosts active (so a host that comes finds room at once), and at
// least minShare (one largest call). A reader waits while its host is at
// its share or the budget is spent.
type hostBudget struct {
	mu       sync.Mutex
	total    int
	free     int
	minShare int
	hosts    map[netip.Addr]*hostUse
	changed  chan struct{} // closed and replaced at each release
}

// hostUse is what one host holds of the budget and how many of its
// readers wait.
type hostUse struct {
	held, waiting int
}

func (b *hostBudget) init(total, minShare int) {
	b.total, b.free, b.minShare = total, total, minShare
	b.hosts = make(map[netip.Addr]*hostUse)
	b.changed = make(chan struct{})
}

// shareLocked is what one active host may hold.
func (b *hostBudget) shareLocked() int {
	return max(b.total/(len(b.hosts)+1), b.minShare)
}

// useLocked returns host's entry, making it active.
func (b *hostBudget) useLocked(host netip.Addr) *hostUse {
	u := b.hosts[host]
	if u == nil {
		u = &hostUse{}
		b.hosts[host] = u
	}
	return u
}

// takeLocked reserves n bytes for u if its share and the budget allow.
func (b *hostBudget) takeLocked(u *hostUse, n int) bool {
	if b.free < n || u.held+n > b.shareLocked() {
		return false
	}
	b.free -= n
	u.held += n
	return true
}

// idleLocked forgets host if it holds and waits for nothing.
func (b *hostBudget) idleLocked(host netip.Addr, u *hostUse) {
	if u.held == 0 && u.waiting == 0 {
		delete(b.hosts, host)
	}
}

// acquire reserves n bytes for host, waiting at most wait (forever if
// wait <= 0) and never once quit or gone is closed. It reports whether it
// got them, and whether it had to wait.
func (b *hostBudget) acquire(host netip.Addr, n int, wait time.Duration, quit, gone <-chan struct{}) (ok, waited bool) {
	b.mu.Lock()
	u := b.useLocked(host)
	if b.takeLocked(u, n) {
		b.mu.Unlock()
		return true, false
	}
	u.waiting++
	defer func() {
		b.mu.Lock()
		u.waiting--
		b.idleLocked(host, u)
		b.mu.Unlock()
	}()
	var timeout <-chan time.Time
	if wait > 0 {
		t := time.NewTimer(wait)
		defer t.Stop()
		timeout = t.C
	}
	for {
		changed := b.changed
		b.mu.Unlock()
		select {
		case <-changed:
		case <-timeout:
			return false, true
		case <-quit:
			return false, true
		case <-gone:
			return false, true
		}
		b.mu.Lock()
		if b.takeLocked(u, n) {
			b.mu.Unlock()
			return true, true
		}
	}
}

// tryAcquire reserves n bytes for host if its share and the budget allow,
// without waiting.
func (b *hostBudget) tryAcquire(host netip.Addr, n int) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	u := b.useLocked(host)
	ok := b.takeLocked(u, n)
	b.idleLocked(host, u)
	return ok
}

func (b *hostBudget) release(host netip.Addr, n int) {
	if n == 0 {
		return
	}
	b.mu.Lock()
	b.free += n
	if u := b.hosts[host]; u != nil {
		u.held -= n
		b.idleLocked(host, u)
	}
	close(b.changed)
	b.changed = make(chan struct{})
	b.mu.Unlock()
}

// TryReserve takes n bytes of the server's memory budget, which the large
// parts of TCP call records come out of too, for a transport's own buffers
// for a client at host (RPC-over-RDMA's), if host's share and the budget
// allow; it never waits.
func (s *Server) TryReserve(host netip.Addr, n int) bool { return s.receiving.tryAcquire(host, n) }

// Unreserve gives back n bytes TryReserve took for host.
func (s *Server) Unreserve(host netip.Addr, n int) { s.receiving.release(host, n) }

const (
	// connReadBuffer is a TCP connection's read buffer: small calls
	// (most) are read in few system calls, large ones straight into
	// their record.
	connReadBuffer = 16 << 10
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
