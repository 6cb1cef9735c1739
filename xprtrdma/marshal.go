package xprtrdma

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/rdmafs/rdmafs/rpcrdma"
	"github.com/rdmafs/rdmafs/sunrpc"
	"github.com/rdmafs/rdmafs/sunrpc/xdr"
	"github.com/rdmafs/rdmafs/verbs"
)

// Marshaling: how each call goes out and what its reply may use, as the
// Linux client chooses (rpc_rdma.c):
//
//   - A call that fits in the Send goes inline (RDMA_MSG).
//   - A call with a payload (WRITE data, a SYMLINK target) that does not
//     fit goes with the payload in a read chunk at its XDR position, its
//     pad left off, and the rest inline (RDMA_MSG).
//   - Any other call that does not fit goes whole in a position-zero read
//     chunk (RDMA_NOMSG).
//   - A reply with a payload (READ data) that may not fit comes back with
//     the payload in a write chunk; any other reply that may not fit
//     (READDIR, READDIRPLUS, READLINK) in a reply chunk.

// replySlack bounds what a READ reply carries inline besides its data: the
// transport header with the write list echoed, the RPC reply header, the
// status, the attributes, count, eof and the data's length.
const replySlack = 256

// ErrMarshal is wrapped by the error of a call the transport cannot send
// (it is larger than a chunk buffer).
var ErrMarshal = errors.New("xprtrdma: cannot marshal call")

// replyWay is how a call's reply may come back.
type replyWay uint8

const (
	replyInline replyWay = iota
	replyWrite           // READ data in a write chunk, the rest inline
	replyChunk           // the whole reply in a reply chunk (RDMA_NOMSG)
)

// callWay is how a call goes out.
type callWay uint8

const (
	callInline    callWay = iota // whole in the Send (RDMA_MSG)
	callReadChunk                // its payload in a read chunk, the rest inline
	callNoMsg                    // whole in a position-zero read chunk (RDMA_NOMSG)
)

// plan is how a call goes and what it needs, decided before any buffer is
// taken, so that every wait for a buffer comes before the connection's
// post lock is taken (teardown must never wait for a call that waits).
type plan struct {
	reply replyWay
	call  callWay
	// stage: the call needs a chunk buffer for a copy (an RDMA_NOMSG
	// call, or a payload outside the chunk arena).
	stage bool
	// into: the write chunk is the caller's ReplyInto, which lies in
	// the chunk arena (a FUSE ring entry's buffer), at intoOff; no chunk
	// buffer is taken for it.
	into    bool
	intoOff int
	pad     int // the payload's XDR pad
	msg     int // the whole RPC message's length
}

// plan decides how call goes on this connection.
func (ep *endpoint) plan(call *sunrpc.Call) (plan, error) {
	t := ep.t
	var p plan
	h := rpcrdma.Header{}
	switch {
	case call.ReplyPayload > 0 && call.ReplyPayload+replySlack > ep.inlineRecv:
		if call.ReplyPayload > t.chunks.BlockSize() {
			return p, fmt.Errorf("%w: reply payload of %d bytes, chunks hold %d", ErrMarshal, call.ReplyPayload, t.chunks.BlockSize())
		}
		p.reply = replyWrite
		h.Writes[0].N, h.NWrites = 1, 1
		p.intoOff, p.into = t.placeable(call)
	case call.ReplyMax > ep.inlineRecv:
		p.reply = replyChunk
		h.Reply.N, h.HasReply = 1, true
	}
	p.pad = xdr.Pad(len(call.Payload))
	p.msg = len(call.Head) + len(call.Payload) + p.pad + len(call.Tail)
	hlen := h.EncodedLen()
	switch {
	case hlen+p.msg <= ep.inlineSend:
		p.call = callInline
	case call.Payload != nil && hlen+rpcrdma.ReadEntryLen+len(call.Head)+len(call.Tail) <= ep.inlineSend:
		p.call = callReadChunk
		if _, ok := t.chunks.OffsetOf(call.Payload); !ok {
			if len(call.Payload) > t.chunks.BlockSize() {
				return p, fmt.Errorf("%w: payload of %d bytes, chunks hold %d", ErrMarshal, len(call.Payload), t.chunks.BlockSize())
			}
			p.stage = true
		}
	default:
		if p.msg > t.chunks.BlockSize() {
			return p, fmt.Errorf("%w: call of %d bytes, chunks hold %d", ErrMarshal, p.msg, t.chunks.BlockSize())
		}
		p.call, p.stage = callNoMsg, true
	}
	return p, nil
}

// take takes the chunk buffers plan p needs for r, waiting for them until
// the try's deadline, ctx's end or the connection's.
func (ep *endpoint) take(ctx context.Context, deadline time.Time, r *request, p *plan) error {
	chunks := ep.t.chunks
	var err error
	switch p.reply {
	case replyWrite:
		if p.into {
			r.into, r.intoOff = r.call.ReplyInto[:r.call.ReplyPayload], p.intoOff
			break
		}
		if r.write, err = ep.getBlock(ctx, deadline, chunks); err != nil {
			return err
		}
	case replyChunk:
		if r.reply, err = ep.getBlock(ctx, deadline, chunks); err != nil {
			return err
		}
	}
	if p.stage {
		if r.stage, err = ep.getBlock(ctx, deadline, chunks); err != nil {
			return err
		}
	}
	return nil
}

