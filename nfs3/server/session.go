package server

import (
	"errors"
	"net/netip"
	"runtime/debug"
	"sync"
	"sync/atomic"

	"github.com/rdmafs/rdmafs/nfs3"
	"github.com/rdmafs/rdmafs/sunrpc"
	"github.com/rdmafs/rdmafs/sunrpc/xdr"
)

// ErrClosed is returned by Serve after Close and by Session.Call after the
// session (or its server) closed.
var ErrClosed = errors.New("server: closed")

// A Session is one client connection's worth of RPC service, independent of
// the transport: the transport hands it whole call messages and gets whole
// reply messages back through send. Serve runs one Session per TCP
// connection; an RPC-over-RDMA listener can run one per RDMA connection.
//
// Calls of one Session are served in parallel, by up to Options.Workers
// workers, and their replies may go out in any order.
type Session struct {
	srv  *Server
	send func(reply []byte, p Placement) error
	peer peer

	sendMu sync.Mutex
	closed atomic.Bool
	quit   chan struct{}
	once   sync.Once
	// inService counts calls handed to workers and not yet answered: a
	// connection with calls in service is not idle.
	inService atomic.Int32

	idle     chan *worker
	mu       sync.Mutex
	workers  []*worker // alive, idle or busy
	stopping bool      // no more workers may start
	wg       sync.WaitGroup
}

// peer is what the transport knows of the client: whether the export lets
// it in, whether it called from a reserved port, and the server address it
// reached (for MOUNT EXPORT's client list).
type peer struct {
	allowed, secure bool
	remote, local   netip.Addr
}

// call is one call on its way through a worker.
type call struct {
	rpc  *rpcCall
	args *nfsArgs
	buf  *[]byte // the pooled buffer of the call's record
	held int     // bytes of the server's record budget the call holds
}

// Placement says where a reply's result that may be placed directly lies
// (RFC 8267: READ data): Len bytes at Off in the reply, then their XDR pad.
// Len is 0 for a reply with none.
type Placement struct {
	Off, Len int
}

// NewSession starts a session whose replies go to send. send is never
// called concurrently for one Session, and never after Close returned; it
// should fail rather than block forever once the transport is going away
// (Close waits for a send in progress). The reply is the session's again
// when send returns.
//
// The transport vouches for the client: it must have checked AllowsClient
// for the client's address, and the calls count as coming from a secure
// port (as RPC-over-RDMA calls do; see Export.Insecure).
func (s *Server) NewSession(send func(reply []byte) error) *Session {
	return s.NewPlacingSession(func(reply []byte, _ Placement) error { return send(reply) })
}

// NewPlacingSession is NewSession for a transport that places READ data
// directly (RPC-over-RDMA): send also learns where the data lies.
func (s *Server) NewPlacingSession(send func(reply []byte, p Placement) error) *Session {
	return s.newSession(send, peer{allowed: true, secure: true})
}

func (s *Server) newSession(send func(reply []byte, p Placement) error, p peer) *Session {
	ss := &Session{
		srv:  s,
		send: send,
		peer: p,
		quit: make(chan struct{}),
		idle: make(chan *worker, s.opts.Workers),
	}
	if !s.addSession(ss) {
		ss.Close()
	}
	return ss
}

// Call serves one RPC call message (without record mark). Its reply goes to
// send, later, possibly after replies to later calls. Call copies msg and
// may block until a worker is free, which gives a transport natural flow
// control.
//
// An error means the message was not an RPC call at all (the transport
// should drop the connection, its stream can no longer be trusted), or the
// session is closed. Every other problem is answered with an RPC or NFS
// error reply.
func (ss *Session) Call(msg []byte) error {
	bp := recordPool.Get().(*[]byte)
	record := append((*bp)[:0], 0, 0, 0, 0)
	putMark(record, len(msg))
	*bp = append(record, msg...)
	return ss.callRecord(bp, 0)
}

// recordPool holds call records (record mark and message) between calls:
// a session serves a call from its record and gives it back once the call
// is answered, so large WRITEs are neither copied again nor collected.
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

// callRecord serves the call in the record *bp, which it owns from now on,
// with held bytes of the server's record budget, which it releases once
// the call is answered.
func (ss *Session) callRecord(bp *[]byte, held int) error {
	done := true
	defer func() {
		if done {
			putRecord(bp)
			ss.srv.receiving.release(held)
		}
	}()
	if ss.closed.Load() {
		return ErrClosed
	}
	record := *bp
	c, refusal, err := parseCall(record[4:])
	switch {
	case err != nil:
		return err
	case refusal != nil:
		ss.reply(refusal)
		return nil
	}
	if r := ss.admission(c); r != nil {
		ss.reply(r)
		return nil
	}
	c.cred = ss.srv.opts.Export.squash(c.cred)
	if r := ss.inlineReply(c); r != nil {
		ss.reply(r)
		return nil
	}
	args, ok := decodeArgs(c.prog, c.proc, c.args)
	if !ok {
		ss.reply(garbageArgs(c.xid))
		return nil
	}
	if c.prog == nfs3.MountProgram {
		ss.reply(ss.srv.mountReply(c.xid, args.dirpath))
		return nil
	}
	if st := args.frontStatus(c.proc); st != nfs3.OK {
		ss.reply(nfsErrorReply(c.xid, c.proc, st))
		return nil
	}
	w := ss.worker()
	if w == nil {
		return ErrClosed
	}
	done = false // the worker gives the record back
	ss.inService.Add(1)
	w.work <- &call{rpc: c, args: args, buf: bp, held: held}
	return nil
}

