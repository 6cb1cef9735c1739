package xprtrdma

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"syscall"
	"time"

	"github.com/rdmafs/rdmafs/rpcrdma"
	"github.com/rdmafs/rdmafs/sunrpc"
	"github.com/rdmafs/rdmafs/verbs"
)

// Config configures a client Transport. A zero field takes its default.
type Config struct {
	Provider verbs.Provider
	Addr     string // host:port of the server's RPC-over-RDMA listener
	// Credits is how many calls the client asks to have in flight
	// (slot_table_entries); the server's grant rules. Default
	// DefaultCredits.
	Credits int
	// MaxInlineRead and MaxInlineWrite are the largest reply and call the
	// client receives and sends inline (RFC 8797 private data). Default
	// DefaultMaxInline.
	MaxInlineRead, MaxInlineWrite int
	// MemReg is how chunk buffers are exposed to the server (the memreg
	// option; MemReg's constants say what each strategy exposes and for
	// how long). Default memory windows, or per-call registration on a
	// device without them.
	MemReg MemReg
	// MaxIO is the largest payload a call or reply carries (the larger of
	// rsize and wsize): the size of a chunk buffer. Default 1 MiB.
	MaxIO int
	// ChunkBuffers is how many chunk buffers the transport registers at
	// most (READ data, reply chunks, WRITE payloads): it registers them
	// as calls need them, and deregisters them when idle. Default
	// DefaultChunkBuffers.
	ChunkBuffers   int
	ConnectTimeout time.Duration // default 10 s
	IdleTimeout    time.Duration // default 5 minutes
	Logf           func(format string, args ...any)
}

// The defaults of Config, which the mount options' defaults
// (slot_table_entries, max_inline_read, max_inline_write) are too: the
// Linux client's.
const (
	DefaultCredits   = 128  // calls in flight asked for: xprt_rdma_slot_table_entries
	DefaultMaxInline = 4096 // bytes inline each way: xprt_rdma_max_inline_read and _write
	// DefaultChunkBuffers is how many chunk buffers, of the largest READ
	// or WRITE each, a transport registers at most: READ data lands in
	// them and write-behind fills them.
	DefaultChunkBuffers = 128
)

// Reconnect backoff, as the Linux client's: after a failed attempt (or a
// connection that failed before any reply) the next waits 5 s, doubling
// to 30 s while attempts fail.
const (
	initialBackoff = 5 * time.Second
	maxBackoff     = 30 * time.Second
)

// payloadReserve is how many chunk buffers PayloadBuffer leaves for calls
// (READ data must have one).
const payloadReserve = 16

// Transport is the RPC-over-RDMA client transport.
type Transport struct {
	cfg    Config
	small  *rpcrdma.Arena // Sends and Receives
	chunks *rpcrdma.Arena // chunk buffers

	conns sunrpc.Redialer[*endpoint]

	mu     sync.Mutex
	logged map[string]bool

	epsMu sync.Mutex
	eps   []*endpoint // connections whose registrations follow the arenas' slabs

	reserved reservedSlabs // the chunk arena's slabs of ReserveReplyBuffers

	stats stats
}

var (
	_ sunrpc.Transport      = (*Transport)(nil)
	_ sunrpc.PayloadBuffers = (*Transport)(nil)
	_ sunrpc.ReplyBuffers   = (*Transport)(nil)
)

// New returns a transport to cfg.Addr; it connects on first use.
func New(cfg Config) (*Transport, error) {
	if cfg.Provider == nil {
		return nil, errors.New("xprtrdma: no verbs provider")
	}
	if cfg.Credits <= 0 {
		cfg.Credits = DefaultCredits
	}
	if cfg.MaxInlineRead <= 0 {
		cfg.MaxInlineRead = DefaultMaxInline
	}
	if cfg.MaxInlineWrite <= 0 {
		cfg.MaxInlineWrite = DefaultMaxInline
	}
	if cfg.MaxIO <= 0 {
		cfg.MaxIO = 1 << 20
	}
	if cfg.ChunkBuffers <= 0 {
		cfg.ChunkBuffers = DefaultChunkBuffers
	}
	cfg.ChunkBuffers = max(cfg.ChunkBuffers, payloadReserve+4)
	if cfg.ConnectTimeout <= 0 {
		cfg.ConnectTimeout = 10 * time.Second
	}
	if cfg.IdleTimeout <= 0 {
		cfg.IdleTimeout = 5 * time.Minute
	}
	t := &Transport{cfg: cfg, logged: make(map[string]bool)}
	t.conns = sunrpc.Redialer[*endpoint]{MinBackoff: initialBackoff, MaxBackoff: maxBackoff,
		Dial: t.dialEndpoint, Alive: (*endpoint).alive, Hangup: func(ep *endpoint) { ep.fail(sunrpc.ErrClosed) }}
	if p, ok := cfg.Provider.(verbs.Prober); ok {
		// A caller waiting out the backoff notices the server's return.
		t.conns.Probe = func(ctx context.Context) bool { return p.Probe(ctx, cfg.Addr) == nil }
	}
	var err error
	hooks := slabHooks{t}
	// Sends and Receives: at most a Send and two Receives per credit (a
	// reply the caller still holds keeps its Receive buffer), and some
	// spare. They are registered as calls need them, so a slot table
	// larger than the device or the server's grant allows costs address
	// space only.
	inline := max(cfg.MaxInlineRead, cfg.MaxInlineWrite)
	n := 3*cfg.Credits + 16
	if t.small, err = rpcrdma.NewGrowingArena(n, inline, max(smallSlabBlocks, (n+maxSlabs-1)/maxSlabs), 1, shrinkAfter, hooks); err != nil {
		return nil, err
	}
	// Chunk buffers, a page multiple each so windows align, in slabs of
	// chunkSlabBytes; mapped beyond ChunkBuffers by maxReserved, for
	// ReserveReplyBuffers.
	blockSize := (cfg.MaxIO + 4095) &^ 4095
	if t.chunks, err = rpcrdma.NewGrowingArena(cfg.ChunkBuffers+maxReserved, blockSize, max(1, chunkSlabBytes/blockSize), 1, shrinkAfter, hooks); err != nil {
		t.small.Close()
		return nil, err
	}
	t.chunks.Limit(cfg.ChunkBuffers)
	return t, nil
}

