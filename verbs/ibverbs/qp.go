//go:build cgo && linux

package ibverbs

// #include <stdlib.h>
// #include "helpers.h"
import "C"

import (
	"fmt"
	"sync"
	"sync/atomic"
	"syscall"
	"unsafe"

	"github.com/rdmafs/rdmafs/verbs"
)

// Work request ids as the device sees them: the send queue's are its
// sequence numbers, the receive queue's have recvBit set, and the send
// queue's drain marker (posted when the connection ends) is markerBit.
const (
	recvBit   = 1 << 63
	markerBit = 1 << 62
	seqMask   = markerBit - 1
)

// inlineSizes are the inline data sizes tried, largest first, when the
// queue pair is created: devices refuse what they cannot do.
var inlineSizes = []uint32{256, 64, 0}

// sendSlot is what the provider remembers of a posted send work request.
type sendSlot struct {
	id     uint64
	op     verbs.Opcode
	mw     *mw // OpBindMW
	newKey uint32
	oldKey uint32
}

// conn is a connection: an RDMA CM id with its queue pair, completion
// queue and completion channel.
type conn struct {
	dev         *device
	pd          *pd
	id          *C.struct_rdma_cm_id
	ech         *eventChannel
	comp        *C.struct_ibv_comp_channel
	compFD      *pollFD
	cq          *C.struct_ibv_cq
	qp          *C.struct_ibv_qp
	qpNum       uint32
	cfg         verbs.ConnConfig
	maxInline   int
	peerPrivate []byte
	local       string
	remote      string

	sendMu   sync.Mutex
	swr      *C.struct_rdmafs_send // C memory: the chain being posted (RDMAFS_MAX_CHAIN)
	sq       []sendSlot            // by sequence number modulo SendDepth
	sqPosted uint64                // next sequence number
	sqDone   uint64                // sequence numbers below are complete
	qpGone   bool                  // (sendMu and recvMu) destroyed

	recvMu   sync.Mutex
	rwr      *C.struct_rdmafs_recv
	rq       []uint64 // user ids by sequence number modulo RecvDepth
	rqPosted uint64
	rqDone   uint64

	cqMu      sync.Mutex
	wcs       *C.struct_rdmafs_wc // C memory: 32 completions
	pending   []verbs.Completion  // polled, not yet returned
	sqDrained bool                // the send queue's drain marker completed
	cqGone    bool
	armed     atomic.Bool // the CQ is armed for an event

	stateMu      sync.Mutex
	err          error
	done         chan struct{}
	closed       bool
	peerGone     chan struct{} // the DISCONNECTED event came
	peerGoneOnce sync.Once

	failMu sync.Mutex // held while fail uses the id
	idGone bool       // Close is destroying the id

	wg sync.WaitGroup

	// postMarker, if set, replaces postDrainMarker: a test's hook, to
	// make the device refuse the marker at a chosen moment.
	postMarker func(c *conn) bool
}

// newConn makes the completion channel, CQ and QP of a connection on id.
func newConn(p *pd, id *C.struct_rdma_cm_id, ech *eventChannel, cfg verbs.ConnConfig) (c *conn, err error) {
	c = &conn{
		dev: p.dev, pd: p, id: id, ech: ech, cfg: cfg,
		sq:       make([]sendSlot, max(cfg.SendDepth, 1)),
		rq:       make([]uint64, max(cfg.RecvDepth, 1)),
		done:     make(chan struct{}),
		peerGone: make(chan struct{}),
	}
	defer func() {
		if err != nil {
			c.release()
		}
	}()
	var errno error
	if c.comp, errno = C.ibv_create_comp_channel(p.dev.ctx); c.comp == nil {
		return nil, &verbs.VerbError{Verb: "ibv_create_comp_channel", Err: errno}
	}
	if c.compFD, err = newPollFD(int(c.comp.fd), "completion channel"); err != nil {
		return nil, &verbs.VerbError{Verb: "ibv_create_comp_channel", Err: err}
	}
	// Room for the drain markers.
	if c.cq, errno = C.ibv_create_cq(p.dev.ctx, C.int(cfg.CQDepth+2), nil, c.comp, 0); c.cq == nil {
		return nil, &verbs.VerbError{Verb: "ibv_create_cq", Err: errno}
	}
	var r C.int
	for _, inl := range inlineSizes {
		var got C.uint32_t
		r = C.rdmafs_create_qp(id, p.pd, c.cq, C.uint32_t(cfg.SendDepth+1), C.uint32_t(cfg.RecvDepth+1),
			C.uint32_t(cfg.MaxSendSGE), C.uint32_t(cfg.MaxRecvSGE), C.uint32_t(inl), &got)
		if r == 0 {
			c.maxInline = int(got)
			break
		}
		if r != -C.EINVAL {
			break
		}
	}
	if r != 0 {
		return nil, &verbs.VerbError{Verb: "rdma_create_qp", Err: syscall.Errno(-r)}
	}
	c.qp = id.qp
	c.qpNum = uint32(c.qp.qp_num)
	c.swr = (*C.struct_rdmafs_send)(C.calloc(C.RDMAFS_MAX_CHAIN, C.sizeof_struct_rdmafs_send))
	c.rwr = (*C.struct_rdmafs_recv)(C.calloc(1, C.sizeof_struct_rdmafs_recv))
	c.wcs = (*C.struct_rdmafs_wc)(C.calloc(32, C.sizeof_struct_rdmafs_wc))
	p.dev.watch.add(c)
	return c, nil
}

