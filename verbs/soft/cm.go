package soft

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"syscall"
	"time"

	"github.com/rdmafs/rdmafs/verbs"
)

// The connection manager: a connect request, an accept or a reject, and a
// ready from the dialer (REQ, REP/REJ, RTU in InfiniBand CM terms), as the
// first frames of the TCP connection.

const (
	handshakeTimeout = 10 * time.Second // for a dialer to send its request
	listenBacklog    = 128              // requests waiting for Accept
	maxHandshakes    = 256              // TCP connections not yet requests

	// Reject reasons, as the InfiniBand CM numbers them.
	rejectNoListener = 8  // invalid service ID
	rejectConsumer   = 28 // consumer reject
)

// checkConfig validates cfg and fills in its defaults.
func checkConfig(cfg verbs.ConnConfig) (verbs.ConnConfig, error) {
	cfg, err := cfg.Check(softCaps, func(what string, v, limit int) error {
		return &verbs.VerbError{Verb: "create_qp", Err: fmt.Errorf("%s %d (at most %d): %w", what, v, limit, syscall.EINVAL)}
	})
	if err != nil {
		return cfg, err
	}
	// A completion queue of depth 0 (no queues at all) would overrun at
	// its first completion, an error completion included.
	cfg.CQDepth = max(cfg.CQDepth, 1)
	return cfg, nil
}

func (pd *pd) Dial(ctx context.Context, addr string, cfg verbs.ConnConfig) (verbs.Conn, error) {
	cfg, err := checkConfig(cfg)
	if err != nil {
		return nil, err
	}
	if len(cfg.PrivateData) > maxReqPrivate {
		return nil, &verbs.VerbError{Verb: "rdma_connect", Err: fmt.Errorf("%d bytes of private data (at most %d): %w", len(cfg.PrivateData), maxReqPrivate, syscall.EINVAL)}
	}
	if err := pd.use(&pd.conns, 1); err != nil {
		return nil, err
	}
	c, err := pd.dial(ctx, addr, cfg)
	if err != nil {
		pd.use(&pd.conns, -1)
		return nil, fmt.Errorf("verbs/soft: connect to %s: %w", addr, err)
	}
	return c, nil
}

func (pd *pd) dial(ctx context.Context, addr string, cfg verbs.ConnConfig) (*conn, error) {
	ctx, cancel := context.WithTimeout(ctx, cfg.Timeout)
	defer cancel()
	var d net.Dialer
	nc, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		if errors.Is(err, syscall.ECONNREFUSED) {
			return nil, &verbs.RejectError{Reason: rejectNoListener}
		}
		return nil, err
	}
	// Give up the handshake's I/O when ctx ends.
	stop := context.AfterFunc(ctx, func() { nc.SetDeadline(time.Unix(1, 0)) })
	fail := func(err error) (*conn, error) {
		stop()
		nc.Close()
		if ctx.Err() != nil {
			return nil, fmt.Errorf("%w (%v)", ctx.Err(), err)
		}
		return nil, err
	}
	fr, fw := newFrameReader(nc), newFrameWriter(nc)
	req := frame{typ: frameConnReq, version: wireVersion, private: cfg.PrivateData,
		responderResources: cfg.ResponderResources, initiatorDepth: cfg.InitiatorDepth}
	if err := fw.frame(&req); err != nil {
		return fail(err)
	}
	if err := fw.flush(); err != nil {
		return fail(err)
	}
	var f frame
	if err := fr.next(&f); err != nil {
		if errors.Is(err, io.EOF) || errors.Is(err, syscall.ECONNRESET) || errors.Is(err, errFrameField) {
			// Something listens on the TCP port, but not a soft
			// provider's listener: an NFS or other TCP service
			// closes (or answers nonsense to) the connect request.
			return fail(fmt.Errorf("%w: the TCP service at %s answered the connect request with %v: it is not a soft RDMA listener", ErrNotSoftPeer, addr, err))
		}
		return fail(fmt.Errorf("waiting for the accept: %w", err))
	}
	switch f.typ {
	case frameAccept:
	case frameReject:
		return fail(&verbs.RejectError{PrivateData: f.private, Reason: int(f.reason)})
	default:
		return fail(fmt.Errorf("protocol error: %v frame in answer to a connect request", f.typ))
	}
	if err := fw.frame(&frame{typ: frameReady}); err != nil {
		return fail(err)
	}
	if err := fw.flush(); err != nil {
		return fail(err)
	}
	if !stop() {
		return fail(ctx.Err())
	}
	nc.SetDeadline(time.Time{})
	// The acceptor's responder resources are this end's initiator depth
	// and the other way round (it has taken the minimum of both sides).
	return newConn(pd, nc, fr, fw, cfg, f.private, int(f.responderResources), int(f.initiatorDepth)), nil
}

