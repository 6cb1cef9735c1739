// Package verbs is the small RDMA verbs layer under rdmafs's
// RPC-over-RDMA transport: what an RPC-over-RDMA client and server need
// from an RDMA device, and no more, as Go types.
//
// A Provider opens Devices. A Device gives protection domains (PD); in a PD
// one registers memory (MR), allocates memory windows (MW) and makes
// reliable-connected connections (Conn) through the connection manager,
// actively (PD.Dial) or passively (PD.Listen). A Conn has one queue pair and
// one completion queue: work requests are posted with PostSend and
// PostRecv, and their completions are read with Poll, waiting for them
// with Wait.
//
// Two providers implement it and pass the same conformance suite
// (verbs/conformance): "ibverbs", over libibverbs and librdmacm (cgo; real
// RDMA NICs and SoftRoCE), and "soft", a pure-Go software implementation of
// the same semantics over TCP for machines without RDMA. The soft provider
// is not wire-compatible with any RDMA hardware or with SoftRoCE: both ends
// must use it.
//
// What both providers do alike is here too: ConnConfig.Check validates a
// connection's configuration against a device's Caps, and DeviceState
// keeps a device open while it has protection domains.
//
// Registered memory must not move: it is allocated with AllocMemory
// (page-aligned, mmap'd, outside the Go heap), never taken from Go
// slices. No provider keeps a Go pointer in C memory.
package verbs

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// A Provider opens the RDMA devices of one implementation.
type Provider interface {
	// Name is the provider's name: "ibverbs" or "soft".
	Name() string
	// Open opens the device named name or, when name is "", the device
	// through which addr (host:port or an IP address) is reached.
	Open(ctx context.Context, name, addr string) (Device, error)
}

// Prober is a Provider that can tell cheaply whether a listener of its
// kind answers at addr (host:port), without making a connection: a
// transport waiting to reconnect uses it to notice that its server is
// back.
type Prober interface {
	Probe(ctx context.Context, addr string) error
}

// Device is an open RDMA device.
type Device interface {
	Name() string
	Caps() Caps
	// AllocPD allocates a protection domain.
	AllocPD() (PD, error)
	// Close closes the device; its PDs must be closed first.
	Close() error
}

// Caps are the device limits a transport sizes itself by.
type Caps struct {
	MaxQPWR         int // the largest ConnConfig.SendDepth and RecvDepth
	MaxSGE          int // scatter/gather entries per work request
	MaxCQE          int // the largest ConnConfig.CQDepth (SendDepth+RecvDepth when it is 0)
	MaxMRSize       uint64
	MaxQPRdAtom     int // outstanding RDMA Reads a QP may serve (responder resources)
	MaxQPInitRdAtom int // outstanding RDMA Reads a QP may issue (initiator depth)
	// MemoryWindows reports type 2 memory windows: PD.AllocMW, OpBindMW,
	// OpLocalInv and remote invalidation work.
	MemoryWindows bool
}

// Access says what a registered region or a memory window allows.
type Access uint32

// The access flags.
const (
	AccessLocalWrite  Access = 1 << 0
	AccessRemoteWrite Access = 1 << 1
	AccessRemoteRead  Access = 1 << 2
	AccessMWBind      Access = 1 << 4 // a memory window may be bound to the region
)

// PD is a protection domain.
type PD interface {
	// Register registers length bytes of m from off, page-aligned
	// memory from AllocMemory.
	Register(m *Memory, off, length int, access Access) (MR, error)
	// AllocMW allocates a type 2 memory window (Caps.MemoryWindows).
	AllocMW() (MW, error)
	// Dial connects to a listener at addr (host:port).
	Dial(ctx context.Context, addr string, cfg ConnConfig) (Conn, error)
	// Listen listens for connections at addr (host:port; port 0 picks
	// one) on this PD's device.
	Listen(addr string) (Listener, error)
	// Close releases the PD; its MRs, MWs, connections and listeners must
	// be closed first.
	Close() error
}