// release destroys what newConn made (not the id and its channel).
func (c *conn) release() {
	if c.qp != nil {
		c.dev.watch.remove(c)
		C.rdma_destroy_qp(c.id)
		c.qp = nil
	}
	if c.cq != nil {
		C.ibv_destroy_cq(c.cq)
		c.cq = nil
	}
	if c.compFD != nil {
		c.compFD.close()
	}
	if c.comp != nil {
		C.ibv_destroy_comp_channel(c.comp)
		c.comp = nil
	}
	for _, p := range []unsafe.Pointer{unsafe.Pointer(c.swr), unsafe.Pointer(c.rwr), unsafe.Pointer(c.wcs)} {
		C.free(p)
	}
	c.swr, c.rwr, c.wcs = nil, nil, nil
}

// start starts an established connection's goroutines.
func (c *conn) start() {
	c.local = sockaddrString(C.rdma_get_local_addr(c.id))
	c.remote = sockaddrString(C.rdma_get_peer_addr(c.id))
	c.wg.Add(1)
	go c.cmLoop()
}

func (c *conn) PeerPrivateData() []byte { return c.peerPrivate }
func (c *conn) LocalAddr() string       { return c.local }
func (c *conn) RemoteAddr() string      { return c.remote }

// --- posting

var wrOpcodes = [...]C.uint32_t{
	verbs.OpSend:        C.IBV_WR_SEND,
	verbs.OpSendWithInv: C.IBV_WR_SEND_WITH_INV,
	verbs.OpRDMAWrite:   C.IBV_WR_RDMA_WRITE,
	verbs.OpRDMARead:    C.IBV_WR_RDMA_READ,
	verbs.OpBindMW:      C.IBV_WR_BIND_MW,
	verbs.OpLocalInv:    C.IBV_WR_LOCAL_INV,
}

// setSGL checks a work request's SGEs and writes them into dst: regions of
// this PD, within bounds, with local write where they are written.
func (c *conn) setSGL(dst *[C.RDMAFS_MAX_SGE]C.struct_ibv_sge, sgl []verbs.SGE, maxSGE int, write bool) (int, error) {
	if len(sgl) > maxSGE {
		return 0, fmt.Errorf("%d SGEs, the queue takes %d: %w", len(sgl), maxSGE, syscall.EINVAL)
	}
	total := 0
	for i, g := range sgl {
		r, ok := g.MR.(*mr)
		switch {
		case !ok:
			return 0, fmt.Errorf("SGE %d: not a region of the ibverbs provider: %w", i, syscall.EINVAL)
		case r.pd != c.pd:
			return 0, fmt.Errorf("SGE %d: region of another protection domain: %w", i, syscall.EINVAL)
		case g.Offset < 0 || g.Length < 0 || g.Offset > len(r.mem) || g.Length > len(r.mem)-g.Offset:
			return 0, fmt.Errorf("SGE %d: %d bytes at %d outside the region's %d: %w", i, g.Length, g.Offset, len(r.mem), syscall.EINVAL)
		case write && r.access&verbs.AccessLocalWrite == 0:
			return 0, fmt.Errorf("SGE %d: region registered without local write access: %w", i, syscall.EACCES)
		}
		total += g.Length
		if total > 1<<31 {
			return 0, fmt.Errorf("message longer than 2 GiB: %w", syscall.EINVAL)
		}
		dst[i] = C.struct_ibv_sge{addr: C.uint64_t(r.addr + uint64(g.Offset)), length: C.uint32_t(g.Length), lkey: C.uint32_t(r.lkey)}
	}
	return total, nil
}

