package server

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"time"

	nfs "github.com/willscott/go-nfs"
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

	sendMu sync.Mutex
	closed atomic.Bool
	quit   chan struct{}
	once   sync.Once

	idle     chan *worker
	mu       sync.Mutex
	workers  int  // alive, idle or busy
	stopping bool // no more workers may start
	wg       sync.WaitGroup
}

// call is one call on its way through a worker.
type call struct {
	rpc     *rpcCall
	args    *nfsArgs
	record  []byte  // record mark + message, what go-nfs reads
	buf     *[]byte // the pooled buffer of record
	fsErr   error   // outcome of the call's latest filesystem operation
	existed bool    // CREATE found the file already there
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
func (s *Server) NewSession(send func(reply []byte) error) *Session {
	return s.NewPlacingSession(func(reply []byte, _ Placement) error { return send(reply) })
}

// NewPlacingSession is NewSession for a transport that places READ data
// directly (RPC-over-RDMA): send also learns where the data lies.
func (s *Server) NewPlacingSession(send func(reply []byte, p Placement) error) *Session {
	ss := &Session{
		srv:  s,
		send: send,
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
	return ss.callRecord(bp)
}

// recordPool holds call records (record mark and message) between calls:
// a session serves a call from its record and gives it back once the call
// is answered, so large WRITEs are neither copied again nor collected.
var recordPool = sync.Pool{New: func() any {
	b := make([]byte, 0, 64<<10)
	return &b
}}

// callRecord serves the call in the record *bp, which it owns from now on.
func (ss *Session) callRecord(bp *[]byte) error {
	done := true
	defer func() {
		if done {
			recordPool.Put(bp)
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
	if r := inlineReply(c); r != nil {
		ss.reply(r)
		return nil
	}
	args, ok := decodeArgs(c.prog, c.proc, c.args)
	if !ok {
		ss.reply(garbageArgs(c.xid))
		return nil
	}
	if c.prog == progMount {
		ss.reply(mountReply(c.xid, args.dirpath, ss.srv.rootHandle))
		return nil
	}
	if st := args.frontStatus(c.proc); st != nfs3OK {
		ss.reply(nfsErrorReply(c.xid, c.proc, st))
		return nil
	}
	args.clamp(c.args)
	w := ss.worker()
	if w == nil {
		return ErrClosed
	}
	done = false // the worker gives the record back
	w.work <- &call{rpc: c, args: args, record: record, buf: bp}
	return nil
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
	if ss.workers < cap(ss.idle) {
		ss.workers++
		// Counted under mu, so Close's Wait cannot miss it.
		ss.wg.Add(2)
		ss.mu.Unlock()
		return ss.startWorker()
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
// for the session's workers, including go-nfs's goroutines (for at most
// stopTimeout each, see worker.stop), and is safe to call more than once.
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
	ss.srv.removeSession(ss)
}

// worker serves calls one at a time: the front-answered procedures itself,
// the rest through its own go-nfs server and connection.
type worker struct {
	ss   *Session
	fs   *billyFS
	conn *pipeConn
	work chan *call
	// afterReply, if set by answer, runs once the reply has been sent:
	// it gives back the buffer the reply was built in.
	afterReply func()
	// placement, set by answer, is where the reply's READ data lies.
	placement Placement
}

func (ss *Session) startWorker() *worker {
	fs := &billyFS{srv: ss.srv}
	w := &worker{ss: ss, fs: fs, conn: newPipeConn(), work: make(chan *call, 1)}
	gonfs := &nfs.Server{
		Handler: &handler{srv: ss.srv, fs: fs},
		ID:      ss.srv.verifier,
		Context: context.Background(),
	}
	go func() {
		defer ss.wg.Done()
		gonfs.Serve(&pipeListener{conn: w.conn})
	}()
	go w.run()
	return w
}

func (w *worker) run() {
	defer w.ss.wg.Done()
	for {
		select {
		case c := <-w.work:
			if !w.serve(c) {
				// The dead go-nfs goroutine may still be reading
				// the record: its buffer goes to the collector,
				// not back to the pool.
				w.retire()
				return
			}
			recordPool.Put(c.buf)
			w.ss.idle <- w
		case <-w.ss.quit:
			w.stop()
			return
		}
	}
}

// serve answers one call. It returns false when the worker's go-nfs
// connection died: that call gets no reply (the client will retransmit) and
// the worker is replaced.
func (w *worker) serve(c *call) bool {
	srv := w.ss.srv
	if srv.testHook != nil {
		srv.testHook(w, c)
	}
	w.fs.cur = c
	if c.rpc.prog == progNFS && frontAnswers(c.rpc.proc) {
		w.placement = Placement{}
		reply := w.answer(c)
		w.ss.replyPlaced(reply, w.placement)
		if w.afterReply != nil {
			w.afterReply()
			w.afterReply = nil
		}
		return true
	}
	select {
	case w.conn.calls <- c.record:
	case <-w.ss.quit:
		return true
	}
	select {
	case rec := <-w.conn.replies:
		w.ss.reply(fixReply(c, rec))
		return true
	case <-w.conn.gone:
		srv.logf("server: go-nfs dropped its connection serving %v; replacing the worker", c.rpc)
		return false
	case <-w.ss.quit:
		return true
	}
}

// retire replaces a dead worker with a fresh one, which goes straight to
// the idle workers (a call may be waiting for one).
func (w *worker) retire() {
	w.conn.shutdown()
	ss := w.ss
	ss.mu.Lock()
	if ss.stopping {
		ss.workers--
		ss.mu.Unlock()
		return
	}
	ss.wg.Add(2)
	ss.mu.Unlock()
	ss.idle <- ss.startWorker()
}

// stopTimeout bounds how long stopping waits for go-nfs to finish the call
// it is in (a filesystem operation).
const stopTimeout = 30 * time.Second

// stop ends go-nfs's connection and waits until go-nfs let go of it, so no
// go-nfs goroutine touches the filesystem once the server closes.
func (w *worker) stop() {
	w.conn.shutdown()
	select {
	case <-w.conn.gone:
	case <-time.After(stopTimeout):
		w.ss.srv.logf("server: go-nfs still busy after %v; leaving it", stopTimeout)
		w.ss.srv.stuck.Store(true)
	}
}