// MR is a registered memory region.
type MR interface {
	LKey() uint32
	RKey() uint32
	// Addr is the address of the region's first byte as the peer names it
	// in RDMA operations (a remote address).
	Addr() uint64
	// Bytes is the registered memory.
	Bytes() []byte
	// Deregister ends the registration; the peer's rkey stops working.
	Deregister() error
}

// MW is a type 2 memory window. Its rkey is valid for the range it is bound
// to (by an OpBindMW work request) until it is invalidated, locally
// (OpLocalInv) or by the peer (a Send with invalidate). A type 2 window is
// bound through one connection and only that connection's peer may use it.
// It must be invalid (never bound, or invalidated) to be bound again.
type MW interface {
	// RKey is the key of the window's latest binding; a bind gives it a
	// new one (see SendWR.NewRKey). It changes when the bind is posted,
	// so the next bind can be computed from it at once, and changes back
	// if the bind fails or is flushed; the peer may use the key once the
	// bind has completed.
	RKey() uint32
	Close() error
}

// ConnConfig sizes a connection and carries what the connection manager
// exchanges.
type ConnConfig struct {
	SendDepth, RecvDepth   int // work requests each queue holds
	MaxSendSGE, MaxRecvSGE int
	CQDepth                int // completions; 0 = SendDepth+RecvDepth
	// ResponderResources is how many RDMA Reads the peer may have
	// outstanding against this end; InitiatorDepth how many this end may
	// issue. Linux svcrdma refuses a client whose ResponderResources is 0.
	ResponderResources, InitiatorDepth uint8
	// PrivateData goes with the connect request (at most 56 bytes) or
	// the accept (at most 196 bytes). On InfiniBand and RoCE the peer
	// receives it padded with zeros to that full size (the connection
	// manager does not carry the length); the soft provider and iWARP
	// deliver exactly what was sent.
	PrivateData []byte
	// Timeout bounds address and route resolution and the connect; 0 =
	// DefaultConnTimeout.
	Timeout time.Duration
	// Polling makes Wait spin on the completion queue instead of sleeping
	// on the completion channel: lower latency, one CPU kept busy.
	Polling bool
}

// Conn is a reliable-connected queue pair with its completion queue.
// PostSend, PostRecv and Poll may be called from different goroutines;
// each is safe for concurrent use.
type Conn interface {
	// PostSend posts a work request on the send queue, or a chain of
	// them linked by SendWR.Next, in order and in one call to the device
	// (ibv_post_send's list). A work request the provider can tell is
	// wrong before it runs (an SGE outside its region or of another PD,
	// more SGEs than MaxSendSGE, memory written without
	// AccessLocalWrite) is refused with a *PostError, and the rest of its
	// chain with it, while the work requests before it are posted (as
	// ibv_post_send's bad_wr says): PostError.Posted counts them. A chain
	// is refused whole, with an error that is no *PostError, when it is
	// longer than MaxChain (EINVAL), when the queue has no room for all
	// of it (ENOMEM), and once the connection has ended (the error wraps
	// ErrDisconnected).
	PostSend(wr *SendWR) error
	// PostRecv posts a receive buffer, refused as PostSend refuses (and
	// never in part: it takes one).
	PostRecv(wr *RecvWR) error
	// Poll fills wcs with completions that are ready and returns how
	// many; it never blocks.
	Poll(wcs []Completion) (int, error)
	// Wait blocks until Poll may return completions, the connection ends
	// or ctx ends. Once the connection has ended, Wait returns nil as long
	// as work requests remain to be completed (flushed) and polled, and
	// then Err, which wraps ErrDisconnected.
	Wait(ctx context.Context) error
	// WaitUntil is Wait with a deadline instead of a context, for a
	// caller that waits on the hot path for its own completion: it
	// returns nil when Poll may return completions, at the deadline,
	// and once the connection has ended (Poll may then find nothing:
	// the caller looks at what it waits for, and at Done), and an error
	// only when the completion queue fails. It allocates nothing and
	// starts no goroutine. One goroutine at a time waits in it, and not
	// while another waits in Wait.
	WaitUntil(deadline time.Time) error
	// PeerPrivateData is what the peer sent with its connect request or
	// its accept.
	PeerPrivateData() []byte
	// Done is closed when the connection has ended: a disconnect by
	// either side, an error that moved the queue pair to the error state,
	// or the device going away. Err then says why. Work requests still
	// posted complete with StatusWRFlushErr.
	Done() <-chan struct{}
	Err() error
	// Disconnect starts an orderly disconnect.
	Disconnect() error
	// Close disconnects and releases the queue pair and completion
	// queue.
	Close() error
	LocalAddr() string
	RemoteAddr() string
}

