package xprtrdma

import (
	"fmt"
	"sync/atomic"

	"github.com/rdmafs/rdmafs/sunrpc"
)

// stats are the counters of the mountstats "xprt: rdma" line: those of
// every transport, and RPC-over-RDMA's own.
type stats struct {
	sunrpc.XprtCounters

	readChunks       atomic.Uint64 // calls with a read chunk
	writeChunks      atomic.Uint64 // calls offering a write chunk
	replyChunks      atomic.Uint64 // calls offering a reply chunk
	rdmaRequestBytes atomic.Uint64 // bytes the server pulled from read chunks
	rdmaReplyBytes   atomic.Uint64 // bytes the server pushed into write and reply chunks
	pullupBytes      atomic.Uint64 // call bytes copied into a Send or a staging buffer
	// fixup_copy_count counts, in the kernel, reply data copied from the
	// Receive into place. rdmafs decodes inline data where it landed and
	// hands it on from there: it never makes that copy, and the field
	// stays 0.
	fixupBytes      atomic.Uint64
	hardwayRegister atomic.Uint64 // registrations made for one call (memreg=register)
	failedMarshal   atomic.Uint64 // calls that could not be sent
	badReplies      atomic.Uint64 // replies that broke the protocol, RDMA_ERROR included
	nomsgCalls      atomic.Uint64 // calls sent whole in a read chunk

	mwReused      atomic.Uint64 // memory windows bound again
	mwAllocated   atomic.Uint64 // memory windows allocated
	localInv      atomic.Uint64 // local invalidations posted
	creditWaits   atomic.Uint64 // calls that waited for a credit
	payloadCopies atomic.Uint64 // read chunk payloads copied because they were not in a transport buffer

	// Bytes of the transport's buffers its connections have registered
	// (pinned) now, and the most at once: no kernel counter has them.
	registered, registeredPeak atomic.Int64
}

// registeredBytes counts a registration of n bytes.
func (s *stats) registeredBytes(n int) {
	now := s.registered.Add(int64(n))
	for p := s.registeredPeak.Load(); now > p && !s.registeredPeak.CompareAndSwap(p, now); p = s.registeredPeak.Load() {
	}
}

// unregistered counts a registration of n bytes undone.
func (s *stats) unregistered(n int) { s.registered.Add(-int64(n)) }

// line renders the counters as the kernel's "xprt: rdma" line, without the
// "xprt:" prefix: bind_count connect_count connect_time idle_time sends
// recvs bad_xids req_u bklog_u read_chunk_count write_chunk_count
// reply_chunk_count total_rdma_request total_rdma_reply pullup_copy_count
// fixup_copy_count hardway_register_count failed_marshal_count
// bad_reply_count nomsg_call_count, then the kernel's memory registration
// counters (windows reused, orphaned, allocated, local invalidations, empty
// send queue waits, replies that waited for their Send) and, last, rdmafs's
// own: read chunk payloads copied, and the bytes of buffers registered now
// and at most (what the mount pins: its buffers grow with the calls in
// flight and shrink when idle).
func (s *stats) line() string {
	return fmt.Sprintf("rdma 0 %s %d %d %d %d %d %d %d %d %d %d %d %d 0 %d %d %d 0 %d %d %d",
		s.Common(),
		s.readChunks.Load(), s.writeChunks.Load(), s.replyChunks.Load(),
		s.rdmaRequestBytes.Load(), s.rdmaReplyBytes.Load(), s.pullupBytes.Load(), s.fixupBytes.Load(),
		s.hardwayRegister.Load(), s.failedMarshal.Load(), s.badReplies.Load(), s.nomsgCalls.Load(),
		s.mwReused.Load(), s.mwAllocated.Load(), s.localInv.Load(), s.creditWaits.Load(), s.payloadCopies.Load(),
		s.registered.Load(), s.registeredPeak.Load())
}