// marshal builds r's call as planned, in the buffers take took: it
// exposes the chunks and builds the Send in r.sendWR. It posts nothing:
// binds of memory windows are queued in r.binds, and the caller posts
// them with the Send (r.chain). It never waits.
func (ep *endpoint) marshal(r *request, p *plan, h *rpcrdma.Header) error {
	t := ep.t
	call := r.call
	*h = rpcrdma.Header{Xid: call.Xid, Vers: rpcrdma.Version, Credits: uint32(ep.credits), Proc: rpcrdma.ProcMsg}

	// What the reply may need.
	switch p.reply {
	case replyWrite:
		off := r.intoOff
		if r.into == nil {
			off = r.write.Off()
		}
		seg, err := ep.reg.expose(r, off, call.ReplyPayload, verbs.AccessRemoteWrite|verbs.AccessLocalWrite)
		if err != nil {
			return err
		}
		r.offerW, r.hasW = seg, true
		h.Writes[0].Segments[0], h.Writes[0].N, h.NWrites = seg, 1, 1
		t.stats.writeChunks.Add(1)
		if r.into != nil {
			t.stats.writeChunksPlaced.Add(1)
		}
	case replyChunk:
		seg, err := ep.reg.expose(r, r.reply.Off(), min(call.ReplyMax, t.chunks.BlockSize()), verbs.AccessRemoteWrite|verbs.AccessLocalWrite)
		if err != nil {
			return err
		}
		r.offerR, r.hasR = seg, true
		h.Reply.Segments[0], h.Reply.N, h.HasReply = seg, 1, true
		t.stats.replyChunks.Add(1)
	}

	// How the call goes.
	send := r.send.Bytes()[:ep.inlineSend]
	switch p.call {
	case callInline:
		return ep.marshalInline(r, h, send, p.pad)
	case callReadChunk:
		seg, err := ep.exposePayload(r, call.Payload)
		if err != nil {
			return err
		}
		h.Reads[0], h.NReads = rpcrdma.ReadSegment{Position: uint32(len(call.Head)), Segment: seg}, 1
		t.stats.readChunks.Add(1)
		t.stats.rdmaRequestBytes.Add(uint64(len(call.Payload)))
		buf := h.Encode(send[:0])
		buf = append(buf, call.Head...)
		buf = append(buf, call.Tail...)
		return ep.setSend(r, len(buf))
	default:
		whole := r.stage.Bytes()[:0]
		whole = append(whole, call.Head...)
		whole = append(whole, call.Payload...)
		whole = append(whole, zeroPad[:p.pad]...)
		whole = append(whole, call.Tail...)
		t.stats.pullupBytes.Add(uint64(len(whole)))
		seg, err := ep.reg.expose(r, r.stage.Off(), len(whole), verbs.AccessRemoteRead)
		if err != nil {
			return err
		}
		h.Proc = rpcrdma.ProcNoMsg
		h.Reads[0], h.NReads = rpcrdma.ReadSegment{Position: 0, Segment: seg}, 1
		t.stats.readChunks.Add(1)
		t.stats.nomsgCalls.Add(1)
		t.stats.rdmaRequestBytes.Add(uint64(len(whole)))
		buf := h.Encode(send[:0])
		return ep.setSend(r, len(buf))
	}
}

var zeroPad [4]byte

// marshalInline puts the whole call in the Send. A payload in the chunk
// arena (write-behind's buffers) is sent from there by its own scatter
// entry; any other is copied.
func (ep *endpoint) marshalInline(r *request, h *rpcrdma.Header, send []byte, pad int) error {
	call := r.call
	buf := h.Encode(send[:0])
	buf = append(buf, call.Head...)
	if off, ok := ep.t.chunks.OffsetOf(call.Payload); ok {
		headLen := len(buf)
		// The pad and tail go after the head in the same Send buffer,
		// named by a third entry.
		rest := append(send[headLen:headLen], zeroPad[:pad]...)
		rest = append(rest, call.Tail...)
		smr, soff, err := ep.small.at(r.send.Off())
		if err != nil {
			return err
		}
		cmr, coff, err := ep.chunks.at(off)
		if err != nil {
			return err
		}
		r.sendSGL = [3]verbs.SGE{
			{MR: smr, Offset: soff, Length: headLen},
			{MR: cmr, Offset: coff, Length: len(call.Payload)},
			{MR: smr, Offset: soff + headLen, Length: len(rest)},
		}
		r.sendWR = verbs.SendWR{ID: rpcrdma.WRID(wrSend, r.slot), Opcode: verbs.OpSend, SGL: r.sendSGL[:3]}
		return nil
	}
	buf = append(buf, call.Payload...)
	buf = append(buf, zeroPad[:pad]...)
	buf = append(buf, call.Tail...)
	ep.t.stats.pullupBytes.Add(uint64(len(call.Payload)))
	return ep.setSend(r, len(buf))
}

// exposePayload exposes a read chunk's payload: in place when it lies in
// the chunk arena, else from a copy in r's staging buffer.
func (ep *endpoint) exposePayload(r *request, payload []byte) (rpcrdma.Segment, error) {
	t := ep.t
	off, ok := t.chunks.OffsetOf(payload)
	if !ok {
		copy(r.stage.Bytes(), payload)
		off = r.stage.Off()
		t.stats.payloadCopies.Add(1)
	}
	return ep.reg.expose(r, off, len(payload), verbs.AccessRemoteRead)
}

// setSend makes r's Send the first n bytes of its Send buffer.
func (ep *endpoint) setSend(r *request, n int) error {
	mr, off, err := ep.small.at(r.send.Off())
	if err != nil {
		return err
	}
	r.sendSGL[0] = verbs.SGE{MR: mr, Offset: off, Length: n}
	r.sendWR = verbs.SendWR{ID: rpcrdma.WRID(wrSend, r.slot), Opcode: verbs.OpSend, SGL: r.sendSGL[:1]}
	return nil
}
