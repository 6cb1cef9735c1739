package xprtrdma

import (
	"strconv"
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
	// writeChunksPlaced counts write chunks offered in the caller's own
	// memory (Call.ReplyInto: a FUSE ring entry's buffer), whose data
	// nobody copies on its way to the kernel.
	writeChunksPlaced atomic.Uint64

	// Bytes of the transport's buffers its connections have registered
	// (pinned) now, and the most at once: no kernel counter has them.
	registered, registeredPeak atomic.Int64
	// creditsGranted is the server's last grant of credits, as the
	// client uses it (at least 1, at most what it asked for): how many
	// calls may be out at once now.
	creditsGranted atomic.Int64
}

// registeredBytes counts a registration of n bytes.
func (s *stats) registeredBytes(n int) {
	now := s.registered.Add(int64(n))
	for p := s.registeredPeak.Load(); now > p && !s.registeredPeak.CompareAndSwap(p, now); p = s.registeredPeak.Load() {
	}
}

// unregistered counts a registration of n bytes undone.
func (s *stats) unregistered(n int) { s.registered.Add(-int64(n)) }

// statField is one field of the "xprt: rdma" line.
type statField struct {
	name string // as mountstats(8) and rdmafs stats know it
	// common marks the fields sunrpc.XprtCounters.Common renders, the
	// ones every transport's line has, in a run and in its order.
	common bool
	// value reads the field; nil prints 0, for a field the kernel has
	// and rdmafs does not count, so that the fields after it keep their
	// places.
	value func(*stats) uint64
}

// statFields is the "xprt: rdma" line after the word rdma, in order: the
// kernel's fields (xprt_rdma_print_stats), then rdmafs's own. line prints
// it; rdmafs stats parses the line by its names (StatNames).
var statFields = []statField{
	{name: "port"}, // no source port
	{name: "bind_count", common: true},
	{name: "connect_count", common: true},
	{name: "connect_time", common: true},
	{name: "idle_time", common: true},
	{name: "sends", common: true},
	{name: "recvs", common: true},
	{name: "bad_xids", common: true},
	{name: "req_u", common: true},
	{name: "bklog_u", common: true},
	{name: "read_chunk_count", value: func(s *stats) uint64 { return s.readChunks.Load() }},
	{name: "write_chunk_count", value: func(s *stats) uint64 { return s.writeChunks.Load() }},
	{name: "reply_chunk_count", value: func(s *stats) uint64 { return s.replyChunks.Load() }},
	{name: "total_rdma_request", value: func(s *stats) uint64 { return s.rdmaRequestBytes.Load() }},
	{name: "total_rdma_reply", value: func(s *stats) uint64 { return s.rdmaReplyBytes.Load() }},
	{name: "pullup_copy_count", value: func(s *stats) uint64 { return s.pullupBytes.Load() }},
	{name: "fixup_copy_count", value: func(s *stats) uint64 { return s.fixupBytes.Load() }},
	{name: "hardway_register_count", value: func(s *stats) uint64 { return s.hardwayRegister.Load() }},
	{name: "failed_marshal_count", value: func(s *stats) uint64 { return s.failedMarshal.Load() }},
	{name: "bad_reply_count", value: func(s *stats) uint64 { return s.badReplies.Load() }},
	{name: "nomsg_call_count", value: func(s *stats) uint64 { return s.nomsgCalls.Load() }},
	// The kernel's memory registration counters.
	{name: "mrs_recycled", value: func(s *stats) uint64 { return s.mwReused.Load() }},
	{name: "mrs_orphaned"},
	{name: "mrs_allocated", value: func(s *stats) uint64 { return s.mwAllocated.Load() }},
	{name: "local_inv_needed", value: func(s *stats) uint64 { return s.localInv.Load() }},
	// The kernel counts waits for a free Send context; a call here waits
	// for a credit instead.
	{name: "empty_sendctx_q", value: func(s *stats) uint64 { return s.creditWaits.Load() }},
	{name: "reply_waits_for_send"},
	// rdmafs's own: read chunk payloads copied, and the bytes of buffers
	// registered now and at most (what the mount pins: its buffers grow
	// with the calls in flight and shrink when idle).
	{name: "payload_copies", value: func(s *stats) uint64 { return s.payloadCopies.Load() }},
	{name: "registered_bytes", value: func(s *stats) uint64 { return uint64(s.registered.Load()) }},
	{name: "registered_peak_bytes", value: func(s *stats) uint64 { return uint64(s.registeredPeak.Load()) }},
	// The credits the server grants now (a gauge).
	{name: "credits_granted", value: func(s *stats) uint64 { return uint64(s.creditsGranted.Load()) }},
	// Write chunks whose data the server placed straight in the caller's
	// memory (a FUSE ring entry): READ data copied by nobody in rdmafs.
	{name: "write_chunks_placed", value: func(s *stats) uint64 { return s.writeChunksPlaced.Load() }},
}

// StatNames returns the names of the fields of the "xprt: rdma" line after
// the word rdma, in the order the transport prints them (XprtStats):
// rdmafs stats reads the line by them.
func StatNames() []string {
	names := make([]string, len(statFields))
	for i, f := range statFields {
		names[i] = f.name
	}
	return names
}

// line renders the counters as the kernel's "xprt: rdma" line, without the
// "xprt:" prefix: the fields of statFields.
func (s *stats) line() string {
	b := make([]byte, 0, 256)
	b = append(b, "rdma"...)
	inCommon := false
	for _, f := range statFields {
		switch {
		case f.common:
			if !inCommon {
				b = append(append(b, ' '), s.Common()...)
			}
		case f.value == nil:
			b = append(b, " 0"...)
		default:
			b = strconv.AppendUint(append(b, ' '), f.value(s), 10)
		}
		inCommon = f.common
	}
	return string(b)
}
