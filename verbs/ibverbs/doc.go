// Package ibverbs is the RDMA provider of package verbs over libibverbs and
// librdmacm (rdma-core; Debian 12: libibverbs-dev and librdmacm-dev to
// build, libibverbs1, librdmacm1 and ibverbs-providers to run). It runs on
// RDMA NICs (InfiniBand, RoCE, iWARP) and on SoftRoCE (rdma_rxe).
//
// Provider{} is the verbs.Provider. Open with a device name opens that
// device; with name "" it opens the device through which addr is reached
// (a local IP of an RDMA interface, or a peer's address, resolved by the
// RDMA CM). When the host has no RDMA device Open fails with an error
// wrapping verbs.ErrNoDevice that names provider=soft, the software
// provider, as the way to run without one. The package needs cgo on
// Linux: built without it, Open fails with an error wrapping
// verbs.ErrNoProvider.
//
// # How it maps onto the libraries
//
// Connections use the RDMA CM (port space TCP, RC queue pairs): Dial
// resolves the address and the route within ConnConfig.Timeout and
// connects with the private data, responder resources and initiator depth
// (clamped to the device's limits), retry count 6 and RNR retry count 6.
// Each connection has its own CM event channel, completion channel,
// completion queue and queue pair; a listener migrates every connection
// request to a channel of its own at once, so that requests outlive the
// listener. Every file descriptor the libraries give (CM event channels,
// completion channels, the device's async event descriptor) is made
// non-blocking and waited for by the Go netpoller (through a dup'd
// descriptor), so no goroutine blocks in C and no loop spins, except Wait
// in ConnConfig.Polling mode, which spins on ibv_poll_cq.
//
// CM events: DISCONNECTED (answered with rdma_disconnect), DEVICE_REMOVAL,
// ADDR_CHANGE and errors end the connection, with an Err naming the event.
// Async events: QP and CQ errors end their connection, DEVICE_FATAL and
// PORT_ERR end every connection of the device, COMM_EST is passed to the
// CM (rdma_notify). An error completion (other than a flush) ends the
// connection when it is polled, and the peer is told (rdma_disconnect).
// When a connection ends, its queue pair is moved to the error state and a
// marker is posted on each queue (as the kernel's ib_drain_qp does), so
// Wait knows when every work request has been flushed.
//
// Work requests are built in C memory from Go values (a small C helper
// posts them); scatter/gather entries point into registered memory, which
// is mmap'd (verbs.AllocMemory), never Go memory, and C keeps no Go
// pointer. SENDs and RDMA WRITEs of up to the queue pair's inline size
// (asked for: 256 bytes) are posted inline. The provider's own sequence
// numbers are the work request ids the device sees; Poll maps them back.
//
// Memory windows are type 2 (ibv_alloc_mw), bound with IBV_WR_BIND_MW,
// invalidated with IBV_WR_LOCAL_INV or by the peer's IBV_WR_SEND_WITH_INV;
// Caps.MemoryWindows reports IBV_DEVICE_MEM_WINDOW_TYPE_2A or _2B. SoftRoCE
// (rdma_rxe) in Linux 6.1 has type 2B windows.
//
// Errors of the libraries are *verbs.VerbError values naming the verb and
// the errno.
package ibverbs
