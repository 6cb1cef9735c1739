package xprtrdma

import (
	"errors"
	"fmt"

	"github.com/rdmafs/rdmafs/rpcrdma"
	"github.com/rdmafs/rdmafs/sunrpc"
)

// Replies: decode the transport header, find the call, check what the
// server says it used of the call's chunks, revoke the call's exposures
// and hand the reply over (the kernel's rpcrdma_reply_handler in
// rpc_rdma.c).

// reply handles a Receive: it decodes the transport header, finds the call
// and completes it.
func (ep *endpoint) reply(b *rpcrdma.Block, n int, inv uint32, hasInv bool) {
	t := ep.t
	data := b.Bytes()[:n]
	h := &ep.hdr
	hlen, derr := h.Decode(data)
	if derr != nil && len(data) < 4 {
		t.stats.badReplies.Add(1)
		b.Release()
		return
	}
	if derr != nil {
		h.Xid = uint32(data[0])<<24 | uint32(data[1])<<16 | uint32(data[2])<<8 | uint32(data[3])
	}
	r, ok := ep.calls.Claim(h.Xid)
	if !ok {
		t.stats.BadXids.Add(1)
		b.Release()
		return
	}
	ep.mu.Lock()
	if derr == nil && h.Vers == rpcrdma.Version {
		// A grant of 0 counts as 1; more than asked for is not used.
		ep.granted = min(max(int(h.Credits), 1), ep.credits)
		t.stats.creditsGranted.Store(int64(ep.granted))
	}
	r.state = reqRevoking
	r.recv = b
	ep.inflight--
	ep.wakeLocked()
	ep.mu.Unlock()

	var err error
	switch {
	case derr != nil:
		err = fmt.Errorf("%w: %v", ErrBadReply, derr)
	case h.Vers != rpcrdma.Version:
		err = fmt.Errorf("%w: transport header version %d", ErrBadReply, h.Vers)
	case h.Proc == rpcrdma.ProcError:
		err = &RDMAError{Code: h.ErrCode, Low: h.VersLow, High: h.VersHigh}
	}
	var msg, payload []byte
	if err == nil {
		msg, payload, err = parseReply(r, h, data, hlen)
	}
	if err != nil {
		t.stats.badReplies.Add(1)
	} else {
		if !ep.worked.Swap(true) {
			t.connected()
		}
		t.stats.rdmaReplyBytes.Add(uint64(len(payload)))
		if h.Proc == rpcrdma.ProcNoMsg {
			t.stats.rdmaReplyBytes.Add(uint64(len(msg)))
		}
	}
	ep.mu.Lock()
	r.result = sunrpc.Reply{Msg: msg, Payload: payload, Err: err}
	ep.mu.Unlock()

	// No rkey of the call may work once it completes.
	// The device reports which rkey a Send With Invalidate killed; the
	// client said it accepts them (RFC 8797), whatever the server's flags.
	wait, rerr := ep.reg.revoke(r, inv, hasInv)
	if rerr != nil {
		ep.fail(rerr)
	}
	if wait {
		ep.mu.Lock()
		r.waiting++ // the local invalidation; its completion delivers
		ep.mu.Unlock()
	} else {
		ep.deliver(r)
	}
	ep.settle(r)
}

// deliver hands r's reply to its caller once the call's exposures are
// revoked, or gives its buffers back if the caller has gone.
func (ep *endpoint) deliver(r *request) {
	ep.mu.Lock()
	if r.state != reqRevoking {
		ep.mu.Unlock()
		return
	}
	r.state = reqDelivered
	bufs := replyBufferPool.Get().(*replyBuffers)
	bufs.blocks = [3]*rpcrdma.Block{r.recv, r.write, r.reply}
	r.recv, r.write, r.reply = nil, nil, nil
	result := r.result
	r.result = sunrpc.Reply{}
	taken := ep.calls.Deliver(r.xid, result, bufs)
	ep.mu.Unlock()
	if !taken {
		bufs.Release() // its caller has gone: the reply is ours to give back
	}
}