// admission refuses what the export does not let this client do, as knfsd
// and mountd do: a client not in the export's list gets no MOUNT
// (MNT3ERR_ACCES) and no NFS service (AUTH_ERROR, AUTH_TOOWEAK); a call from
// an unreserved port on a "secure" export gets MNT3ERR_ACCES or NFS3ERR_PERM.
// NULL, and the MOUNT procedures that only describe the server, are
// answered to anyone. It returns nil for a call the client may make.
func (ss *Session) admission(c *rpcCall) []byte {
	if c.proc == 0 {
		return nil
	}
	if c.prog == nfs3.MountProgram {
		if c.proc != nfs3.MountProcMnt || ss.peer.allowed && (ss.peer.secure || ss.srv.opts.Export.Insecure) {
			return nil
		}
		ss.srv.logf("server: refused MOUNT from %s: %s", ss.peerString(), ss.refusal())
		return mountStatusReply(c.xid, nfs3.MountErrAcces)
	}
	switch {
	case !ss.peer.allowed:
		return deniedReply(c.xid, sunrpc.RejectAuthError, sunrpc.AuthTooWeak)
	case !ss.peer.secure && !ss.srv.opts.Export.Insecure:
		return nfsErrorReply(c.xid, c.proc, nfs3.ErrPerm)
	}
	return nil
}

func (ss *Session) refusal() string {
	if !ss.peer.allowed {
		return "not in the export's clients"
	}
	return "unreserved source port (the export is secure; the client needs resvport, or serve -o insecure)"
}

func (ss *Session) peerString() string {
	if ss.peer.remote.IsValid() {
		return ss.peer.remote.String()
	}
	return "a client"
}

// reply sends one reply unless the session is closed.
func (ss *Session) reply(r []byte) { ss.replyPlaced(r, Placement{}) }

// replyPlaced sends a reply whose READ data lies at p.
func (ss *Session) replyPlaced(r []byte, p Placement) {
	ss.sendMu.Lock()
	defer ss.sendMu.Unlock()
	if ss.closed.Load() {
		return
	}
	if err := ss.send(r, p); err != nil {
		ss.srv.logf("server: send reply: %v", err)
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
		w := &worker{ss: ss, srv: ss.srv, work: make(chan *call, 1)}
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
	// record and reservation go back.
	ss.mu.Lock()
	for _, w := range ss.workers {
		select {
		case c := <-w.work:
			w.done(c)
		default:
		}
	}
	ss.mu.Unlock()
	ss.srv.removeSession(ss)
}

// worker serves calls one at a time.
type worker struct {
	ss   *Session
	srv  *Server
	work chan *call
	cur  *call // the call being served
	// afterReply, if set by answer, runs once the reply has been sent:
	// it gives back the buffer the reply was built in.
	afterReply func()
	// placement, set by answer, is where the reply's READ data lies.
	placement Placement
}

func (w *worker) run() {
	defer w.ss.wg.Done()
	for {
		select {
		case c := <-w.work:
			w.serve(c)
			w.done(c)
			w.ss.idle <- w
		case <-w.ss.quit:
			return
		}
	}
}

// done gives back what a call held: its record and its reservation.
func (w *worker) done(c *call) {
	putRecord(c.buf)
	w.srv.receiving.release(c.held)
	w.ss.inService.Add(-1)
}

// serve answers one call. A panic while answering (a bug) is logged and
// answered SYSTEM_ERR: one bad call must not take down the server.
func (w *worker) serve(c *call) {
	srv := w.srv
	w.placement = Placement{}
	reply := func() (reply []byte) {
		defer func() {
			if r := recover(); r != nil {
				srv.logf("server: serving %v: panic: %v\n%s", c.rpc, r, debug.Stack())
				reply = acceptedReply(c.rpc.xid, sunrpc.SystemErr)
				w.placement = Placement{}
			}
		}()
		if srv.testHook != nil {
			srv.testHook(w, c)
		}
		return w.answer(c)
	}()
	w.ss.replyPlaced(reply, w.placement)
	if w.afterReply != nil {
		w.afterReply()
		w.afterReply = nil
	}
}
