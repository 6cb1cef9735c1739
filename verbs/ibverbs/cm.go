//go:build cgo && linux

package ibverbs

// #include <stdlib.h>
// #include "helpers.h"
import "C"

import (
	"context"
	"fmt"
	"net"
	"sync"
	"syscall"
	"unsafe"

	"github.com/rdmafs/rdmafs/verbs"
)

const (
	listenBacklog = 128
	// Transport and RNR retries asked of the RDMA CM: a lost peer or a
	// missing receive fails a work request after a few seconds rather
	// than never (7 would mean retry forever).
	retryCount    = 6
	rnrRetryCount = 6

	maxReqPrivate    = 56
	maxAcceptPrivate = 196
	maxRejectPrivate = 148
)

// eventChannel is an RDMA CM event channel, read through the netpoller.
type eventChannel struct {
	ch *C.struct_rdma_event_channel
	fd *pollFD
	ev *C.struct_rdmafs_cm_event
}

// newCMID makes an RDMA CM id (TCP port space) on an event channel of its
// own.
func newCMID() (*eventChannel, *C.struct_rdma_cm_id, error) {
	ech, err := newEventChannel()
	if err != nil {
		return nil, nil, err
	}
	var id *C.struct_rdma_cm_id
	if r, errno := C.rdma_create_id(ech.ch, &id, nil, C.RDMA_PS_TCP); r != 0 {
		ech.destroy()
		return nil, nil, &verbs.VerbError{Verb: "rdma_create_id", Err: errno}
	}
	return ech, id, nil
}

func newEventChannel() (*eventChannel, error) {
	ch, errno := C.rdma_create_event_channel()
	if ch == nil {
		return nil, &verbs.VerbError{Verb: "rdma_create_event_channel", Err: errno}
	}
	fd, err := newPollFD(int(ch.fd), "rdma_cm event channel")
	if err != nil {
		C.rdma_destroy_event_channel(ch)
		return nil, &verbs.VerbError{Verb: "rdma_create_event_channel", Err: err}
	}
	return &eventChannel{ch: ch, fd: fd, ev: (*C.struct_rdmafs_cm_event)(C.calloc(1, C.sizeof_struct_rdmafs_cm_event))}, nil
}

// destroy closes the channel; the ids on it must be destroyed first.
func (e *eventChannel) destroy() {
	e.fd.close()
	C.rdma_destroy_event_channel(e.ch)
	C.free(unsafe.Pointer(e.ev))
}

// cmEvent is an RDMA CM event, copied and acked.
type cmEvent struct {
	typ      C.int
	status   int
	id       *C.struct_rdma_cm_id
	listenID *C.struct_rdma_cm_id
	// As the event reports them: the local side's point of view.
	responderResources, initiatorDepth uint8
	private                            []byte
}

func eventName(t C.int) string {
	return C.GoString(C.rdma_event_str(C.enum_rdma_cm_event_type(t)))
}

// next waits for the next event.
func (e *eventChannel) next(ctx context.Context) (cmEvent, error) {
	var (
		ev     cmEvent
		failed C.int
	)
	err := e.fd.wait(ctx, func() bool {
		r := C.rdmafs_get_cm_event(e.ch, e.ev)
		if r == -C.EAGAIN {
			return false
		}
		failed = r
		if r == 0 {
			x := e.ev
			ev = cmEvent{typ: C.int(x.event), status: int(x.status), id: x.id, listenID: x.listen_id,
				responderResources: uint8(x.responder_resources), initiatorDepth: uint8(x.initiator_depth)}
			if x.private_data_len > 0 {
				ev.private = C.GoBytes(unsafe.Pointer(&x.private_data[0]), C.int(x.private_data_len))
			}
		}
		return true
	})
	if err != nil {
		return ev, err
	}
	if failed != 0 {
		return ev, &verbs.VerbError{Verb: "rdma_get_cm_event", Err: syscall.Errno(-failed)}
	}
	return ev, nil
}

// expect waits for the next event, which must be want.
func (e *eventChannel) expect(ctx context.Context, want C.int) (cmEvent, error) {
	ev, err := e.next(ctx)
	if err != nil {
		return ev, err
	}
	if ev.typ != want || ev.status != 0 {
		return ev, eventError(ev, want)
	}
	return ev, nil
}

