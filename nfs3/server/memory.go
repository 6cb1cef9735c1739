package server

// What the server holds in memory for its clients, and the bound the README
// states (its resource section): the memory budget (recordBudget), shared
// by every connection of both transports, holds the large parts of TCP
// call records and the RPC-over-RDMA buffers beyond each connection's
// first (TryReserve); besides it, each connection costs a fixed amount.

const (
	// connReadBuffer is a TCP connection's read buffer.
	connReadBuffer = 64 << 10
	// runtimeSlack is the Go runtime's own memory (and the server's
	// caches) on top of what the clients make the server hold.
	runtimeSlack = 32 << 20
)

// HeapBound is the Go heap the server's TCP clients can make it hold, at
// most: the memory budget, and per connection (MaxConns) the first part
// of a record and the read buffer, with the runtime's own on top. A
// process that serves only this server may make it its soft memory limit
// (debug.SetMemoryLimit), so that the garbage collector returns what
// clients left behind before the heap doubles past it (Go's default lets
// the heap reach twice what was live). RPC-over-RDMA buffers are not on
// the heap: they add their own (see the README).
func (s *Server) HeapBound() int64 {
	return recordBudget + int64(s.opts.MaxConns)*(freeRecordBytes+connReadBuffer) + runtimeSlack
}
