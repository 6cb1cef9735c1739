package sunrpc

import (
	"runtime/debug"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rdmafs/rdmafs/sunrpc/xdr"
)

// SendFunc takes a reply of a Session: the whole reply message, and where
// in it lies a result the transport may place directly. The reply is the
// session's again when SendFunc returns.
type SendFunc func(reply []byte, p Placement) error

// A Session is one client connection's worth of RPC service, independent
// of the transport: the transport hands it whole call messages and gets
// whole reply messages back through its SendFunc. Serve runs one Session
// per TCP connection; an RPC-over-RDMA listener (svcrdma) runs one per
// RDMA connection.
//
// Calls of one Session are served in parallel, by up to
// ServerConfig.Workers workers, and their replies may go out in any order.
type Session struct {
	srv  *Server
	send SendFunc
	peer Peer

	sendMu sync.Mutex
	closed atomic.Bool
	quit   chan struct{}
	once   sync.Once
	// inService counts calls handed to workers and not yet answered: a
	// connection with calls in service is not idle.
	inService atomic.Int32
	// lastActive is when the transport last handed the session a call
	// (unix nanoseconds): the least recently active goes first when
	// MaxConns are served.
	lastActive atomic.Int64

	idle     chan *worker
	mu       sync.Mutex
	workers  []*worker // alive, idle or busy
	stopping bool      // no more workers may start
	wg       sync.WaitGroup
}

// NewSession starts a session whose replies go to send, for a client the
// transport describes as peer: a transport that makes its own sessions
// vouches for the client (it has asked ServerConfig.Admit, or a check of
// its own, and sets Peer.Admitted). send is never called concurrently for
// one Session, and never after Close returned; it should fail rather than
// block forever once the transport is going away (Close waits for a send
// in progress).
//
// The session counts as a connection under ServerConfig.MaxConns: the
// server may end it (Done) to make room for another.
func (s *Server) NewSession(send SendFunc, peer Peer) *Session {
	return s.newSession(send, peer, true)
}

// newSession starts a session; a transport's (not one of Serve's TCP
// connections, which count themselves) counts as a connection.
func (s *Server) newSession(send SendFunc, peer Peer, transport bool) *Session {
	ss := &Session{
		srv:  s,
		send: send,
		peer: peer,
		quit: make(chan struct{}),
		idle: make(chan *worker, s.cfg.Workers),
	}
	ss.lastActive.Store(time.Now().UnixNano())
	if !s.addSession(ss, transport) {
		ss.Close()
	}
	return ss
}

// Done is closed when the session is: by its transport, or by the server
// to make room for another connection (MaxConns), after which the
// transport should end its connection.
func (ss *Session) Done() <-chan struct{} { return ss.quit }

// Call serves one RPC call message (without record mark). Its reply goes
// to send, later, possibly after replies to later calls. Call copies msg
// and may block until a worker is free, which gives a transport natural
// flow control.
//
// An error means the message was not an RPC call at all (the transport
// should drop the connection, its stream can no longer be trusted), or
// the session is closed (ErrServerClosed). Every other problem is answered
// with an RPC or a program's error reply.
func (ss *Session) Call(msg []byte) error {
	ss.lastActive.Store(time.Now().UnixNano())
	bp := recordPool.Get().(*[]byte)
	*bp = append((*bp)[:0], msg...)
	return ss.callRecord(bp, 0)
}

// CallInPlace is Call without the copy, for a transport that receives
// calls into buffers of its own (RPC-over-RDMA): the session serves msg
// where it lies and calls done once it no longer needs it (the call is
// answered or dropped), whatever CallInPlace returns.
func (ss *Session) CallInPlace(msg []byte, done func()) error {
	ss.lastActive.Store(time.Now().UnixNano())
	// Scrubbed as pooled records are (putRecord), before the transport
	// has its buffer back.
	return ss.serve(msg, nil, func() { xdr.Scrub(msg); done() }, 0)
}

// recordPool holds call messages between calls: a session serves a call
// from its message and gives it back once the call is answered, so large
// WRITEs are neither copied again nor collected.
var recordPool = sync.Pool{New: func() any {
	b := make([]byte, 0, 64<<10)
	return &b
}}

// putRecord gives a call record back to recordPool; built with the
// rdmafs_scrub tag, it overwrites the record first (xdr.Scrub), so a view
// of the call's arguments kept past the call reads garbage.
func putRecord(bp *[]byte) {
	xdr.Scrub(*bp)
	recordPool.Put(bp)
}

// callRecord serves the call message in *bp, which it owns from now on,
// with held bytes of the server's record budget, which it releases once
// the call is answered.
func (ss *Session) callRecord(bp *[]byte, held int) error {
	return ss.serve(*bp, bp, nil, held)
}

