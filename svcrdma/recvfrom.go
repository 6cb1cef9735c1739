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

// errChunk: a call answered with RDMA_ERROR ERR_CHUNK.
var errChunk = errors.New("svcrdma: chunks not acceptable")

// receive takes one call from its Receive buffer b: it checks the
// transport header and hands the call on, to the session when it is all
// inline, to the puller when it has a read chunk. It reports whether the
// call kept b (then the call releases it).
func (c *svcConn) receive(b *rpcrdma.Block, data []byte) (bool, error) {
	h := &c.hdr
	hlen, err := h.Decode(data)
	if err != nil || h.Vers != rpcrdma.Version {
		if len(data) < 4 {
			return false, fmt.Errorf("message of %d bytes", len(data))
		}
		xid := binary.BigEndian.Uint32(data)
		if err == nil {
			c.sendError(xid, rpcrdma.ErrVers)
		} else {
			c.sendError(xid, rpcrdma.ErrChunk)
		}
		return false, nil
	}
	if h.Proc == rpcrdma.ProcError {
		return false, nil // a client has no business sending errors: ignore
	}
	c.mu.Lock()
	c.requested = int(h.Credits)
	if len(c.free) == 0 {
		c.mu.Unlock()
		return false, errors.New("client exceeded its credits")
	}
	sc := c.free[len(c.free)-1]
	c.free = c.free[:len(c.free)-1]
	c.mu.Unlock()
	*sc = svcCall{c: c, idx: sc.idx, xid: h.Xid}
	c.mu.Lock()
	c.calls[h.Xid] = sc
	c.mu.Unlock()
	if err := c.prepare(sc, h, b, data[hlen:]); err != nil {
		c.mu.Lock()
		delete(c.calls, h.Xid)
		c.mu.Unlock()
		c.sendError(h.Xid, rpcrdma.ErrChunk)
		c.freeCall(sc)
		return false, nil
	}
	if sc.msg != nil {
		c.dispatch <- sc
	} else {
		c.pulls <- sc // never full: it holds at most the call table
	}
	return true, nil
}

// prepare checks a call's chunks and keeps what its reply needs. The call
// keeps its Receive buffer b: an inline call's message is in it (sc.msg
// is set); a call with a read chunk keeps its inline part there until the
// puller assembles the message.
func (c *svcConn) prepare(sc *svcCall, h *rpcrdma.Header, b *rpcrdma.Block, inline []byte) error {
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
	pos, total, err := checkCall(h, inline, c.recvInline, c.pull.BlockSize())
	if err != nil {
		return err
	}
	if h.NReads == 0 {
		sc.pull, sc.msg = b, inline
		return nil
	}
	sc.recv, sc.inline = b, inline
	sc.reads, sc.nReads = h.Reads, h.NReads
	sc.pos, sc.total = pos, total
	return nil
}

// puller pulls the read chunks of calls, in order, each once a pull
// buffer is free for it: the completion loop must not wait for one
// (completions free them). A connection's calls with read chunks so wait
// for its buffers, at most Credits calls' worth, rather than fail.
func (c *svcConn) puller(done chan<- struct{}) {
	defer close(done)
	failed := false
	for sc := range c.pulls {
		if !failed {
			if err := c.pullCall(sc); err != nil {
				if !errors.Is(err, rpcrdma.ErrLost) {
					c.s.logf("svcrdma: connection from %s: pulling a read chunk: %v", c.conn.RemoteAddr(), err)
				}
				failed = true
				c.conn.Disconnect()
			}
		}
		if failed && sc.recv != nil {
			sc.recv.Release()
			sc.recv, sc.inline = nil, nil
		}
	}
}

// pullCall assembles the message of a call with a read chunk in a pull
// buffer: the inline part up to the chunk's position, the chunk (by RDMA
// Reads), its pad, the rest; the last Read's completion dispatches it.
func (c *svcConn) pullCall(sc *svcCall) error {
	b, err := block(c.pull, c.lost)
	if err != nil {
		return err
	}
	buf := b.Bytes()
	inline, pos, total := sc.inline, sc.pos, sc.total
	pad := xdr.Pad(total)
	copy(buf, inline[:pos])
	at := int(pos)
	end := at + total
	clear(buf[end : end+pad])
	copy(buf[end+pad:], inline[pos:])
	sc.pullLen = len(inline) + total + pad
	sc.recv.Release()
	sc.recv, sc.inline = nil, nil
	sc.msg, sc.pull = nil, b
	for i, r := range sc.reads[:sc.nReads] {
		last := i == sc.nReads-1
		sge := [1]verbs.SGE{c.pullRegs.sge(b, at, int(r.Length))}
		err := c.conn.PostSend(&verbs.SendWR{
			ID: rpcrdma.WRID(svcRead, sc.idx), Opcode: verbs.OpRDMARead, SGL: sge[:], Signaled: last,
			RemoteAddr: r.Offset, RKey: r.Handle,
		})
		if err != nil {
			return err
		}
		at += int(r.Length)
	}
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
