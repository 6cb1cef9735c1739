package svcrdma

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"sync"

	"github.com/rdmafs/rdmafs/rpcrdma"
	"github.com/rdmafs/rdmafs/sunrpc/xdr"
	"github.com/rdmafs/rdmafs/verbs"
)

// svcConn is one client connection of the server.
type svcConn struct {
	s       *Server
	conn    verbs.Conn
	small   *rpcrdma.Arena // Sends and Receives
	data    *rpcrdma.Arena // chunk data pulled and pushed
	smallMR verbs.MR
	dataMR  verbs.MR
	session Session

	recvInline, sendInline int  // what the client sends and takes inline
	remoteInv              bool // the client takes Send With Invalidate

	mu        sync.Mutex
	table     []svcCall
	free      []*svcCall
	calls     map[uint32]*svcCall // served, waiting for the reply
	requested int                 // credits the client asks for

	dispatch chan *svcCall
	hdr      rpcrdma.Header
}

// svcCall is one call on the server: its chunks and the buffers that carry
// its data.
type svcCall struct {
	c   *svcConn
	idx int

	xid    uint32
	write  rpcrdma.WriteChunk // the write chunk offered, if hasW
	reply  rpcrdma.WriteChunk // the reply chunk offered, if hasR
	hasW   bool
	hasR   bool
	invKey uint32 // the rkey to invalidate with the reply, if hasInv
	hasInv bool

	msg     []byte         // the whole call message, in pull
	pull    *rpcrdma.Block // the call, assembled (with read chunk data pulled in)
	pullLen int            // the message's length once the pull completes
	push    *rpcrdma.Block // reply data pushed to the client
	send    *rpcrdma.Block
}

// Work request kinds of the server.
const (
	svcRecv rpcrdma.WRKind = iota + 1
	svcRead
	svcSend
	svcErrSend // an RDMA_ERROR's Send: the id names its buffer
	svcWrite   // an RDMA Write of reply data (unsignaled)
)

// Call errors answered with RDMA_ERROR ERR_CHUNK.
var (
	errChunk    = errors.New("rpcrdma: chunks not acceptable")
	errNoBuffer = errors.New("rpcrdma: no buffer free for the call")
)

// run serves the connection until it ends.
func (c *svcConn) run() {
	defer c.close()
	c.session = c.s.cfg.NewSession(c.sendReply)
	defer c.session.Close()
	c.dispatch = make(chan *svcCall, len(c.table))
	dispatchDone := make(chan struct{})
	go c.dispatcher(dispatchDone)
	defer func() {
		close(c.dispatch)
		<-dispatchDone
	}()
	for i := 0; i < c.s.cfg.Credits; i++ {
		if err := c.postRecv(); err != nil {
			c.s.logf("rpcrdma: post receive: %v", err)
			return
		}
	}
	wcs := make([]verbs.Completion, 32)
	ctx := context.Background()
	for {
		n, err := c.conn.Poll(wcs)
		if err != nil {
			return
		}
		for i := range wcs[:n] {
			if !c.complete(&wcs[i]) {
				return
			}
		}
		if n < len(wcs) {
			// Wait polls before it sleeps: no empty Poll first.
			if err := c.conn.Wait(ctx); err != nil {
				return
			}
		}
	}
}

// dispatcher hands calls to the session in order; Session.Call may wait
// for a free worker, which must not hold up completions.
func (c *svcConn) dispatcher(done chan<- struct{}) {
	defer close(done)
	for sc := range c.dispatch {
		// The call may be answered, and its slot freed, before Call
		// returns: take its message buffer first.
		msg, pull := sc.msg, sc.pull
		sc.msg, sc.pull = nil, nil
		err := c.session.Call(msg)
		pull.Release() // Call copied the message
		if err != nil {
			c.conn.Disconnect()
		}
	}
}

func (c *svcConn) postRecv() error {
	b, err := c.small.Get(context.Background(), nil)
	if err != nil {
		return err
	}
	sge := [1]verbs.SGE{{MR: c.smallMR, Offset: b.Off(), Length: c.small.BlockSize()}}
	if err := c.conn.PostRecv(&verbs.RecvWR{ID: rpcrdma.WRID(svcRecv, b.Index()), SGL: sge[:]}); err != nil {
		b.Release()
		return err
	}
	return nil
}