// The C helpers take chains as long as verbs does.
const _ = uint(C.RDMAFS_MAX_CHAIN-verbs.MaxChain) + uint(verbs.MaxChain-C.RDMAFS_MAX_CHAIN)

func (c *conn) PostSend(wr *verbs.SendWR) error {
	if err := c.postSend(wr); err != nil {
		return &verbs.VerbError{Verb: "ibv_post_send", Err: err}
	}
	return nil
}

// postSend posts the chain from head with one ibv_post_send. Its work
// requests get consecutive sequence numbers; the windows it binds are
// locked until the device has taken it, so that a failed bind's
// completion, which gives a window its key back, comes after the post has
// set the key.
func (c *conn) postSend(head *verbs.SendWR) error {
	n := 0
	for wr := head; wr != nil && n <= verbs.MaxChain; wr = wr.Next {
		n++
	}
	if n > verbs.MaxChain {
		return fmt.Errorf("chain of more than %d work requests: %w", verbs.MaxChain, syscall.EINVAL)
	}
	c.sendMu.Lock()
	defer c.sendMu.Unlock()
	if c.qpGone || c.ended() {
		return c.Err()
	}
	if c.sqPosted-c.sqDone+uint64(n) > uint64(c.cfg.SendDepth) {
		return fmt.Errorf("send queue full (%d work requests): %w", c.cfg.SendDepth, syscall.ENOMEM)
	}
	var windows windowLocks
	windows.lock(head)
	defer windows.unlock()
	s := unsafe.Slice(c.swr, verbs.MaxChain)
	var slots [verbs.MaxChain]sendSlot
	seq := c.sqPosted
	filled := 0
	var err error
	for wr := head; wr != nil; wr = wr.Next {
		if err = c.fill(&s[filled], wr, seq+uint64(filled), &slots[filled]); err != nil {
			break
		}
		filled++
	}
	posted := 0
	if filled > 0 {
		took, errno := C.rdmafs_post_send(c.qp, c.swr, C.int(filled))
		if posted = int(took); posted < filled {
			if err = errno; err == nil {
				err = syscall.EIO
			}
		}
	}
	for i := range posted {
		c.sq[(seq+uint64(i))%uint64(len(c.sq))] = slots[i]
	}
	c.sqPosted += uint64(posted)
	// The binds not posted give their windows their keys back, the
	// latest first (a chain may bind a window twice).
	for i := filled - 1; i >= posted; i-- {
		if slots[i].mw != nil {
			slots[i].mw.posted.Store(slots[i].oldKey)
		}
	}
	if err != nil {
		return &verbs.PostError{Posted: posted, Err: err}
	}
	return nil
}

// fill checks wr and writes it into s, with sequence number seq, and what
// the provider remembers of it into slot.
func (c *conn) fill(s *C.struct_rdmafs_send, wr *verbs.SendWR, seq uint64, slot *sendSlot) error {
	if int(wr.Opcode) >= len(wrOpcodes) {
		return fmt.Errorf("opcode %v: %w", wr.Opcode, syscall.EINVAL)
	}
	*s = C.struct_rdmafs_send{}
	*slot = sendSlot{id: wr.ID, op: wr.Opcode}
	s.wr_id = C.uint64_t(seq)
	s.opcode = wrOpcodes[wr.Opcode]
	if wr.Signaled {
		s.flags |= C.IBV_SEND_SIGNALED
	}
	var (
		total int
		err   error
	)
	switch wr.Opcode {
	case verbs.OpSend, verbs.OpSendWithInv, verbs.OpRDMAWrite:
		total, err = c.setSGL(&s.sge, wr.SGL, c.cfg.MaxSendSGE, false)
		if total > 0 && total <= c.maxInline {
			s.flags |= C.IBV_SEND_INLINE
		}
	case verbs.OpRDMARead:
		total, err = c.setSGL(&s.sge, wr.SGL, c.cfg.MaxSendSGE, true)
	case verbs.OpLocalInv:
		if len(wr.SGL) > 0 {
			err = fmt.Errorf("local invalidate with SGEs: %w", syscall.EINVAL)
		}
	case verbs.OpBindMW:
		err = c.setBind(s, wr, slot)
	}
	if err != nil {
		return err
	}
	s.num_sge = C.int(len(wr.SGL))
	s.remote_addr = C.uint64_t(wr.RemoteAddr)
	s.rkey = C.uint32_t(wr.RKey)
	s.inv_rkey = C.uint32_t(wr.InvalidateRKey)
	return nil
}

