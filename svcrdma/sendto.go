package svcrdma

import (
	"encoding/binary"
	"errors"

	"github.com/rdmafs/rdmafs/rpcrdma"
	"github.com/rdmafs/rdmafs/sunrpc"
	"github.com/rdmafs/rdmafs/sunrpc/xdr"
	"github.com/rdmafs/rdmafs/verbs"
)

// Sending replies, as the kernel's svc_rdma_sendto.c (and svc_rdma_rw.c
// for pushing chunks): place what the client's chunks take by RDMA Write,
// then Send the transport header and the rest.

// grant is the credit value of a reply: what the client asks for, at most
// the server's credits, at least 1.
func (c *svcConn) grant() uint32 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return uint32(min(max(c.requested, 1), c.s.cfg.Credits))
}

// sendReply is the session's sunrpc.SendFunc: it places READ data in the write
// chunk and a reply too large to go inline in the reply chunk, by RDMA
// Write, then Sends the transport header and what is left inline.
func (c *svcConn) sendReply(reply []byte, p sunrpc.Placement) error {
	off, n := p.Off, p.Len
	if len(reply) < 4 {
		return errors.New("svcrdma: reply too short")
	}
	xid := binary.BigEndian.Uint32(reply)
	c.mu.Lock()
	sc := c.calls[xid]
	delete(c.calls, xid)
	c.mu.Unlock()
	if sc == nil {
		return nil // the connection went away, or a reply to no call
	}
	h := rpcrdma.Header{Xid: xid, Vers: rpcrdma.Version, Credits: c.grant(), Proc: rpcrdma.ProcMsg}
	inline := reply
	var pushed []pushSeg
	if sc.hasW {
		chunk := sc.write
		if n > 0 {
			if uint64(n) > chunk.Len() {
				c.sendError(xid, rpcrdma.ErrChunk)
				c.freeCall(sc)
				return nil
			}
			pushed = c.placeInChunk(&chunk, reply[off:off+n])
			pad := xdr.Pad(n)
			inline = append(append([]byte(nil), reply[:off]...), reply[min(off+n+pad, len(reply)):]...)
		} else {
			setChunkLengths(&chunk, 0)
		}
		h.Writes[0], h.NWrites = chunk, 1
	}
	if sc.hasR {
		chunk := sc.reply
		setChunkLengths(&chunk, 0)
		h.Reply, h.HasReply = chunk, true
	}
	if h.EncodedLen()+len(inline) > c.sendInline {
		if !sc.hasR || uint64(len(inline)) > sc.reply.Len() {
			c.sendError(xid, rpcrdma.ErrChunk)
			c.freeCall(sc)
			return nil
		}
		chunk := sc.reply
		pushed = append(pushed, c.placeInChunk(&chunk, inline)...)
		h.Reply, h.Proc = chunk, rpcrdma.ProcNoMsg
		inline = nil
	}
	return c.post(sc, &h, inline, pushed)
}

// pushSeg is one RDMA Write of reply data: bytes of the push buffer to a
// segment of the client's.
type pushSeg struct {
	data []byte
	seg  rpcrdma.Segment
}

// placeInChunk lays data over the chunk's segments in order, sets the
// segments' lengths to what each receives, and returns the writes.
func (c *svcConn) placeInChunk(chunk *rpcrdma.WriteChunk, data []byte) []pushSeg {
	var out []pushSeg
	for i := range chunk.Segments[:chunk.N] {
		s := &chunk.Segments[i]
		k := min(len(data), int(s.Length))
		s.Length = uint32(k)
		if k > 0 {
			out = append(out, pushSeg{data: data[:k], seg: *s})
		}
		data = data[k:]
	}
	return out
}

func setChunkLengths(chunk *rpcrdma.WriteChunk, n uint32) {
	for i := range chunk.Segments[:chunk.N] {
		chunk.Segments[i].Length = n
	}
}

// post copies the pushed data into registered memory, posts its RDMA
// Writes and then the Send of header and inline part; the call's slot is
// freed when the Send completes.
func (c *svcConn) post(sc *svcCall, h *rpcrdma.Header, inline []byte, pushed []pushSeg) error {
	if len(pushed) > 0 {
		b, err := block(c.push, c.lost)
		if err != nil {
			c.freeCall(sc)
			return err
		}
		sc.push = b
		at := 0
		for _, p := range pushed {
			copy(b.Bytes()[at:], p.data)
			sge := [1]verbs.SGE{c.pushRegs.sge(b, at, len(p.data))}
			err := c.conn.PostSend(&verbs.SendWR{ID: rpcrdma.WRID(svcWrite, sc.idx), Opcode: verbs.OpRDMAWrite, SGL: sge[:],
				RemoteAddr: p.seg.Offset, RKey: p.seg.Handle})
			if err != nil {
				c.freeCall(sc)
				return err
			}
			at += len(p.data)
		}
	}
	send, err := block(c.small, c.lost)
	if err != nil {
		c.freeCall(sc)
		return err
	}
	sc.send = send
	msg := h.Encode(send.Bytes()[:0])
	msg = append(msg, inline...)
	sge := [1]verbs.SGE{c.smallRegs.sge(send, 0, len(msg))}
	wr := verbs.SendWR{ID: rpcrdma.WRID(svcSend, sc.idx), Opcode: verbs.OpSend, SGL: sge[:], Signaled: true}
	if sc.hasInv {
		wr.Opcode, wr.InvalidateRKey = verbs.OpSendWithInv, sc.invKey
	}
	if err := c.conn.PostSend(&wr); err != nil {
		c.freeCall(sc)
		return err
	}
	return nil
}

// sendError answers xid with RDMA_ERROR.
func (c *svcConn) sendError(xid uint32, code uint32) {
	h := rpcrdma.Header{Xid: xid, Vers: rpcrdma.Version, Credits: c.grant(), Proc: rpcrdma.ProcError, ErrCode: code, VersLow: rpcrdma.Version, VersHigh: rpcrdma.Version}
	send := c.small.TryGetOrGrow()
	if send == nil {
		return // the client's call times out instead
	}
	msg := h.Encode(send.Bytes()[:0])
	sge := [1]verbs.SGE{c.smallRegs.sge(send, 0, len(msg))}
	if err := c.conn.PostSend(&verbs.SendWR{ID: rpcrdma.WRID(svcErrSend, send.Index()), Opcode: verbs.OpSend, SGL: sge[:], Signaled: true}); err != nil {
		send.Release()
		c.s.logf("svcrdma: send RDMA_ERROR: %v", err)
	}
}