// serve serves the call msg, which lies in the pooled buffer *bp or, if
// bp is nil, in a transport's buffer that release gives back, with held
// bytes of the server's record budget; it gives both back once the call
// is answered.
func (ss *Session) serve(msg []byte, bp *[]byte, release func(), held int) error {
	done := true
	defer func() {
		if done {
			giveBack(bp, release)
			ss.srv.receiving.release(ss.peer.Remote.Addr(), held)
		}
	}()
	if ss.closed.Load() {
		return ErrServerClosed
	}
	r := &Request{Peer: &ss.peer}
	refusal, err := parseCall(msg, r)
	switch {
	case err != nil:
		return err
	case refusal != nil:
		ss.reply(refusal)
		return nil
	}
	proc, refusal := ss.srv.lookup(r)
	if refusal != nil {
		ss.reply(refusal)
		return nil
	}
	if proc.Front != nil {
		if reply := proc.Front(r); reply != nil {
			ss.reply(reply)
			return nil
		}
	}
	if proc.Serve == nil {
		ss.srv.logf("sunrpc: %v: no reply from the procedure's front and nothing to serve it", r)
		ss.reply(AcceptedReply(r.Xid, SystemErr))
		return nil
	}
	w := ss.worker()
	if w == nil {
		return ErrServerClosed
	}
	done = false // the worker gives the message back
	r.buf, r.release, r.held = bp, release, held
	ss.inService.Add(1)
	w.work <- serving{r, proc}
	return nil
}

// reply sends one reply unless the session is closed.
func (ss *Session) reply(r []byte) { ss.replyPlaced(r, Placement{}) }

// replyPlaced sends a reply whose directly placed result lies at p.
func (ss *Session) replyPlaced(r []byte, p Placement) {
	ss.sendMu.Lock()
	defer ss.sendMu.Unlock()
	if ss.closed.Load() {
		return
	}
	if err := ss.send(r, p); err != nil {
		ss.srv.logf("sunrpc: send reply: %v", err)
	}
}

// worker returns an idle worker, starting one if fewer than Workers run,
// else waiting for one; nil when the session closes.
func (ss *Session) worker() *worker {
	select {
	case w := <-ss.idle:
		return w
	default:
	}
	ss.mu.Lock()
	if ss.stopping {
		ss.mu.Unlock()
		return nil
	}
	if len(ss.workers) < cap(ss.idle) {
		w := &worker{ss: ss, work: make(chan serving, 1)}
		ss.workers = append(ss.workers, w)
		// Counted under mu, so Close's Wait cannot miss it.
		ss.wg.Add(1)
		ss.mu.Unlock()
		go w.run()
		return w
	}
	ss.mu.Unlock()
	select {
	case w := <-ss.idle:
		return w
	case <-ss.quit:
		return nil
	}
}

// Close stops the session: calls not yet answered get no reply. It waits
// for the calls in service to finish, and is safe to call more than once.
func (ss *Session) Close() {
	ss.once.Do(func() {
		ss.sendMu.Lock()
		ss.closed.Store(true)
		ss.sendMu.Unlock()
		ss.mu.Lock()
		ss.stopping = true
		ss.mu.Unlock()
		close(ss.quit)
	})
	ss.wg.Wait()
	// A call handed to a worker that stopped first is dropped here, so its
	// message and reservation go back.
	ss.mu.Lock()
	for _, w := range ss.workers {
		select {
		case c := <-w.work:
			w.done(c.r)
		default:
		}
	}
	ss.mu.Unlock()
	ss.srv.removeSession(ss)
}

// serving is a call handed to a worker, with its procedure.
type serving struct {
	r    *Request
	proc *Proc
}

// worker serves calls one at a time.
type worker struct {
	ss   *Session
	work chan serving
}

func (w *worker) run() {
	defer w.ss.wg.Done()
	for {
		select {
		case c := <-w.work:
			w.serve(c.r, c.proc)
			w.done(c.r)
			w.ss.idle <- w
		case <-w.ss.quit:
			return
		}
	}
}

// giveBack gives back a call's message: a pooled buffer, or a transport's.
func giveBack(bp *[]byte, release func()) {
	if bp != nil {
		putRecord(bp)
	}
	if release != nil {
		release()
	}
}

// done gives back what a call held: its message and its reservation.
func (w *worker) done(r *Request) {
	giveBack(r.buf, r.release)
	w.ss.srv.receiving.release(w.ss.peer.Remote.Addr(), r.held)
	w.ss.inService.Add(-1)
}

// serve answers one call. A panic while answering (a bug) is logged and
// answered SYSTEM_ERR: one bad call must not take down the server.
func (w *worker) serve(r *Request, proc *Proc) {
	srv := w.ss.srv
	r.Placement = Placement{}
	reply := func() (reply []byte) {
		defer func() {
			if p := recover(); p != nil {
				srv.logf("sunrpc: serving %v: panic: %v\n%s", r, p, debug.Stack())
				reply = AcceptedReply(r.Xid, SystemErr)
				r.Placement = Placement{}
			}
		}()
		return proc.Serve(r)
	}()
	w.ss.replyPlaced(reply, r.Placement)
	if r.AfterReply != nil {
		r.AfterReply()
		r.AfterReply = nil
	}
}
