package sunrpc

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rdmafs/rdmafs/sunrpc/xdr"
)

// ErrTimeout is wrapped by the error of a call that got no reply in time:
// one try's error inside the Client, and the call's error on a soft mount
// unless no connection could be made (ErrConnect).
var ErrTimeout = errors.New("sunrpc: timed out")

// MaxTimeout caps the growing per-try timeout, as the Linux client caps it.
const MaxTimeout = 600 * time.Second

// Config is the call policy of a Client.
type Config struct {
	Prog, Vers uint32
	Auth       Auth
	// Timeout is the first try's wait for a reply (nfs(5) timeo); each
	// further try waits Timeout longer, up to MaxTimeout.
	Timeout time.Duration
	// Retrans is how many times a call is sent again before a major timeout
	// (nfs(5) retrans).
	Retrans int
	// Soft makes a call fail with ErrTimeout at a major timeout; otherwise
	// (hard) it is retried until it gets a reply or its context ends.
	Soft bool
	// Server names the server in log messages.
	Server string
	// ProcNames names the procedures in statistics; index = procedure.
	ProcNames []string
	// Logf receives the "not responding" and "OK" messages of a hard mount.
	Logf func(format string, args ...any)
}

// Client calls one program and version of one server through a Transport.
// It is safe for concurrent use.
type Client struct {
	cfg   Config
	t     Transport
	xid   *atomic.Uint32 // shared with its siblings (Sibling)
	pool  sync.Pool
	stats []OpStats

	mu            sync.Mutex
	notResponding bool
	closed        atomic.Bool
}

// NewClient returns a Client that sends its calls through t.
func NewClient(t Transport, cfg Config) *Client {
	var seed [4]byte
	_, _ = rand.Read(seed[:])
	xid := new(atomic.Uint32)
	xid.Store(binary.BigEndian.Uint32(seed[:]))
	return newClient(t, cfg, xid)
}

// Sibling returns a Client of another program and version (cfg) on c's
// transport, as the Linux client calls NFSACL on its NFS connection. The
// two take their xids from one sequence, so that no two calls in flight on
// the transport ever share one. Closing either closes the transport.
func (c *Client) Sibling(cfg Config) *Client { return newClient(c.t, cfg, c.xid) }

func newClient(t Transport, cfg Config, xid *atomic.Uint32) *Client {
	if cfg.Timeout <= 0 {
		cfg.Timeout = 60 * time.Second
	}
	c := &Client{cfg: cfg, t: t, xid: xid, stats: make([]OpStats, max(len(cfg.ProcNames), 1))}
	c.pool.New = func() any {
		return &Call{Head: make([]byte, 0, 512), done: make(chan struct{}, 1), client: c}
	}
	return c
}

// Transport returns the client's transport.
func (c *Client) Transport() Transport { return c.t }

// NewCall returns a call of procedure proc for cred (nil: AUTH_NONE) whose
// Head holds the RPC header; append the arguments to it with Args.
func (c *Client) NewCall(proc uint32, cred *Cred) *Call {
	call := c.pool.Get().(*Call)
	call.Xid = c.xid.Add(1)
	call.Proc = proc
	e := xdr.Encoder{Buf: call.Head[:0]}
	appendCallHeader(&e, call.Xid, c.cfg.Prog, c.cfg.Vers, proc, &c.cfg.Auth, cred)
	call.Head = e.Buf
	return call
}

// Args returns an encoder that appends to the call's Head. Store its Buf
// back into Head when done (see SetArgs).
func (call *Call) Args() xdr.Encoder { return xdr.Encoder{Buf: call.Head} }

// SetArgs stores the encoder's buffer as the call's Head.
func (call *Call) SetArgs(e xdr.Encoder) { call.Head = e.Buf }