// eventError is the error an unexpected event means.
func eventError(ev cmEvent, want C.int) error {
	if ev.typ == C.RDMA_CM_EVENT_REJECTED {
		return &verbs.RejectError{PrivateData: ev.private, Reason: ev.status}
	}
	status := fmt.Sprintf("status %d", ev.status)
	if ev.status < 0 {
		status = syscall.Errno(-ev.status).Error()
	}
	return fmt.Errorf("connection manager: %s (%s), waiting for %s", eventName(ev.typ), status, eventName(want))
}

// checkConfig validates cfg against the device and fills in defaults.
func (d *device) checkConfig(cfg verbs.ConnConfig) (verbs.ConnConfig, error) {
	cfg, err := cfg.Check(d.caps, func(what string, v, limit int) error {
		return &verbs.VerbError{Verb: "ibv_create_qp", Err: fmt.Errorf("%s %d (device %s allows %d): %w", what, v, d.name, limit, syscall.EINVAL)}
	})
	if err != nil {
		return cfg, err
	}
	cfg.ResponderResources = uint8(min(int(cfg.ResponderResources), d.caps.MaxQPRdAtom))
	cfg.InitiatorDepth = uint8(min(int(cfg.InitiatorDepth), d.caps.MaxQPInitRdAtom))
	return cfg, nil
}

func bytesPtr(b []byte) unsafe.Pointer {
	if len(b) == 0 {
		return nil
	}
	return unsafe.Pointer(&b[0])
}

func (p *pd) Dial(ctx context.Context, addr string, cfg verbs.ConnConfig) (verbs.Conn, error) {
	cfg, err := p.dev.checkConfig(cfg)
	if err != nil {
		return nil, err
	}
	if len(cfg.PrivateData) > maxReqPrivate {
		return nil, &verbs.VerbError{Verb: "rdma_connect", Err: fmt.Errorf("%d bytes of private data (at most %d): %w", len(cfg.PrivateData), maxReqPrivate, syscall.EINVAL)}
	}
	ip, port, err := parseAddr(ctx, addr, false)
	if err != nil {
		return nil, err
	}
	if err := p.use(&p.conns, 1); err != nil {
		return nil, err
	}
	c, err := p.dial(ctx, ip, port, cfg)
	if err != nil {
		p.use(&p.conns, -1)
		return nil, fmt.Errorf("verbs/ibverbs: connect to %s: %w", addr, err)
	}
	return c, nil
}

func (p *pd) dial(ctx context.Context, ip net.IP, port uint16, cfg verbs.ConnConfig) (_ *conn, err error) {
	ctx, cancel := context.WithTimeout(ctx, cfg.Timeout)
	defer cancel()
	ech, id, err := newCMID()
	if err != nil {
		return nil, err
	}
	var c *conn
	defer func() {
		if err != nil {
			if c != nil {
				c.release()
			}
			C.rdma_destroy_id(id)
			ech.destroy()
		}
	}()
	sa := newSockaddr(ip, port)
	defer C.free(unsafe.Pointer(sa))
	if r, errno := C.rdma_resolve_addr(id, nil, (*C.struct_sockaddr)(unsafe.Pointer(sa)), C.int(timeoutMS(ctx))); r != 0 {
		return nil, &verbs.VerbError{Verb: "rdma_resolve_addr", Err: errno}
	}
	if _, err := ech.expect(ctx, C.RDMA_CM_EVENT_ADDR_RESOLVED); err != nil {
		return nil, err
	}
	if id.verbs != p.dev.ctx {
		other := "no RDMA device"
		if id.verbs != nil {
			other = "device " + C.GoString(C.rdmafs_device_name(id.verbs))
		}
		return nil, fmt.Errorf("the address is reached through %s, not %s (this PD's)", other, p.dev.name)
	}
	if r, errno := C.rdma_resolve_route(id, C.int(timeoutMS(ctx))); r != 0 {
		return nil, &verbs.VerbError{Verb: "rdma_resolve_route", Err: errno}
	}
	if _, err := ech.expect(ctx, C.RDMA_CM_EVENT_ROUTE_RESOLVED); err != nil {
		return nil, err
	}
	if c, err = newConn(p, id, ech, cfg); err != nil {
		return nil, err
	}
	pdata := cfg.PrivateData
	if r := C.rdmafs_connect(id, bytesPtr(pdata), C.uint8_t(len(pdata)), C.uint8_t(cfg.ResponderResources),
		C.uint8_t(cfg.InitiatorDepth), retryCount, rnrRetryCount); r != 0 {
		return nil, &verbs.VerbError{Verb: "rdma_connect", Err: syscall.Errno(-r)}
	}
	ev, err := ech.expect(ctx, C.RDMA_CM_EVENT_ESTABLISHED)
	if err != nil {
		return nil, err
	}
	c.peerPrivate = ev.private
	c.start()
	return c, nil
}