// Listener accepts connection requests.
type Listener interface {
	// Accept returns the next connection request.
	Accept(ctx context.Context) (ConnRequest, error)
	// Addr is the address listened on, with the port chosen.
	Addr() string
	Close() error
}

// ConnRequest is a peer's request to connect.
type ConnRequest interface {
	// PrivateData is what the peer sent with the request.
	PrivateData() []byte
	// ResponderResources and InitiatorDepth are what the peer asked for:
	// the values of its ConnConfig, from its point of view.
	ResponderResources() uint8
	InitiatorDepth() uint8
	// Accept makes the connection; cfg.PrivateData goes back to the peer.
	Accept(cfg ConnConfig) (Conn, error)
	// Reject refuses it, with private data for the peer (at most 148
	// bytes; padded like PrivateData), whose Dial then returns a
	// *RejectError.
	Reject(privateData []byte) error
	RemoteAddr() string
}

// Opcode is the operation of a send work request.
type Opcode uint8

// The send operations.
const (
	OpSend Opcode = iota
	OpSendWithInv
	OpRDMAWrite
	OpRDMARead
	OpBindMW
	OpLocalInv
)

var opcodeNames = [...]string{"SEND", "SEND_WITH_INV", "RDMA_WRITE", "RDMA_READ", "BIND_MW", "LOCAL_INV"}

func (o Opcode) String() string {
	if int(o) < len(opcodeNames) {
		return opcodeNames[o]
	}
	return fmt.Sprintf("opcode(%d)", uint8(o))
}

// SGE is a scatter/gather entry: Length bytes of MR from Offset.
type SGE struct {
	MR     MR
	Offset int
	Length int
}

// MaxChain is the most work requests one PostSend takes (SendWR.Next).
const MaxChain = 8

// SendWR is a work request of the send queue. The provider copies what it
// needs when it is posted; the memory its SGEs name must stay untouched
// until it completes.
type SendWR struct {
	ID       uint64
	Opcode   Opcode
	SGL      []SGE
	Signaled bool // produce a completion on success (errors always do)
	// Next is the work request PostSend posts after this one, in the
	// same call: a chain of at most MaxChain.
	Next *SendWR

	// RDMA Write and Read: the peer's memory.
	RemoteAddr uint64
	RKey       uint32

	// OpSendWithInv and OpLocalInv: the rkey to invalidate.
	InvalidateRKey uint32

	// OpBindMW: bind MW to Length bytes of BindMR from Offset with
	// BindAccess. NewRKey is the rkey the binding gets (the provider makes
	// one when 0); read it from MW.RKey. Only its low 8 bits, the key, are
	// the consumer's to choose: the upper 24 must be those of MW.RKey.
	MW         MW
	BindMR     MR
	Offset     int
	Length     int
	BindAccess Access
	NewRKey    uint32
}

// RecvWR is a receive buffer. The provider copies what it needs when it
// is posted, as for a SendWR; the memory its SGEs name is the provider's
// until the receive completes.
type RecvWR struct {
	ID  uint64
	SGL []SGE
}

// Status is a work completion's status.
type Status uint8