// setBind fills in a bind and sets the window's new key. The caller holds
// the window's lock (windowLocks).
func (c *conn) setBind(s *C.struct_rdmafs_send, wr *verbs.SendWR, slot *sendSlot) error {
	w, ok := wr.MW.(*mw)
	r, ok2 := wr.BindMR.(*mr)
	switch {
	case !ok || !ok2 || w == nil || r == nil:
		return fmt.Errorf("bind: window or region not of the ibverbs provider: %w", syscall.EINVAL)
	case w.pd != c.pd || r.pd != c.pd:
		return fmt.Errorf("bind: window or region of another protection domain: %w", syscall.EINVAL)
	case len(wr.SGL) > 0:
		return fmt.Errorf("bind with SGEs: %w", syscall.EINVAL)
	case wr.Offset < 0 || wr.Length < 0 || wr.Offset > len(r.mem) || wr.Length > len(r.mem)-wr.Offset:
		return fmt.Errorf("bind: %d bytes at %d outside the region's %d: %w", wr.Length, wr.Offset, len(r.mem), syscall.EINVAL)
	case w.closed:
		return fmt.Errorf("bind: window deallocated: %w", syscall.EINVAL)
	}
	access, err := accessFlags(wr.BindAccess)
	if err != nil {
		return err
	}
	cur := w.posted.Load()
	key := wr.NewRKey
	if key == 0 {
		key = cur&^0xff | (cur+1)&0xff
	} else if key>>8 != cur>>8 {
		return fmt.Errorf("bind: new rkey %#x does not keep the window's index (rkey %#x): %w", key, cur, syscall.EINVAL)
	}
	*slot = sendSlot{id: wr.ID, op: wr.Opcode, mw: w, newKey: key, oldKey: cur}
	w.posted.Store(key)
	s.mw = w.mw
	s.bind_mr = r.mr
	s.bind_addr = C.uint64_t(r.addr + uint64(wr.Offset))
	s.bind_length = C.uint64_t(wr.Length)
	s.bind_access = C.uint32_t(access)
	s.new_rkey = C.uint32_t(key)
	return nil
}

// windowLocks holds the locks of the windows a chain binds, each once,
// taken in the order of their addresses (Go's heap does not move), so
// that chains posted at once on connections of one PD cannot deadlock.
type windowLocks struct {
	ws [verbs.MaxChain]*mw
	n  int
}

func (l *windowLocks) lock(head *verbs.SendWR) {
	for wr := head; wr != nil; wr = wr.Next {
		w, ok := wr.MW.(*mw)
		if wr.Opcode != verbs.OpBindMW || !ok || w == nil {
			continue
		}
		i := 0
		for i < l.n && uintptr(unsafe.Pointer(l.ws[i])) < uintptr(unsafe.Pointer(w)) {
			i++
		}
		if i < l.n && l.ws[i] == w {
			continue
		}
		copy(l.ws[i+1:l.n+1], l.ws[i:l.n])
		l.ws[i] = w
		l.n++
	}
	for _, w := range l.ws[:l.n] {
		w.mu.Lock()
	}
}

func (l *windowLocks) unlock() {
	for _, w := range l.ws[:l.n] {
		w.mu.Unlock()
	}
}

func (c *conn) PostRecv(wr *verbs.RecvWR) error {
	if err := c.postRecv(wr); err != nil {
		return &verbs.VerbError{Verb: "ibv_post_recv", Err: err}
	}
	return nil
}

func (c *conn) postRecv(wr *verbs.RecvWR) error {
	c.recvMu.Lock()
	defer c.recvMu.Unlock()
	if c.qpGone || c.ended() {
		return c.Err()
	}
	if c.rqPosted-c.rqDone >= uint64(c.cfg.RecvDepth) {
		return fmt.Errorf("receive queue full (%d work requests): %w", c.cfg.RecvDepth, syscall.ENOMEM)
	}
	r := c.rwr
	if _, err := c.setSGL(&r.sge, wr.SGL, c.cfg.MaxRecvSGE, true); err != nil {
		return err
	}
	seq := c.rqPosted
	r.wr_id = C.uint64_t(recvBit | seq)
	r.num_sge = C.int(len(wr.SGL))
	if ret := C.rdmafs_post_recv(c.qp, r); ret != 0 {
		return syscall.Errno(ret)
	}
	c.rq[seq%uint64(len(c.rq))] = wr.ID
	c.rqPosted++
	return nil
}
