package xprtrdma

import (
	"fmt"
	"sync/atomic"
	"time"
)

// stats are the counters of the mountstats "xprt: rdma" line.
type stats struct {
	bindCount    atomic.Uint64 // address resolutions
	connectCount atomic.Uint64
	connectTime  atomic.Int64 // nanoseconds spent connecting
	sends        atomic.Uint64
	recvs        atomic.Uint64
	badXids      atomic.Uint64 // replies to no call in flight
	reqU         atomic.Uint64 // calls in flight, summed at each send
	bklogU       atomic.Uint64 // calls waiting for a credit, summed at each send

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

	inflight atomic.Int64
	backlog  atomic.Int64
	lastUse  atomic.Int64 // unix nanoseconds
}

// line renders the counters as the kernel's "xprt: rdma" line, without the
// "xprt:" prefix: bind_count connect_count connect_time idle_time sends
// recvs bad_xids req_u bklog_u read_chunk_count write_chunk_count
// reply_chunk_count total_rdma_request total_rdma_reply pullup_copy_count
// fixup_copy_count hardway_register_count failed_marshal_count
// bad_reply_count nomsg_call_count, then the kernel's memory registration
// counters (windows reused, orphaned, allocated, local invalidations, empty
// send queue waits, replies that waited for their Send) and, last, rdmafs's
// own: read chunk payloads copied.
func (s *stats) line() string {
	idle := int64(0)
	if last := s.lastUse.Load(); last != 0 {
		idle = int64(time.Since(time.Unix(0, last)).Seconds())
	}
	return fmt.Sprintf("rdma 0 %d %d %d %d %d %d %d %d %d %d %d %d %d %d %d %d %d %d %d %d %d 0 %d %d %d 0 %d",
		s.bindCount.Load(), s.connectCount.Load(), s.connectTime.Load()/1e9, idle,
		s.sends.Load(), s.recvs.Load(), s.badXids.Load(), s.reqU.Load(), s.bklogU.Load(),
		s.readChunks.Load(), s.writeChunks.Load(), s.replyChunks.Load(),
		s.rdmaRequestBytes.Load(), s.rdmaReplyBytes.Load(), s.pullupBytes.Load(), s.fixupBytes.Load(),
		s.hardwayRegister.Load(), s.failedMarshal.Load(), s.badReplies.Load(), s.nomsgCalls.Load(),
		s.mwReused.Load(), s.mwAllocated.Load(), s.localInv.Load(), s.creditWaits.Load(), s.payloadCopies.Load())
}
