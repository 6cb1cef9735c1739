package sunrpc

import (
	"context"
	"errors"
	"time"
)

// Transport carries RPC calls to one server over one connection at a time.
// Implementations must be safe for concurrent use. One that takes replies
// on a reader of its own keeps each connection's calls in flight in a
// Pending, which fills in call.Reply.
type Transport interface {
	// RoundTrip sends call on the current connection, connecting first if
	// there is none, and waits until its reply is in call.Reply. If the
	// connection is lost first, it returns an error wrapping ErrDisconnected
	// and the caller may resend call, with the same xid, on the next one.
	// If ctx's deadline passes first, the connection the call went out on
	// is dropped (a call is never retransmitted on the connection that lost
	// it) and the deadline error is returned; cancelling ctx only abandons
	// the call.
	RoundTrip(ctx context.Context, call *Call) error

	// XprtStats returns the transport's counters as the "xprt:" line of
	// /proc/self/mountstats, without the "xprt:" prefix.
	XprtStats() string

	// Close drops the connection and makes every RoundTrip fail.
	Close() error
}

// ErrDisconnected is wrapped by the error of a call whose connection was
// lost before its reply came.
var ErrDisconnected = errors.New("sunrpc: connection lost")

// ErrConnect is wrapped by the error of a call that found no connection:
// the server refused or did not answer the connection attempt in time.
var ErrConnect = errors.New("sunrpc: cannot connect")

// ErrClosed is the error of a call on a closed Client or Transport.
var ErrClosed = errors.New("sunrpc: transport closed")

// Call is one RPC call message and, once it has returned, its reply.
// A Call is owned by one goroutine at a time and is reused through Release.
type Call struct {
	Xid  uint32
	Proc uint32

	// Head is the RPC header and the arguments up to the payload, or all of
	// them when there is no payload.
	Head []byte
	// Payload is the argument a transport may move by direct data placement
	// (WRITE data, a SYMLINK path). It is sent after Head and followed by
	// its XDR pad and then by Tail. It is not copied by the Client.
	Payload []byte
	Tail    []byte

	// ReplyPayload is the size of the largest result the reply may carry
	// that a transport may place directly (READ data, a READLINK path); 0
	// when the reply has none.
	ReplyPayload int
	// ReplyInto, when it is not nil, is where the caller wants that
	// result (at least ReplyPayload bytes). A transport that can place
	// the result there directly (RPC-over-RDMA, when ReplyInto lies in
	// memory it handed out) makes Reply.Payload a prefix of it; one that
	// cannot ignores it. Once RoundTrip has returned, whatever its
	// error, the transport writes ReplyInto no more.
	ReplyInto []byte
	// ReplyMax bounds the size of the whole reply when it may be larger
	// than an ordinary small reply (READDIRPLUS); 0 otherwise.
	ReplyMax int

	// Reply is filled in by the Transport.
	Reply Reply

	// Retransmits counts how often the call was sent again after a
	// timeout or a lost connection.
	Retransmits int

	// SentAt is when a transport last put the call on the wire.
	SentAt time.Time

	client  *Client
	done    chan struct{} // signalled by Pending.Deliver
	started time.Time     // when this try began
	timeout time.Duration
	timer   *time.Timer // Pending.Wait's
}

// Started is when Client.Do began this try. A transport takes its times
// from it rather than read the clock again: where the clock is slow to
// read (an emulated machine), each read is a measurable part of a call.
func (c *Call) Started() time.Time { return c.started }

// Deadline bounds this try's waits on the way out (a connection, a slot
// or credit, buffers): the try's timeout after it began. Pending.Wait then
// waits for the reply as long again.
func (c *Call) Deadline() time.Time { return c.started.Add(c.timeout) }

// Reply is the reply to a call.
type Reply struct {
	// Msg is the whole reply message (for RPC-over-RDMA, its inline part or
	// the contents of its reply chunk), beginning with the xid.
	Msg []byte
	// Payload is a result the transport placed apart from Msg (READ data
	// that the server wrote into a write chunk); nil when every result is
	// in Msg.
	Payload []byte
	// Body is the procedure's results: Msg after the RPC reply header.
	// The Client sets it.
	Body []byte
	// Err, set by a transport, says the reply could not be taken (it
	// broke the transport's protocol); the call fails with it.
	Err error

	buf Releaser // the memory Msg and Payload lie in (Pending.Deliver)
}

// Releaser gives a transport's buffer back to it.
type Releaser interface {
	Release()
}

func (r *Reply) release() {
	if r.buf != nil {
		r.buf.Release()
	}
	*r = Reply{}
}