func (p *pd) Listen(addr string) (verbs.Listener, error) {
	ip, port, err := parseAddr(context.Background(), addr, true)
	if err != nil {
		return nil, err
	}
	if err := p.use(&p.listeners, 1); err != nil {
		return nil, err
	}
	l, err := p.listen(ip, port)
	if err != nil {
		p.use(&p.listeners, -1)
		return nil, fmt.Errorf("verbs/ibverbs: listen on %s: %w", addr, err)
	}
	return l, nil
}

func (p *pd) listen(ip net.IP, port uint16) (*listener, error) {
	ech, id, err := newCMID()
	if err != nil {
		return nil, err
	}
	fail := func(err error) (*listener, error) {
		C.rdma_destroy_id(id)
		ech.destroy()
		return nil, err
	}
	sa := newSockaddr(ip, port)
	r, errno := C.rdma_bind_addr(id, (*C.struct_sockaddr)(unsafe.Pointer(sa)))
	C.free(unsafe.Pointer(sa))
	if r != 0 {
		return fail(&verbs.VerbError{Verb: "rdma_bind_addr", Err: errno})
	}
	if id.verbs != nil && id.verbs != p.dev.ctx {
		return fail(fmt.Errorf("the address belongs to device %s, not %s (this PD's)", C.GoString(C.rdmafs_device_name(id.verbs)), p.dev.name))
	}
	if r, errno := C.rdma_listen(id, listenBacklog); r != 0 {
		return fail(&verbs.VerbError{Verb: "rdma_listen", Err: errno})
	}
	l := &listener{pd: p, id: id, ech: ech, addr: sockaddrString(C.rdma_get_local_addr(id)),
		reqs: make(chan *connRequest, listenBacklog), done: make(chan struct{}), quit: make(chan struct{})}
	go l.loop()
	return l, nil
}

type listener struct {
	pd   *pd
	id   *C.struct_rdma_cm_id
	ech  *eventChannel
	addr string
	reqs chan *connRequest
	done chan struct{} // the loop ended
	quit chan struct{} // Close was called
	once sync.Once

	mu  sync.Mutex
	err error // why the loop ended, other than Close
}

func (l *listener) Addr() string { return l.addr }

// loop takes the connection requests. Each one's id is migrated to an
// event channel of its own at once, so that it outlives the listener.
func (l *listener) loop() {
	defer close(l.done)
	for {
		ev, err := l.ech.next(context.Background())
		if err != nil {
			l.setErr(err)
			return
		}
		if ev.typ != C.RDMA_CM_EVENT_CONNECT_REQUEST {
			// DEVICE_REMOVAL or ADDR_CHANGE of the listening id: it
			// cannot take requests any more.
			if ev.id == l.id && (ev.typ == C.RDMA_CM_EVENT_DEVICE_REMOVAL || ev.typ == C.RDMA_CM_EVENT_ADDR_CHANGE) {
				l.setErr(fmt.Errorf("connection manager: %s", eventName(ev.typ)))
				return
			}
			continue
		}
		child := ev.id
		if child.verbs != l.pd.dev.ctx {
			C.rdma_reject(child, nil, 0)
			C.rdma_destroy_id(child)
			continue
		}
		ech, err := newEventChannel()
		if err == nil {
			if r, errno := C.rdma_migrate_id(child, ech.ch); r != 0 {
				err = &verbs.VerbError{Verb: "rdma_migrate_id", Err: errno}
				ech.destroy()
			}
		}
		if err != nil {
			C.rdma_reject(child, nil, 0)
			C.rdma_destroy_id(child)
			continue
		}
		// The event says what this end should use: its responder
		// resources are the peer's initiator depth and the other way
		// round.
		r := &connRequest{pd: l.pd, id: child, ech: ech, private: ev.private,
			peerRR: ev.initiatorDepth, peerID: ev.responderResources,
			remote: sockaddrString(C.rdma_get_peer_addr(child))}
		select {
		case l.reqs <- r:
		default:
			r.Reject(nil) // backlog full
		}
	}
}

func (l *listener) setErr(err error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.err == nil {
		l.err = err
	}
}