// ErrNotSoftPeer is wrapped by the error of a Dial to a TCP port where
// something other than a soft provider's listener answers.
var ErrNotSoftPeer = errors.New("verbs/soft: not a soft RDMA peer")

// Probe implements verbs.Prober: a soft listener is a TCP listener, so
// a TCP connect that is taken tells that one may be there.
func (p *Provider) Probe(ctx context.Context, addr string) error {
	var d net.Dialer
	nc, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return err
	}
	return nc.Close()
}

var _ verbs.Prober = (*Provider)(nil)

func (pd *pd) Listen(addr string) (verbs.Listener, error) {
	if err := pd.use(&pd.listeners, 1); err != nil {
		return nil, err
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		pd.use(&pd.listeners, -1)
		return nil, fmt.Errorf("verbs/soft: listen: %w", err)
	}
	l := &listener{
		pd:   pd,
		ln:   ln,
		reqs: make(chan *connRequest, listenBacklog),
		quit: make(chan struct{}),
		sem:  make(chan struct{}, maxHandshakes),

		shaking: make(map[net.Conn]struct{}),
	}
	l.wg.Add(1)
	go l.acceptLoop()
	return l, nil
}

type listener struct {
	pd   *pd
	ln   net.Listener
	reqs chan *connRequest
	quit chan struct{}
	sem  chan struct{} // handshakes in progress
	wg   sync.WaitGroup
	once sync.Once

	mu      sync.Mutex
	closing bool
	shaking map[net.Conn]struct{} // TCP connections whose request is awaited
}

func (l *listener) Addr() string { return l.ln.Addr().String() }

func (l *listener) Accept(ctx context.Context) (verbs.ConnRequest, error) {
	select {
	case r := <-l.reqs:
		return r, nil
	case <-l.quit:
		return nil, fmt.Errorf("verbs/soft: accept: %w", net.ErrClosed)
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// Close stops listening and rejects the requests Accept has not returned.
func (l *listener) Close() error {
	l.once.Do(func() {
		close(l.quit)
		l.ln.Close()
		l.mu.Lock()
		l.closing = true
		for nc := range l.shaking {
			nc.SetDeadline(time.Unix(1, 0))
		}
		l.mu.Unlock()
		l.wg.Wait()
		for {
			select {
			case r := <-l.reqs:
				r.Reject(nil)
				continue
			default:
			}
			break
		}
		l.pd.use(&l.pd.listeners, -1)
	})
	return nil
}

func (l *listener) acceptLoop() {
	defer l.wg.Done()
	for {
		nc, err := l.ln.Accept()
		if err != nil {
			select {
			case <-l.quit:
				return
			default:
			}
			if errors.Is(err, net.ErrClosed) {
				return
			}
			// Out of file descriptors and the like: wait a little,
			// as net/http does.
			select {
			case <-time.After(50 * time.Millisecond):
			case <-l.quit:
				return
			}
			continue
		}
		select {
		case l.sem <- struct{}{}:
		default:
			nc.Close() // too many half-open handshakes
			continue
		}
		l.wg.Add(1)
		go l.handshake(nc)
	}
}

// handshake reads a connect request and queues it for Accept.
func (l *listener) handshake(nc net.Conn) {
	defer l.wg.Done()
	defer func() { <-l.sem }()
	if !l.track(nc, true) {
		nc.Close()
		return
	}
	nc.SetDeadline(time.Now().Add(handshakeTimeout))
	fr, fw := newFrameReader(nc), newFrameWriter(nc)
	var f frame
	err := fr.next(&f)
	if !l.track(nc, false) || err != nil || f.typ != frameConnReq || f.version != wireVersion {
		nc.Close()
		return
	}
	r := &connRequest{pd: l.pd, nc: nc, fr: fr, fw: fw, private: f.private,
		rr: f.responderResources, id: f.initiatorDepth}
	if l.pd.dev.p.faults.takeRefuse() {
		r.Reject(nil)
		return
	}
	nc.SetDeadline(time.Time{})
	select {
	case l.reqs <- r:
	default:
		r.Reject(nil) // backlog full
	}
}

// track adds nc to (or removes it from) the handshakes that Close must
// cut short; false if the listener is closing.
func (l *listener) track(nc net.Conn, add bool) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if add {
		if l.closing {
			return false
		}
		l.shaking[nc] = struct{}{}
		return true
	}
	delete(l.shaking, nc)
	return !l.closing
}

type connRequest struct {
	pd      *pd
	nc      net.Conn
	fr      *frameReader
	fw      *frameWriter
	private []byte
	rr, id  uint8

	mu       sync.Mutex
	answered bool
}

func (r *connRequest) PrivateData() []byte       { return r.private }
func (r *connRequest) ResponderResources() uint8 { return r.rr }
func (r *connRequest) InitiatorDepth() uint8     { return r.id }
func (r *connRequest) RemoteAddr() string        { return r.nc.RemoteAddr().String() }

func (r *connRequest) answer() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.answered {
		return &verbs.VerbError{Verb: "rdma_accept", Err: fmt.Errorf("connection request already accepted or rejected: %w", syscall.EINVAL)}
	}
	r.answered = true
	return nil
}

