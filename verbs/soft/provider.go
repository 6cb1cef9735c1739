// Package soft is the pure-Go software provider of package verbs: the
// same semantics as an RDMA NIC's reliable connections, carried over TCP,
// so rdmafs and its tests run the whole RDMA path on machines without RDMA
// hardware (between processes, across hosts, or in one process).
//
// It is NOT wire-compatible with any RDMA hardware, with SoftRoCE (rxe),
// with soft-iWARP or with anything else: both ends of a connection must use
// this provider. Its frames are described in wire.go.
//
// # Use
//
// A *Provider is the verbs.Provider: soft.New() or &soft.Provider{} (the
// zero value is ready; do not copy one after first use). It has one device,
// "soft0"; Open with name "" or "soft0" and any addr opens it. Listen and
// Dial take TCP host:port addresses.
//
// # Semantics
//
//   - Memory regions have a key (lkey = rkey) that the peer must present
//     with the address (MR.Addr, the region's virtual address, as on
//     hardware). RDMA WRITE and READ check the rkey, the access right and
//     the bounds; a wrong rkey, a missing right or an access out of bounds
//     completes the initiator's work request with StatusRemAccessErr and
//     ends the connection on both sides, as a remote access error does on
//     hardware. Zero-length accesses are not checked (C9-88).
//   - SEND and RECV: a SEND that finds no receive posted is held at the
//     receiver until one is posted (the receiver-not-ready retries of
//     hardware); after Provider.RNRTimeout it fails at the sender with
//     StatusRNRRetryExcErr. A SEND longer than the receive buffer completes
//     the receive with StatusLocLenErr and the send with
//     StatusRemInvReqErr, and ends the connection.
//   - An RDMA READ response reads the memory as it is sent, after the
//     requests that follow the READ may have executed (as on hardware,
//     where a fence would order them): a SEND after a READ can arrive
//     before the READ's data has left.
//   - Completions are in posting order per queue; unsignaled work requests
//     complete silently unless they fail. RDMA Reads in flight are limited
//     by the negotiated initiator depth and responder resources (a READ
//     posted on a connection whose initiator depth came out 0 is refused).
//   - Type 2 memory windows: bound by OpBindMW through a connection and
//     usable only by that connection's peer, within the bound range and
//     access, until invalidated by OpLocalInv or by the peer's
//     OpSendWithInv (the receive completion reports InvalidatedRKey). A
//     failed bind is StatusMWBindErr, a failed local invalidation
//     StatusGeneralErr, a failed remote invalidation StatusRemInvReqErr at
//     both ends; each ends the connection.
//   - Connect and accept carry private data (56 and 196 bytes, 148 for a
//     reject, delivered exactly as sent), ResponderResources and
//     InitiatorDepth. A dial to a port nobody listens on is a
//     *verbs.RejectError with Reason 8 (as the InfiniBand CM's "invalid
//     service ID"); a reject by the peer has Reason 28.
//   - Disconnect (orderly, or a lost TCP connection) ends the connection:
//     Done closes, Err says why (wrapping verbs.ErrDisconnected), and every
//     outstanding work request completes with StatusWRFlushErr.
//   - Wait sleeps on channels; ConnConfig.Polling makes it spin instead.
//
// Close waits for the connection's goroutines, so after everything is
// closed no goroutine and no file descriptor of this package remains.
//
// # Test hooks
//
// Provider has fault hooks for tests of the layers above (RefuseConnects,
// DropConnections, FailNextCompletion, DelayNextCompletion) and Drop for
// one connection. They are test hooks: nothing else should call them.
package soft

import (
	"context"
	"fmt"
	"sync"
	"syscall"
	"time"

	"github.com/rdmafs/rdmafs/verbs"
)

// DeviceName is the soft provider's one device.
const DeviceName = "soft0"

// DefaultRNRTimeout is how long a SEND waits for a receive at the peer
// unless Provider.RNRTimeout says otherwise: about what six RNR retries of
// the RDMA CM's default RNR timer (655 ms) give on hardware.
const DefaultRNRTimeout = 4 * time.Second

