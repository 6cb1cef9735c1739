package svcrdma

import (
	"context"
	"net/netip"
	"sync"

	"github.com/rdmafs/rdmafs/rpcrdma"
	"github.com/rdmafs/rdmafs/sunrpc"
	"github.com/rdmafs/rdmafs/verbs"
)

// One client connection: its buffers, its table of calls, and the
// completion loop that drives it (the kernel's svc_rdma_transport.c holds
// the like).

// svcConn is one client connection of the server.
type svcConn struct {
	s    *Server
	conn verbs.Conn
	// The buffers (buffers.go): Sends and Receives, calls' read chunks
	// pulled, and reply data pushed. Pulls and pushes have arenas of
	// their own so that calls waiting for a worker with their data
	// pulled cannot hold every buffer the workers' replies need.
	small, pull, push             *rpcrdma.Arena
	smallRegs, pullRegs, pushRegs *slabRegs
	lost                          chan struct{} // closed when the connection ends: stop waiting for buffers
	session                       *sunrpc.Session

	remote netip.AddrPort // the client
	host   netip.Addr     // its address, whose share of the memory budget the buffers take

	recvInline, sendInline int  // what the client sends and takes inline
	remoteInv              bool // the client takes Send With Invalidate

	mu        sync.Mutex
	table     []svcCall
	free      []*svcCall
	calls     map[uint32]*svcCall // served, waiting for the reply
	requested int                 // credits the client asks for

	dispatch chan *svcCall
	pulls    chan *svcCall // calls whose read chunk waits for a buffer
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
	pull    *rpcrdma.Block // the call, assembled (with read chunk data pulled in); or its Receive buffer
	pullLen int            // the message's length once the pull completes
	push    *rpcrdma.Block // reply data pushed to the client
	send    *rpcrdma.Block

	// A call with a read chunk, until a pull buffer is free for it.
	recv   *rpcrdma.Block // its Receive buffer, holding inline
	inline []byte         // the call's inline part
	reads  [rpcrdma.MaxSegments]rpcrdma.ReadSegment
	nReads int
	pos    uint32 // where the chunk goes in the message
	total  int    // the chunk's length
}

// Work request kinds of the server.
const (
	svcRecv rpcrdma.WRKind = iota + 1
	svcRead
	svcSend
	svcErrSend // an RDMA_ERROR's Send: the id names its buffer
	svcWrite   // an RDMA Write of reply data (unsignaled)
)

// run serves the connection until it ends.
func (c *svcConn) run() {
	defer c.close()
	c.session = c.s.cfg.Service.NewSession(c.sendReply, sunrpc.Peer{Remote: c.remote, Secure: true, Admitted: true})
	defer c.session.Close()
	c.dispatch = make(chan *svcCall, len(c.table))
	dispatchDone := make(chan struct{})
	go c.dispatcher(dispatchDone)
	defer func() {
		close(c.dispatch)
		<-dispatchDone
	}()
	c.pulls = make(chan *svcCall, len(c.table))
	pullerDone := make(chan struct{})
	go c.puller(pullerDone)
	defer func() {
		// First: workers and the puller waiting for a buffer give up.
		close(c.lost)
		close(c.pulls)
		<-pullerDone
	}()
	// The service may end the session (to make room for another
	// connection): the connection ends with it.
	go func() {
		select {
		case <-c.session.Done():
			c.conn.Disconnect()
		case <-c.lost:
		}
	}()
	for i := 0; i < c.s.cfg.Credits; i++ {
		if err := c.postRecv(); err != nil {
			c.s.logf("svcrdma: post receive: %v", err)
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

// dispatcher hands calls to the session in order; CallInPlace may wait
// for a free worker, which must not hold up completions.
func (c *svcConn) dispatcher(done chan<- struct{}) {
	defer close(done)
	for sc := range c.dispatch {
		// The call may be answered, and its slot freed, before CallInPlace
		// returns: take its message buffer first. The session gives
		// it back once done with it: no copy of a large WRITE.
		msg, pull := sc.msg, sc.pull
		sc.msg, sc.pull = nil, nil
		if err := c.session.CallInPlace(msg, pull.Release); err != nil {
			c.conn.Disconnect()
		}
	}
}

func (c *svcConn) postRecv() error {
	b, err := block(c.small, c.lost)
	if err != nil {
		return err
	}
	sge := [1]verbs.SGE{c.smallRegs.sge(b, 0, c.small.BlockSize())}
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
		kept, err := c.receive(b, b.Bytes()[:wc.ByteLen])
		if !kept {
			b.Release()
		}
		if err == nil {
			err = c.postRecv()
		}
		if err != nil {
			c.s.logf("svcrdma: connection from %s: %v", c.conn.RemoteAddr(), err)
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

// freeCall gives back a call's buffers and slot.
func (c *svcConn) freeCall(sc *svcCall) {
	for _, b := range []*rpcrdma.Block{sc.pull, sc.push, sc.send, sc.recv} {
		if b != nil {
			b.Release()
		}
	}
	sc.pull, sc.push, sc.send, sc.msg, sc.recv, sc.inline = nil, nil, nil, nil, nil, nil
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
	for _, r := range []*slabRegs{c.smallRegs, c.pullRegs, c.pushRegs} {
		if r != nil {
			r.close()
		}
	}
	for _, a := range []*rpcrdma.Arena{c.small, c.pull, c.push} {
		if a != nil {
			a.Close()
		}
	}
}
