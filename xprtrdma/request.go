package xprtrdma

import (
	"sync"

	"github.com/rdmafs/rdmafs/rpcrdma"
	"github.com/rdmafs/rdmafs/sunrpc"
	"github.com/rdmafs/rdmafs/verbs"
)

// request is one call on its way through an endpoint: the buffers and
// exposures it holds until its reply is in and every work request posted
// for it has completed. Requests live in a fixed table of the endpoint
// (one per credit the client asks for); a work request names its request
// by slot.
type request struct {
	slot int
	call *sunrpc.Call
	// xid is the call's, which delivers its reply: once its caller has
	// stopped waiting, the call may be reused for another.
	xid uint32

	send   *rpcrdma.Block // the Send's buffer
	write  *rpcrdma.Block // the write chunk's buffer (READ data)
	reply  *rpcrdma.Block // the reply chunk's buffer
	stage  *rpcrdma.Block // a read chunk's copy of a payload, or of a whole RDMA_NOMSG call
	recv   *rpcrdma.Block // the Receive the reply arrived in
	result sunrpc.Reply   // the reply, for its caller once the exposures are revoked
	offerW rpcrdma.Segment
	offerR rpcrdma.Segment
	hasW   bool
	hasR   bool

	mws          []boundWindow
	invalidating []boundWindow
	mrs          []verbs.MR

	// Completion state, under the endpoint's mutex.
	waiting   int  // signaled work requests still to complete
	replied   bool // the reply arrived (the credit is back)
	ready     bool // replied and exposures revoked: the call may complete
	delivered bool // the caller has the reply, or has gone
	posted    bool // past the post lock: in calls, teardown's to clean up
}

// reset readies a free request for a call.
func (r *request) reset(call *sunrpc.Call) {
	*r = request{slot: r.slot, call: call, xid: call.Xid,
		mws: r.mws[:0], invalidating: r.invalidating[:0], mrs: r.mrs[:0]}
}

// Work request kinds of the client: a Receive names its block of the
// small arena, the others their request's slot.
const (
	wrRecv rpcrdma.WRKind = iota + 1
	wrSend
	wrBind
	wrLocalInv
)

// replyBuffers hold a delivered reply's memory (its Receive, its chunks)
// until the caller releases the call.
type replyBuffers struct {
	blocks [3]*rpcrdma.Block
}

var replyBufferPool = sync.Pool{New: func() any { return new(replyBuffers) }}

// Release implements sunrpc.Releaser.
func (b *replyBuffers) Release() {
	for i, blk := range b.blocks {
		if blk != nil {
			blk.Release()
			b.blocks[i] = nil
		}
	}
	replyBufferPool.Put(b)
}