// Provider is the soft provider. The zero value is ready to use.
type Provider struct {
	// RNRTimeout bounds how long a SEND that finds no receive posted
	// waits at the receiver before it fails at the sender with
	// StatusRNRRetryExcErr; 0 means DefaultRNRTimeout. Set it before
	// opening a device.
	RNRTimeout time.Duration

	faults faults

	mu    sync.Mutex
	conns map[*conn]struct{} // every open connection, for DropConnections
}

// New returns a soft provider.
func New() *Provider { return &Provider{} }

var _ verbs.Provider = (*Provider)(nil)

// Name returns "soft".
func (p *Provider) Name() string { return "soft" }

// Open opens the device soft0. name must be "" or "soft0"; addr may be
// anything (the device reaches every address TCP does).
func (p *Provider) Open(ctx context.Context, name, addr string) (verbs.Device, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if name != "" && name != DeviceName {
		return nil, fmt.Errorf("verbs/soft: no device %q (the soft provider has one device, %s): %w", name, DeviceName, verbs.ErrNoDevice)
	}
	return &device{p: p, objs: make(map[uint32]any), nextIndex: 1}, nil
}

func (p *Provider) rnrTimeout() time.Duration {
	if p.RNRTimeout > 0 {
		return p.RNRTimeout
	}
	return DefaultRNRTimeout
}

func (p *Provider) addConn(c *conn) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.conns == nil {
		p.conns = make(map[*conn]struct{})
	}
	p.conns[c] = struct{}{}
}

func (p *Provider) removeConn(c *conn) {
	p.mu.Lock()
	defer p.mu.Unlock()
	delete(p.conns, c)
}

// device is an open soft0. It owns the key space of its regions and
// windows: an rkey is (index << 8) | key, as on hardware, and objs maps the
// index to the *mr or *mw.
type device struct {
	p *Provider

	state verbs.DeviceState // its PDs, and whether it is closed

	mu        sync.RWMutex
	objs      map[uint32]any
	nextIndex uint32
}

var softCaps = verbs.Caps{
	MaxQPWR:         16384,
	MaxSGE:          32,
	MaxCQE:          1 << 20,
	MaxMRSize:       1 << 40,
	MaxQPRdAtom:     128,
	MaxQPInitRdAtom: 128,
	MemoryWindows:   true,
}

func (d *device) Name() string     { return DeviceName }
func (d *device) Caps() verbs.Caps { return softCaps }

func (d *device) AllocPD() (verbs.PD, error) {
	return d.state.AllocPD("alloc_pd", func() (verbs.PD, error) { return &pd{dev: d}, nil })
}

func (d *device) Close() error { return d.state.Close("close_device", nil) }

// pd is a protection domain: it counts what was made in it, since it may
// only be closed after all of that.
type pd struct {
	dev *device

	mu                         sync.Mutex
	mrs, mws, conns, listeners int
	closed                     bool
}

func (pd *pd) Close() error {
	pd.mu.Lock()
	defer pd.mu.Unlock()
	if pd.closed {
		return nil
	}
	if n := pd.mrs + pd.mws + pd.conns + pd.listeners; n > 0 {
		return &verbs.VerbError{Verb: "dealloc_pd", Err: fmt.Errorf("%d regions, %d windows, %d connections, %d listeners still open: %w",
			pd.mrs, pd.mws, pd.conns, pd.listeners, syscall.EBUSY)}
	}
	pd.closed = true
	pd.dev.state.PDClosed()
	return nil
}

// use counts one more object of the PD (n = +1) or one less (n = -1).
func (pd *pd) use(field *int, n int) error {
	pd.mu.Lock()
	defer pd.mu.Unlock()
	if pd.closed && n > 0 {
		return &verbs.VerbError{Verb: "pd", Err: syscall.EBADF}
	}
	*field += n
	return nil
}
