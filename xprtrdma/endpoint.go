package xprtrdma

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rdmafs/rdmafs/rpcrdma"
	"github.com/rdmafs/rdmafs/sunrpc"
	"github.com/rdmafs/rdmafs/verbs"
)

// endpoint is one connection to the server and its verbs resources: the
// device, a protection domain, the arenas' registrations, the queue pair,
// the requests and the table of calls in flight (like the kernel's
// rpcrdma_ep). A new connection gets a new endpoint; the arenas stay with
// the transport.
type endpoint struct {
	t      *Transport
	dev    verbs.Device
	pd     verbs.PD
	conn   verbs.Conn
	small  slabMRs // registrations of the Send and Receive buffers
	chunks slabMRs // registrations of the chunk buffers
	reg    registrar

	inlineSend, inlineRecv int // negotiated with the server (RFC 8797)
	credits                int // asked of the server: slot_table_entries, or what the device holds

	// postMu orders posting against teardown: RoundTrip holds it shared
	// while it posts, teardown exclusively before it destroys the queue
	// pair.
	postMu sync.RWMutex
	closed bool // under postMu

	// sends are the requests whose Sends may not be done yet.
	sends sendQueue

	// calls are the calls in flight, each with its request; the
	// table's failure is the connection's.
	calls *sunrpc.Pending[*request]

	mu       sync.Mutex
	granted  int           // credits the server granted, at least 1
	inflight int           // calls holding a credit
	wake     chan struct{} // while a call waits for a credit or request: closed by the next given back
	reqs     []request
	free     []*request
	// turn holds a token while no goroutine polls the completion
	// queue (reaper.go); wcs is the holder's.
	turn chan struct{}
	wcs  []verbs.Completion
	down chan struct{} // closed when teardown has released everything
	// fenced is closed once the queue pair is in the error state: no
	// RDMA Write of the server lands in this client's memory any more.
	fenced chan struct{}
	idle   *time.Timer

	hdr    rpcrdma.Header // the turn holder's header scratch
	invWR  verbs.SendWR   // the turn holder's local invalidation (see request.sendWR)
	worked atomic.Bool    // a reply came: the connection is good
}

// dial makes a connection to the server and its endpoint.
func (t *Transport) dial(ctx context.Context) (*endpoint, error) {
	cfg := &t.cfg
	t.stats.BindCount.Add(1)
	dev, err := cfg.Provider.Open(ctx, "", cfg.Addr)
	if err != nil {
		return nil, err
	}
	ep := &endpoint{t: t, dev: dev, calls: sunrpc.NewPending[*request](sunrpc.KeepAbandoned),
		turn: make(chan struct{}, 1), wcs: make([]verbs.Completion, completionBatch),
		down: make(chan struct{}), fenced: make(chan struct{}), granted: 1}
	ep.turn <- struct{}{}
	if err := ep.setup(ctx); err != nil {
		ep.release()
		return nil, err
	}
	ep.idle = time.AfterFunc(cfg.IdleTimeout, ep.closeIfIdle)
	go ep.watchEnd()
	return ep, nil
}

// setup allocates the protection domain, chooses the registration
// strategy and the credits the device can serve, connects, and registers
// the arenas (after the connect: an attempt the server refuses costs no
// registration).
func (ep *endpoint) setup(ctx context.Context) error {
	t := ep.t
	cfg := &t.cfg
	var err error
	if ep.pd, err = ep.dev.AllocPD(); err != nil {
		return err
	}
	caps := ep.dev.Caps()
	memreg := cfg.MemReg
	if memreg == MemRegMW && !caps.MemoryWindows {
		t.logOnce("memreg=mw: device %s has no memory windows; registering per call instead (memreg=register)", ep.dev.Name())
		memreg = MemRegRegister
	}
	switch memreg {
	case MemRegMW:
		ep.reg = &windows{ep: ep}
	case MemRegRegister:
		ep.reg = perCall{ep: ep}
	default:
		ep.reg = persistent{ep: ep}
	}
	ep.credits = fitCredits(cfg.Credits, memreg, caps)
	if ep.credits < cfg.Credits {
		send, recv := queueDepths(cfg.Credits, memreg)
		t.logOnce("slot_table_entries=%d: device %s holds %d work requests per queue and %d completions, "+
			"%d credits with memreg=%v need %d and %d; asking for %d credits",
			cfg.Credits, ep.dev.Name(), caps.MaxQPWR, caps.MaxCQE, cfg.Credits, memreg, max(send, recv), send+recv, ep.credits)
	}
	ep.sends.batch = sendBatch(ep.credits)
	ep.reqs = make([]request, ep.credits)
	for i := range ep.reqs {
		ep.reqs[i].slot = i
		ep.free = append(ep.free, &ep.reqs[i])
	}

	send, recv := queueDepths(ep.credits, memreg)
	own := rpcrdma.PrivateData{SendSize: cfg.MaxInlineWrite, RecvSize: cfg.MaxInlineRead}
	if remoteInvalidateOK(memreg) {
		own.Flags |= rpcrdma.PrivRemoteInvalidate
	}
	start := time.Now()
	ep.conn, err = ep.pd.Dial(ctx, cfg.Addr, verbs.ConnConfig{
		SendDepth: send, RecvDepth: recv,
		MaxSendSGE: 3, MaxRecvSGE: 1,
		// The server pulls read chunks with RDMA Read: let it have as
		// many outstanding as the device allows (Linux asks for up to
		// 255; svcrdma refuses 0). The client issues none.
		ResponderResources: uint8(min(max(caps.MaxQPRdAtom, 1), 255)),
		InitiatorDepth:     0,
		PrivateData:        own.Encode(),
		Timeout:            cfg.ConnectTimeout,
	})
	t.stats.ConnectTime.Add(int64(time.Since(start)))
	if err != nil {
		return err
	}
	if err := ep.register(); err != nil {
		ep.conn.Close()
		ep.conn = nil
		return err
	}
	t.stats.ConnectCount.Add(1)
	peer, _ := rpcrdma.DecodePrivateData(ep.conn.PeerPrivateData())
	ep.inlineSend = min(cfg.MaxInlineWrite, peer.RecvSize, t.small.BlockSize())
	ep.inlineRecv = min(cfg.MaxInlineRead, peer.SendSize, t.small.BlockSize())
	return nil
}

// register registers the active slabs of the transport's arenas in the
// endpoint's PD. The endpoint joins the transport's list first, so a slab
// activated meanwhile is registered here too.
func (ep *endpoint) register() error {
	t := ep.t
	ep.small.init(ep, t.small, verbs.AccessLocalWrite, "Send and Receive buffers")
	ep.chunks.init(ep, t.chunks, ep.reg.arenaAccess(), "chunk buffers")
	t.addEndpoint(ep)
	for _, m := range []*slabMRs{&ep.small, &ep.chunks} {
		err := m.a.EachActive(func(i int) error {
			_, err := m.register(i)
			return err
		})
		if err != nil {
			return err
		}
	}
	return nil
}

func (ep *endpoint) alive() bool {
	select {
	case <-ep.calls.Lost():
		return false
	default:
		return true
	}
}

func (ep *endpoint) cause() error { return ep.calls.Err() }