// The transport's buffers grow by slabs, each one registration, as calls
// find none free, and shrink when the calls of a period (shrinkAfter) used
// fewer than are registered. An idle mount keeps one slab of each arena:
// 256 KiB of Send and Receive buffers at the default 4 KiB inline size,
// and 4 MiB of chunk buffers (four at the default 1 MiB rsize), which fit
// under the 8 MiB RLIMIT_MEMLOCK many systems default to. A step of 4 MiB
// is a registration per four 1 MiB calls in flight at most, made once
// while the load lasts: 32 steps to the 128 MiB of 128 chunk buffers.
const (
	chunkSlabBytes  = 4 << 20
	smallSlabBlocks = 64
	maxSlabs        = 128 // of the Send and Receive arena, whatever slot_table_entries
	// shrinkAfter: a slab unused for 5 to 10 s is retired. Long
	// enough that a steady load, or one with pauses of a few seconds,
	// keeps its buffers; short enough that a mount left idle gives
	// them back soon after.
	shrinkAfter = 5 * time.Second
)

// addEndpoint adds ep to the connections whose registrations follow the
// arenas' slabs.
func (t *Transport) addEndpoint(ep *endpoint) {
	t.epsMu.Lock()
	t.eps = append(t.eps, ep)
	t.epsMu.Unlock()
}

// removeEndpoint takes ep out of them, once it is released.
func (t *Transport) removeEndpoint(ep *endpoint) {
	t.epsMu.Lock()
	defer t.epsMu.Unlock()
	for i, e := range t.eps {
		if e == ep {
			t.eps = append(t.eps[:i], t.eps[i+1:]...)
			return
		}
	}
}

// RoundTrip implements sunrpc.Transport.
func (t *Transport) RoundTrip(ctx context.Context, call *sunrpc.Call) error {
	t.stats.Used(call.Started())
	// The try's deadline bounds the waits on the way out (a connection,
	// a credit, buffers); the waits that happen make their timers, so a
	// call that finds everything free makes none.
	deadline := call.Deadline()
	ep, err := t.conns.Get(ctx, deadline)
	if err != nil {
		return err
	}
	r, err := ep.credit(ctx, deadline)
	if err != nil {
		return err
	}
	t.stats.Inflight.Add(1)
	defer t.stats.Inflight.Add(-1)
	err = ep.send(ctx, deadline, r, call)
	if err != nil {
		if errors.Is(err, context.DeadlineExceeded) && ctx.Err() == nil {
			return sunrpc.ErrTimeout
		}
		return err
	}
	err = ep.await(ctx, call)
	if err != nil {
		switch {
		case errors.Is(err, sunrpc.ErrTimeout):
			// Never retransmit on the connection that lost the call.
			ep.fail(sunrpc.ErrTimeout)
		case errors.Is(err, sunrpc.ErrDisconnected):
			err = fmt.Errorf("xprtrdma: %s: %w: %v", t.cfg.Addr, sunrpc.ErrDisconnected, ep.cause())
		}
		if ep.placed(call) {
			ep.fence()
		}
		return err
	}
	return call.Reply.Err
}

// placeable reports whether call's reply payload can be placed in the
// caller's memory (Call.ReplyInto), and where that lies in the chunk
// arena: it must, for every strategy to expose it as it exposes a
// chunk buffer.
func (t *Transport) placeable(call *sunrpc.Call) (off int, ok bool) {
	if call.ReplyPayload <= 0 || len(call.ReplyInto) < call.ReplyPayload {
		return 0, false
	}
	return t.chunks.OffsetOf(call.ReplyInto[:call.ReplyPayload])
}