// The statuses a transport tells apart; every other failure is
// StatusGeneralErr.
const (
	StatusSuccess Status = iota
	StatusLocLenErr
	StatusLocProtErr
	StatusWRFlushErr
	StatusRemAccessErr
	StatusRemOpErr
	StatusRetryExcErr
	StatusRNRRetryExcErr
	StatusRemInvReqErr
	StatusMWBindErr
	StatusGeneralErr
)

var statusNames = [...]string{"success", "local length error", "local protection error",
	"work request flushed", "remote access error", "remote operation error",
	"transport retry counter exceeded", "RNR retry counter exceeded",
	"remote invalid request", "memory window bind error", "general error"}

func (s Status) String() string {
	if int(s) < len(statusNames) {
		return statusNames[s]
	}
	return fmt.Sprintf("status(%d)", uint8(s))
}

// CompletionOp is what a completion completed.
type CompletionOp uint8

// The completion operations.
const (
	CompSend CompletionOp = iota
	CompRDMAWrite
	CompRDMARead
	CompBindMW
	CompLocalInv
	CompRecv
)

// Completion is a work completion.
type Completion struct {
	ID      uint64
	Status  Status
	Op      CompletionOp // valid only for StatusSuccess
	ByteLen uint32       // bytes received (CompRecv), read (CompRDMARead)
	// InvalidatedRKey is the rkey the peer invalidated with a Send with
	// invalidate, when HasInvalidate.
	InvalidatedRKey uint32
	HasInvalidate   bool
	VendorErr       uint32
}

// Err returns nil for a successful completion and an error naming the
// status otherwise.
func (c *Completion) Err() error {
	if c.Status == StatusSuccess {
		return nil
	}
	return &CompletionError{Status: c.Status, ID: c.ID, VendorErr: c.VendorErr}
}

// CompletionError is a failed work completion.
type CompletionError struct {
	Status    Status
	ID        uint64
	VendorErr uint32
}

func (e *CompletionError) Error() string {
	return fmt.Sprintf("verbs: work request %d: %v (vendor error %#x)", e.ID, e.Status, e.VendorErr)
}

// Errors the providers return.
var (
	ErrDisconnected = errors.New("verbs: disconnected")
	ErrNoDevice     = errors.New("verbs: no RDMA device")
	ErrRejected     = errors.New("verbs: connection rejected")
	ErrUnsupported  = errors.New("verbs: not supported by the device")
	ErrNoProvider   = errors.New("verbs: provider not built in")
)

// RejectError is a Dial the peer refused (errors.Is(err, ErrRejected)):
// a reject by the peer's ConnRequest.Reject, with its private data, or by
// the peer's connection manager (no listener, a full backlog).
type RejectError struct {
	PrivateData []byte
	// Reason is the connection manager's reject reason where the
	// transport has one (InfiniBand CM: 28 is a consumer reject), else 0.
	Reason int
}

func (e *RejectError) Error() string {
	return fmt.Sprintf("verbs: connection rejected (reason %d, %d bytes of private data)", e.Reason, len(e.PrivateData))
}

// Is makes errors.Is(err, ErrRejected) true.
func (e *RejectError) Is(target error) bool { return target == ErrRejected }

// PostError is a PostSend that refused a work request of its chain: the
// first Posted work requests were posted (their completions come as
// usual), the one after them failed with Err, and it and the rest of the
// chain were not posted.
type PostError struct {
	Posted int
	Err    error
}

func (e *PostError) Error() string {
	if e.Posted == 0 {
		return e.Err.Error()
	}
	return fmt.Sprintf("work request %d of the chain (those before it were posted): %v", e.Posted, e.Err)
}

func (e *PostError) Unwrap() error { return e.Err }

// VerbError is a failed verb of a provider: the verb's name and the errno.
type VerbError struct {
	Verb string
	Err  error
}

func (e *VerbError) Error() string { return "verbs: " + e.Verb + ": " + e.Err.Error() }
func (e *VerbError) Unwrap() error { return e.Err }