// settle frees r once its reply is delivered and nothing of it is in
// flight.
func (ep *endpoint) settle(r *request) {
	ep.mu.Lock()
	if r.state == reqDelivered && r.waiting == 0 {
		if r.send != nil {
			r.send.Release()
			r.send = nil
		}
		if r.stage != nil {
			r.stage.Release()
			r.stage = nil
		}
		r.call = nil
		r.state = reqFree
		ep.free = append(ep.free, r)
		ep.wakeLocked()
	}
	ep.mu.Unlock()
}

// ErrBadReply is wrapped by the error of a call whose reply broke the
// protocol; the call fails with it (EIO) and bad_reply_count counts it.
var ErrBadReply = errors.New("xprtrdma: bad reply")

// RDMAError is the error of a call the server answered with RDMA_ERROR.
type RDMAError struct {
	Code      uint32
	Low, High uint32
}

func (e *RDMAError) Error() string {
	switch e.Code {
	case rpcrdma.ErrVers:
		return fmt.Sprintf("xprtrdma: server speaks RPC-over-RDMA versions %d to %d only (ERR_VERS)", e.Low, e.High)
	case rpcrdma.ErrChunk:
		return "xprtrdma: server could not process the call's chunks (ERR_CHUNK)"
	}
	return fmt.Sprintf("xprtrdma: RDMA_ERROR %d", e.Code)
}

func (e *RDMAError) Unwrap() error { return ErrBadReply }

// parseReply finds r's reply in the header h and the Receive data: the RPC
// message and, if the server used the write chunk, the payload. Every
// length is checked against what r offered, so a reply cannot make the
// client read outside r's own buffers.
func parseReply(r *request, h *rpcrdma.Header, data []byte, hlen int) (msg, payload []byte, err error) {
	if h.NReads != 0 {
		return nil, nil, fmt.Errorf("%w: reply with a read list", ErrBadReply)
	}
	if r.hasW {
		if h.NWrites > 1 {
			return nil, nil, fmt.Errorf("%w: %d write chunks for 1 offered", ErrBadReply, h.NWrites)
		}
		if h.NWrites == 1 {
			n, err := usedChunk(&h.Writes[0], r.offerW)
			if err != nil {
				return nil, nil, err
			}
			switch {
			case n == 0:
			case r.into != nil:
				payload = r.into[:n]
			default:
				payload = r.write.Bytes()[:n]
			}
		}
	} else if h.NWrites != 0 {
		return nil, nil, fmt.Errorf("%w: write list with none offered", ErrBadReply)
	}
	var replyLen uint32
	if h.HasReply {
		if !r.hasR {
			return nil, nil, fmt.Errorf("%w: reply chunk with none offered", ErrBadReply)
		}
		if replyLen, err = usedChunk(&h.Reply, r.offerR); err != nil {
			return nil, nil, err
		}
	}
	switch h.Proc {
	case rpcrdma.ProcMsg:
		if replyLen != 0 {
			return nil, nil, fmt.Errorf("%w: RDMA_MSG with a used reply chunk", ErrBadReply)
		}
		msg = data[hlen:]
	case rpcrdma.ProcNoMsg:
		if !h.HasReply || len(data) != hlen {
			return nil, nil, fmt.Errorf("%w: RDMA_NOMSG without its reply chunk", ErrBadReply)
		}
		msg = r.reply.Bytes()[:replyLen]
	}
	if len(msg) < 12 {
		return nil, nil, fmt.Errorf("%w: RPC reply of %d bytes", ErrBadReply, len(msg))
	}
	return msg, payload, nil
}

// usedChunk checks a chunk the server returned against the one segment
// offered and returns how many bytes it wrote.
func usedChunk(c *rpcrdma.WriteChunk, offer rpcrdma.Segment) (uint32, error) {
	if c.N != 1 {
		return 0, fmt.Errorf("%w: chunk of %d segments for 1 offered", ErrBadReply, c.N)
	}
	s := c.Segments[0]
	if s.Handle != offer.Handle || s.Offset != offer.Offset || s.Length > offer.Length {
		return 0, fmt.Errorf("%w: chunk segment %#x:%d@%#x for %#x:%d@%#x offered",
			ErrBadReply, s.Handle, s.Length, s.Offset, offer.Handle, offer.Length, offer.Offset)
	}
	return s.Length, nil
}