// placed reports whether call's reply payload comes by a write chunk in
// the caller's memory (plan).
func (ep *endpoint) placed(call *sunrpc.Call) bool {
	if call.ReplyPayload == 0 || call.ReplyPayload+replySlack <= ep.inlineRecv {
		return false
	}
	_, ok := ep.t.placeable(call)
	return ok
}

// fence returns once the server can no longer write into the memory of a
// call whose caller stops waiting for it: the caller's own (ReplyInto),
// which it reuses at once, unlike a chunk buffer, which the call holds
// until its reply or the connection's end. The server may still be
// writing, or write later, so the connection is dropped, as for a call
// that timed out, and the wait is for its queue pair to be in the error
// state. Calls in flight are sent again on the next connection. (The
// kernel client invalidates such a call's registrations before it lets
// the pages go, xprt_rdma_free; a server's write that comes later breaks
// the connection all the same.) Callers abandon calls only on a fatal
// signal or a soft mount's timeout.
func (ep *endpoint) fence() {
	ep.fail(errAbandonedPlacement)
	<-ep.fenced
}

// errAbandonedPlacement ends a connection on which a caller stopped
// waiting for a READ whose data the server would write into its memory.
var errAbandonedPlacement = errors.New("a READ placing its data in the caller's memory was abandoned")

// dialEndpoint makes a connection (the Redialer's Dial). A failed attempt
// wraps ErrConnect, except where retrying cannot help: no device, or a
// configuration the device refuses (ErrConfig).
func (t *Transport) dialEndpoint(ctx context.Context) (*endpoint, error) {
	ep, err := t.dial(ctx)
	if err != nil {
		if ctx.Err() != nil && !errors.Is(ctx.Err(), context.DeadlineExceeded) {
			return nil, ctx.Err()
		}
		if errors.Is(err, verbs.ErrNoDevice) || errors.Is(err, verbs.ErrNoProvider) {
			return nil, err
		}
		if errors.Is(err, ErrMemLock) {
			// Not the server's doing: the next attempt pins as much.
			return nil, fmt.Errorf("xprtrdma: %s: %w (%s)", t.cfg.Addr, err, MemLockHint())
		}
		var ve *verbs.VerbError
		if errors.As(err, &ve) && errors.Is(ve.Err, syscall.EINVAL) {
			return nil, fmt.Errorf("%w: %s: %w", ErrConfig, t.cfg.Addr, err)
		}
		return nil, fmt.Errorf("xprtrdma: %s: %w: %w", t.cfg.Addr, sunrpc.ErrConnect, err)
	}
	return ep, nil
}

// ErrConfig is wrapped by the error of a connection the device refused
// to set up as configured: trying again cannot help.
var ErrConfig = errors.New("xprtrdma: the device refuses the connection's configuration")

// Connect connects now, if there is no connection, and returns the
// attempt's error as it is: the mount uses it to say at once why a server
// cannot be reached, rather than retrying it as calls do.
func (t *Transport) Connect(ctx context.Context) error {
	_, err := t.conns.Get(ctx, time.Now().Add(t.cfg.ConnectTimeout))
	return err
}

// dropped learns that ep ended. A connection that carried replies is
// dialled again at once (the server restarted, a link flapped); one that
// failed before any reply, like a failed attempt, waits the reconnect
// backoff. An idle one is dialled when next needed.
func (t *Transport) dropped(ep *endpoint, err error) {
	idle := errors.Is(err, errIdle)
	t.conns.Drop(ep, !idle && !ep.worked.Load())
	if !idle && !errors.Is(err, sunrpc.ErrClosed) {
		t.logf("xprtrdma: %s: connection lost: %v; reconnecting in %v", t.cfg.Addr, err, t.conns.Backoff().Round(time.Second))
	}
}

// connected forgets the backoff once a connection carried a reply.
func (t *Transport) connected() { t.conns.Worked() }

// PayloadBuffer implements sunrpc.PayloadBuffers: a chunk buffer, which a
// WRITE sends from without copying, while enough are left for calls.
func (t *Transport) PayloadBuffer(n int) *sunrpc.Buffer {
	if n > t.chunks.BlockSize() || t.chunks.Len()-t.chunks.Out() <= payloadReserve {
		return nil
	}
	b := t.chunks.TryGetOrGrow()
	if b == nil {
		return nil
	}
	return b.Buffer(n)
}

// XprtStats implements sunrpc.Transport.
func (t *Transport) XprtStats() string { return t.stats.line() }

// Close implements sunrpc.Transport. The buffers stay mapped: replies a
// caller still holds point into them.
func (t *Transport) Close() error {
	if ep, ok := t.conns.Close(); ok {
		ep.fail(sunrpc.ErrClosed)
	}
	return nil
}

func (t *Transport) logf(format string, args ...any) {
	if t.cfg.Logf != nil {
		t.cfg.Logf(format, args...)
	}
}

// logOnce logs a message the first time only.
func (t *Transport) logOnce(format string, args ...any) {
	msg := fmt.Sprintf(format, args...)
	t.mu.Lock()
	seen := t.logged[msg]
	t.logged[msg] = true
	t.mu.Unlock()
	if !seen {
		t.logf("%s", msg)
	}
}
