package svcrdma

import (
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/rdmafs/rdmafs/rpcrdma"
	"github.com/rdmafs/rdmafs/sunrpc/xdr"
	"github.com/rdmafs/rdmafs/verbs"
)

// Taking calls, as the kernel's svc_rdma_recvfrom.c (and svc_rdma_rw.c
// for pulling read chunks): check the transport header, assemble the call
// message, hand it to the session.

// Call errors answered with RDMA_ERROR ERR_CHUNK.
var (
	errChunk    = errors.New("svcrdma: chunks not acceptable")
	errNoBuffer = errors.New("svcrdma: no buffer free for the call")
)

// receive takes one call: it checks the transport header, pulls the read
// chunk if any, and hands the call on (after the pull completes).
func (c *svcConn) receive(data []byte) error {
	h := &c.hdr
	hlen, err := h.Decode(data)
	if err != nil || h.Vers != rpcrdma.Version {
		if len(data) < 4 {
			return fmt.Errorf("message of %d bytes", len(data))
		}
		xid := binary.BigEndian.Uint32(data)
		if err == nil {
			c.sendError(xid, rpcrdma.ErrVers)
		} else {
			c.sendError(xid, rpcrdma.ErrChunk)
		}
		return nil
	}
	if h.Proc == rpcrdma.ProcError {
		return nil // a client has no business sending errors: ignore
	}
	c.mu.Lock()
	c.requested = int(h.Credits)
	if len(c.free) == 0 {
		c.mu.Unlock()
		return errors.New("client exceeded its credits")
	}
	sc := c.free[len(c.free)-1]
	c.free = c.free[:len(c.free)-1]
	c.mu.Unlock()
	*sc = svcCall{c: c, idx: sc.idx, xid: h.Xid}
	c.mu.Lock()
	c.calls[h.Xid] = sc
	c.mu.Unlock()
	if err := c.prepare(sc, h, data[hlen:]); err != nil {
		if errors.Is(err, errNoBuffer) {
			c.s.logf("svcrdma: connection from %s: %v", c.conn.RemoteAddr(), err)
		}
		c.mu.Lock()
		delete(c.calls, h.Xid)
		c.mu.Unlock()
		c.sendError(h.Xid, rpcrdma.ErrChunk)
		c.freeCall(sc)
		return nil
	}
	if sc.msg != nil {
		c.dispatch <- sc
	}
	return nil
}

// prepare checks a call's chunks, keeps what its reply needs, and
// assembles its message: at once when it is all inline, else by posting
// the RDMA Reads of its read chunk into place (receive dispatches it when
// sc.msg is set, the Read's completion when it is not).
func (c *svcConn) prepare(sc *svcCall, h *rpcrdma.Header, inline []byte) error {
	if h.NWrites > 1 {
		return errChunk
	}
	if h.NWrites == 1 {
		sc.write, sc.hasW = h.Writes[0], true
	}
	if h.HasReply {
		sc.reply, sc.hasR = h.Reply, true
	}
	sc.invKey, sc.hasInv = c.invalidation(h)
	// The completion loop must not wait for a buffer (completions free
	// them): an inline call is copied into a small one, a call with a
	// read chunk assembled in a large one, and without one to spare the
	// call is refused.
	pool := c.data
	if h.NReads == 0 {
		pool = c.small
	}
	b := pool.TryGet()
	if b == nil {
		return errNoBuffer
	}
	sc.pull = b
	buf := b.Bytes()
	pos, total, err := checkCall(h, inline, c.recvInline, len(buf))
	if err != nil {
		return err
	}
	if h.NReads == 0 {
		sc.msg = append(buf[:0], inline...)
		return nil
	}
	pad := xdr.Pad(total)
	// The message: inline up to the position, the chunk, its pad, the rest.
	copy(buf, inline[:pos])
	at := int(pos)
	end := at + total
	clear(buf[end : end+pad])
	copy(buf[end+pad:], inline[pos:])
	msgLen := len(inline) + total + pad
	for i, r := range h.Reads[:h.NReads] {
		last := i == h.NReads-1
		sge := [1]verbs.SGE{{MR: c.dataMR, Offset: b.Off() + at, Length: int(r.Length)}}
		err := c.conn.PostSend(&verbs.SendWR{
			ID: rpcrdma.WRID(svcRead, sc.idx), Opcode: verbs.OpRDMARead, SGL: sge[:], Signaled: last,
			RemoteAddr: r.Offset, RKey: r.Handle,
		})
		if err != nil {
			return err
		}
		at += int(r.Length)
	}
	sc.msg = nil
	sc.pullLen = msgLen
	return nil
}

// checkCall checks what a call's header and inline part say against what
// the server takes: inline no larger than the client may send, at most
// one read chunk, at a 4-byte aligned position inside the inline part (0
// and nothing inline for RDMA_NOMSG), and the whole message within a
// buffer of bufSize. It returns the read chunk's position and length.
func checkCall(h *rpcrdma.Header, inline []byte, maxInline, bufSize int) (pos uint32, total int, err error) {
	if len(inline) > maxInline {
		return 0, 0, errChunk
	}
	if h.NReads == 0 {
		if h.Proc != rpcrdma.ProcMsg {
			return 0, 0, errChunk
		}
		return 0, 0, nil
	}
	pos = h.Reads[0].Position
	for _, r := range h.Reads[:h.NReads] {
		if r.Position != pos {
			return 0, 0, errChunk
		}
		total += int(r.Length)
		if total > bufSize {
			return 0, 0, errChunk
		}
	}
	switch {
	case pos%4 != 0 || int(pos) > len(inline):
		return 0, 0, errChunk
	case h.Proc == rpcrdma.ProcNoMsg && (pos != 0 || len(inline) != 0):
		return 0, 0, errChunk
	case len(inline)+total+xdr.Pad(total) > bufSize:
		return 0, 0, errChunk
	}
	return pos, total, nil
}

// invalidation picks the rkey the reply may invalidate remotely: only when
// the client takes Send With Invalidate and every segment of the call's
// chunks has the same one (as Linux svcrdma).
func (c *svcConn) invalidation(h *rpcrdma.Header) (uint32, bool) {
	if !c.remoteInv {
		return 0, false
	}
	var key uint32
	seen := false
	same := func(k uint32) bool {
		if !seen {
			key, seen = k, true
		}
		return k == key
	}
	for _, r := range h.Reads[:h.NReads] {
		if !same(r.Handle) {
			return 0, false
		}
	}
	for i := range h.Writes[:h.NWrites] {
		for _, s := range h.Writes[i].Segments[:h.Writes[i].N] {
			if !same(s.Handle) {
				return 0, false
			}
		}
	}
	if h.HasReply {
		for _, s := range h.Reply.Segments[:h.Reply.N] {
			if !same(s.Handle) {
				return 0, false
			}
		}
	}
	return key, seen
}