func (l *listener) Accept(ctx context.Context) (verbs.ConnRequest, error) {
	select {
	case r := <-l.reqs:
		return r, nil
	case <-l.quit:
		return nil, fmt.Errorf("verbs/ibverbs: accept: %w", net.ErrClosed)
	case <-l.done:
		select {
		case r := <-l.reqs:
			return r, nil
		default:
		}
		l.mu.Lock()
		defer l.mu.Unlock()
		return nil, fmt.Errorf("verbs/ibverbs: accept: listener failed: %w", l.err)
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// Close stops listening and rejects the requests Accept has not returned.
func (l *listener) Close() error {
	l.once.Do(func() {
		close(l.quit)
		l.ech.fd.close()
		<-l.done
		for {
			select {
			case r := <-l.reqs:
				r.Reject(nil)
				continue
			default:
			}
			break
		}
		C.rdma_destroy_id(l.id)
		l.ech.destroy()
		l.pd.use(&l.pd.listeners, -1)
	})
	return nil
}

type connRequest struct {
	pd      *pd
	id      *C.struct_rdma_cm_id
	ech     *eventChannel
	private []byte
	peerRR  uint8 // the peer's responder resources
	peerID  uint8 // the peer's initiator depth
	remote  string

	mu       sync.Mutex
	answered bool
}

func (r *connRequest) PrivateData() []byte       { return r.private }
func (r *connRequest) ResponderResources() uint8 { return r.peerRR }
func (r *connRequest) InitiatorDepth() uint8     { return r.peerID }
func (r *connRequest) RemoteAddr() string        { return r.remote }

func (r *connRequest) answer(verb string) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.answered {
		return &verbs.VerbError{Verb: verb, Err: fmt.Errorf("connection request already accepted or rejected: %w", syscall.EINVAL)}
	}
	r.answered = true
	return nil
}

// drop destroys the request's id and channel.
func (r *connRequest) drop() {
	C.rdma_destroy_id(r.id)
	r.ech.destroy()
}

func (r *connRequest) Accept(cfg verbs.ConnConfig) (verbs.Conn, error) {
	cfg, err := r.pd.dev.checkConfig(cfg)
	if err != nil {
		return nil, err
	}
	if len(cfg.PrivateData) > maxAcceptPrivate {
		return nil, &verbs.VerbError{Verb: "rdma_accept", Err: fmt.Errorf("%d bytes of private data (at most %d): %w", len(cfg.PrivateData), maxAcceptPrivate, syscall.EINVAL)}
	}
	if err := r.answer("rdma_accept"); err != nil {
		return nil, err
	}
	if err := r.pd.use(&r.pd.conns, 1); err != nil {
		r.drop()
		return nil, err
	}
	c, err := r.accept(cfg)
	if err != nil {
		r.drop()
		r.pd.use(&r.pd.conns, -1)
		return nil, fmt.Errorf("verbs/ibverbs: accept from %s: %w", r.remote, err)
	}
	return c, nil
}

func (r *connRequest) accept(cfg verbs.ConnConfig) (*conn, error) {
	c, err := newConn(r.pd, r.id, r.ech, cfg)
	if err != nil {
		return nil, err
	}
	// Serve no more RDMA Reads than the peer may issue and issue no more
	// than it serves.
	rr := min(cfg.ResponderResources, r.peerID)
	id := min(cfg.InitiatorDepth, r.peerRR)
	pdata := cfg.PrivateData
	if ret := C.rdmafs_accept(r.id, bytesPtr(pdata), C.uint8_t(len(pdata)), C.uint8_t(rr), C.uint8_t(id), rnrRetryCount); ret != 0 {
		c.release()
		return nil, &verbs.VerbError{Verb: "rdma_accept", Err: syscall.Errno(-ret)}
	}
	ctx, cancel := context.WithTimeout(context.Background(), cfg.Timeout)
	defer cancel()
	if _, err := r.ech.expect(ctx, C.RDMA_CM_EVENT_ESTABLISHED); err != nil {
		c.release()
		return nil, err
	}
	c.peerPrivate = r.private
	c.start()
	return c, nil
}

func (r *connRequest) Reject(privateData []byte) error {
	if len(privateData) > maxRejectPrivate {
		return &verbs.VerbError{Verb: "rdma_reject", Err: fmt.Errorf("%d bytes of private data (at most %d): %w", len(privateData), maxRejectPrivate, syscall.EINVAL)}
	}
	if err := r.answer("rdma_reject"); err != nil {
		return err
	}
	defer r.drop()
	if ret, errno := C.rdma_reject(r.id, bytesPtr(privateData), C.uint8_t(len(privateData))); ret != 0 {
		return &verbs.VerbError{Verb: "rdma_reject", Err: errno}
	}
	return nil
}
