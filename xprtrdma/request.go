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

	send  *rpcrdma.Block // the Send's buffer
	write *rpcrdma.Block // the write chunk's buffer (READ data)
	// into is the write chunk's memory instead when it is the caller's
	// (Call.ReplyInto in the chunk arena), intoOff where it lies there.
	into    []byte
	intoOff int
	reply   *rpcrdma.Block // the reply chunk's buffer
	stage   *rpcrdma.Block // a read chunk's copy of a payload, or of a whole RDMA_NOMSG call
	recv    *rpcrdma.Block // the Receive the reply arrived in
	result  sunrpc.Reply   // the reply, for its caller once the exposures are revoked
	offerW  rpcrdma.Segment
	offerR  rpcrdma.Segment
	hasW    bool
	hasR    bool

	mws          []boundWindow
	invalidating []boundWindow
	mrs          []verbs.MR

	// The work requests the call posts: its Send, the Receive that goes
	// up before it, and the binds of its memory windows, which marshal
	// queues in binds[:nbinds] and which go in one post with the Send,
	// chained before it (chain). A work request passed to the verbs.Conn
	// interface escapes to the heap, so one made per call would be an
	// allocation per call; these live as long as the request. The
	// provider copies a work request when it is posted (verbs.SendWR),
	// so each is free again once its Post returns, and only the
	// request's caller fills and posts them, while it holds the request
	// (reqPreparing, and reqPosted until its Send is posted).
	sendWR  verbs.SendWR
	sendSGL [3]verbs.SGE
	recvWR  verbs.RecvWR
	recvSGL [1]verbs.SGE
	binds   [maxChunks]verbs.SendWR
	nbinds  int

	// Under the endpoint's mutex.
	state   reqState
	waiting int // work requests posted for it not yet known to be done: its Send (sendQueue), a local invalidation
}

// maxChunks is the most chunks a call exposes (plan): one for its reply
// (a write chunk or a reply chunk) and one read chunk.
const maxChunks = 2

// chain links r's queued binds before its Send, for one post: the device
// binds the windows before it sends what names them.
func (r *request) chain() *verbs.SendWR {
	next := &r.sendWR
	for i := r.nbinds - 1; i >= 0; i-- {
		r.binds[i].Next = next
		next = &r.binds[i]
	}
	return next
}

// reqState is where a request stands. It goes round one way:
//
//	reqFree -> reqPreparing -> reqPosted -> reqRevoking -> reqDelivered -> reqFree
//
// and back to reqFree from reqPreparing or reqPosted when the call fails
// before its Send is posted (unwind, which its caller does while it holds
// the post lock). A request whose connection ends while it is reqPosted or
// reqRevoking is teardown's to clean up; in the other states, its caller's
// or the turn holder's at the completion queue.
type reqState uint8

const (
	// reqFree: in the endpoint's free list, or taken with a credit and
	// not yet given its call.
	reqFree reqState = iota
	// reqPreparing: its caller takes the call's buffers and marshals
	// it; a failure gives back all it took (unwind).
	reqPreparing
	// reqPosted: in the table of calls in flight, its work requests
	// (maybe) posted; its reply or teardown ends it.
	reqPosted
	// reqRevoking: its reply is in and its credit back; the call's
	// exposures are being revoked, and a local invalidation may be
	// outstanding (waiting). The caller does not have the reply yet.
	reqRevoking
	// reqDelivered: the reply went to its caller, or back to the arenas
	// if the caller had gone; the request waits for its Send's
	// completion before it is free.
	reqDelivered
)

// reset readies a free request for a call.
func (r *request) reset(call *sunrpc.Call) {
	*r = request{slot: r.slot, call: call, xid: call.Xid, state: reqPreparing,
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