// Reissue makes call a new call with the same arguments: it gets a new xid
// and its reply is released. A server that answers "try again later"
// (NFS3ERR_JUKEBOX) expects that rather than a retransmission.
func (c *Client) Reissue(call *Call) {
	call.Reply.release()
	call.Xid = c.xid.Add(1)
	binary.BigEndian.PutUint32(call.Head, call.Xid)
	call.Retransmits = 0
}

// Release gives the call and its reply buffer back for reuse. Nothing of
// the call or its reply may be used afterwards.
func (call *Call) Release() {
	c := call.client
	call.Reply.release()
	if cap(call.Head) > 64<<10 {
		call.Head = make([]byte, 0, 512)
	}
	*call = Call{Head: call.Head[:0], done: call.done, timer: call.timer, client: c}
	c.pool.Put(call)
}

// Do sends the call and waits for its reply. On success call.Reply.Body
// holds the procedure's results; the caller must Release the call either
// way. The error is the context's when ctx ends first, wraps ErrTimeout for
// a soft mount's major timeout, and is an *AcceptError or *DeniedError when
// the server refused the call.
func (c *Client) Do(ctx context.Context, call *Call) error {
	if c.closed.Load() {
		return ErrClosed
	}
	st := c.opStats(call.Proc)
	start := time.Now()
	timeout := c.cfg.Timeout
	tries := 0
	for sends := 0; ; sends++ {
		call.started = start
		if sends > 0 {
			call.started = time.Now()
		}
		call.timeout = timeout
		err := c.t.RoundTrip(ctx, call)
		if err == nil {
			break
		}
		if ctxErr := ctx.Err(); ctxErr != nil {
			st.record(call, start, ctxErr)
			return ctxErr
		}
		if c.closed.Load() || errors.Is(err, ErrClosed) {
			st.record(call, start, err)
			return ErrClosed
		}
		timedOut := errors.Is(err, ErrTimeout)
		if !timedOut && !errors.Is(err, ErrDisconnected) && !errors.Is(err, ErrConnect) {
			st.record(call, start, err)
			return err
		}
		call.Retransmits++
		if timedOut {
			st.Timeouts.Add(1)
		}
		if !timedOut && errors.Is(err, ErrDisconnected) {
			// The connection went away under the call: resend it on the
			// next one without counting a try, as it was not the server
			// that was slow.
			continue
		}
		tries++
		if tries > c.cfg.Retrans {
			if c.cfg.Soft {
				if errors.Is(err, ErrConnect) {
					err = fmt.Errorf("%w (server %s)", err, c.cfg.Server)
				} else {
					err = fmt.Errorf("%w: no reply from server %s after %d tries", err, c.cfg.Server, tries)
				}
				st.record(call, start, err)
				return err
			}
			c.setNotResponding(true, err)
			tries = 0
		}
		timeout = min(timeout+c.cfg.Timeout, MaxTimeout)
	}
	c.setNotResponding(false, nil)
	if err := call.Reply.Err; err != nil {
		st.record(call, start, err)
		return err
	}
	off, err := parseReplyHeader(call.Reply.Msg, call.Xid)
	if err != nil {
		st.record(call, start, err)
		return err
	}
	call.Reply.Body = call.Reply.Msg[off:]
	st.record(call, start, nil)
	return nil
}

// NotResponding reports whether the server is silent: a call has gone a
// major timeout (Retrans+1 tries) without a reply, and no reply has come
// since. Only a hard mount's calls get that far.
func (c *Client) NotResponding() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.notResponding
}

// setNotResponding logs the change of a hard mount's server state once.
func (c *Client) setNotResponding(down bool, err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.notResponding == down {
		return
	}
	c.notResponding = down
	if c.cfg.Logf == nil {
		return
	}
	if down {
		c.cfg.Logf("server %s not responding, still trying (%v)", c.cfg.Server, err)
	} else {
		c.cfg.Logf("server %s OK", c.cfg.Server)
	}
}

// Close closes the transport; calls under way and later fail with ErrClosed.
func (c *Client) Close() error {
	c.closed.Store(true)
	return c.t.Close()
}