// complete handles one work completion; false ends the connection.
func (c *svcConn) complete(wc *verbs.Completion) bool {
	kind, n := rpcrdma.SplitWRID(wc.ID)
	switch kind {
	case svcRecv:
		b := c.small.Block(n)
		if wc.Status != verbs.StatusSuccess {
			b.Release()
			return wc.Status == verbs.StatusWRFlushErr
		}
		err := c.receive(b.Bytes()[:wc.ByteLen])
		b.Release()
		if err == nil {
			err = c.postRecv()
		}
		if err != nil {
			c.s.logf("rpcrdma: connection from %s: %v", c.conn.RemoteAddr(), err)
			return false
		}
	case svcRead:
		if n < 0 || n >= len(c.table) {
			return false
		}
		sc := &c.table[n]
		if wc.Status != verbs.StatusSuccess {
			// The client's read chunk could not be read (a bad rkey):
			// the queue pair is in error, the connection ends.
			return false
		}
		sc.msg = sc.pull.Bytes()[:sc.pullLen]
		c.dispatch <- sc
	case svcSend:
		if n < 0 || n >= len(c.table) {
			return false
		}
		if wc.Status != verbs.StatusSuccess {
			return false
		}
		c.freeCall(&c.table[n])
	case svcErrSend:
		if n >= 0 && n < c.small.Len() && wc.Status == verbs.StatusSuccess {
			c.small.Block(n).Release()
		}
		return wc.Status == verbs.StatusSuccess
	case svcWrite:
		return false // only a failed Write completes
	}
	return true
}

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
			c.s.logf("rpcrdma: connection from %s: %v", c.conn.RemoteAddr(), err)
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

// grant is the credit value of a reply: what the client asks for, at most
// the server's credits, at least 1.
func (c *svcConn) grant() uint32 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return uint32(min(max(c.requested, 1), c.s.cfg.Credits))
}

// sendReply is the session's SendFunc: it places READ data in the write
// chunk and a reply too large to go inline in the reply chunk, by RDMA
// Write, then Sends the transport header and what is left inline.
func (c *svcConn) sendReply(reply []byte, off, n int) error {
	if len(reply) < 4 {
		return errors.New("rpcrdma: reply too short")
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
		b, err := c.data.Get(context.Background(), nil)
		if err != nil {
			return err
		}
		sc.push = b
		at := 0
		for _, p := range pushed {
			copy(b.Bytes()[at:], p.data)
			sge := [1]verbs.SGE{{MR: c.dataMR, Offset: b.Off() + at, Length: len(p.data)}}
			err := c.conn.PostSend(&verbs.SendWR{ID: rpcrdma.WRID(svcWrite, sc.idx), Opcode: verbs.OpRDMAWrite, SGL: sge[:],
				RemoteAddr: p.seg.Offset, RKey: p.seg.Handle})
			if err != nil {
				c.freeCall(sc)
				return err
			}
			at += len(p.data)
		}
	}
	send, err := c.small.Get(context.Background(), nil)
	if err != nil {
		c.freeCall(sc)
		return err
	}
	sc.send = send
	msg := h.Encode(send.Bytes()[:0])
	msg = append(msg, inline...)
	sge := [1]verbs.SGE{{MR: c.smallMR, Offset: send.Off(), Length: len(msg)}}
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
	send := c.small.TryGet()
	if send == nil {
		return // the client's call times out instead
	}
	msg := h.Encode(send.Bytes()[:0])
	sge := [1]verbs.SGE{{MR: c.smallMR, Offset: send.Off(), Length: len(msg)}}
	if err := c.conn.PostSend(&verbs.SendWR{ID: rpcrdma.WRID(svcErrSend, send.Index()), Opcode: verbs.OpSend, SGL: sge[:], Signaled: true}); err != nil {
		send.Release()
		c.s.logf("rpcrdma: send RDMA_ERROR: %v", err)
	}
}

// freeCall gives back a call's buffers and slot.
func (c *svcConn) freeCall(sc *svcCall) {
	for _, b := range []*rpcrdma.Block{sc.pull, sc.push, sc.send} {
		if b != nil {
			b.Release()
		}
	}
	sc.pull, sc.push, sc.send, sc.msg = nil, nil, nil, nil
	c.mu.Lock()
	c.free = append(c.free, sc)
	c.mu.Unlock()
}

// close ends the connection and frees its resources once the queue pair
// is gone.
func (c *svcConn) close() {
	c.conn.Close()
	c.freeMemory()
}

func (c *svcConn) freeMemory() {
	if c.dataMR != nil {
		c.dataMR.Deregister()
	}
	if c.smallMR != nil {
		c.smallMR.Deregister()
	}
	if c.data != nil {
		c.data.Close()
	}
	if c.small != nil {
		c.small.Close()
	}
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