func (r *connRequest) Accept(cfg verbs.ConnConfig) (verbs.Conn, error) {
	cfg, err := checkConfig(cfg)
	if err != nil {
		return nil, err
	}
	if len(cfg.PrivateData) > maxAcceptPrivate {
		return nil, &verbs.VerbError{Verb: "rdma_accept", Err: fmt.Errorf("%d bytes of private data (at most %d): %w", len(cfg.PrivateData), maxAcceptPrivate, syscall.EINVAL)}
	}
	if err := r.answer(); err != nil {
		return nil, err
	}
	if err := r.pd.use(&r.pd.conns, 1); err != nil {
		r.nc.Close()
		return nil, err
	}
	c, err := r.accept(cfg)
	if err != nil {
		r.nc.Close()
		r.pd.use(&r.pd.conns, -1)
		return nil, fmt.Errorf("verbs/soft: accept from %s: %w", r.RemoteAddr(), err)
	}
	return c, nil
}

func (r *connRequest) accept(cfg verbs.ConnConfig) (*conn, error) {
	// Each side serves as many RDMA Reads as the other may issue, and no
	// more than it offers itself.
	ird := min(cfg.ResponderResources, r.id)
	ord := min(cfg.InitiatorDepth, r.rr)
	r.nc.SetDeadline(time.Now().Add(cfg.Timeout))
	acc := frame{typ: frameAccept, responderResources: ird, initiatorDepth: ord, private: cfg.PrivateData}
	if err := r.fw.frame(&acc); err != nil {
		return nil, err
	}
	if err := r.fw.flush(); err != nil {
		return nil, err
	}
	var f frame
	if err := r.fr.next(&f); err != nil {
		return nil, fmt.Errorf("waiting for the dialer's ready: %w", err)
	}
	if f.typ != frameReady {
		return nil, fmt.Errorf("protocol error: %v frame in answer to an accept", f.typ)
	}
	r.nc.SetDeadline(time.Time{})
	return newConn(r.pd, r.nc, r.fr, r.fw, cfg, r.private, int(ord), int(ird)), nil
}

func (r *connRequest) Reject(privateData []byte) error {
	if len(privateData) > maxRejectPrivate {
		return &verbs.VerbError{Verb: "rdma_reject", Err: fmt.Errorf("%d bytes of private data (at most %d): %w", len(privateData), maxRejectPrivate, syscall.EINVAL)}
	}
	if err := r.answer(); err != nil {
		return err
	}
	defer r.nc.Close()
	r.nc.SetDeadline(time.Now().Add(lingerTimeout))
	rej := frame{typ: frameReject, reason: rejectConsumer, private: privateData}
	if err := r.fw.frame(&rej); err != nil {
		return fmt.Errorf("verbs/soft: reject: %w", err)
	}
	if err := r.fw.flush(); err != nil {
		return fmt.Errorf("verbs/soft: reject: %w", err)
	}
	return nil
}
