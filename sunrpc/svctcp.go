package sunrpc

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// The server's TCP transport: connections accepted, records read from
// each into its Session, record-marked replies written back.

// maxFragments bounds the fragments of one call record, so a stream of
// empty fragments cannot keep the reader looping forever.
const maxFragments = 1024

// Serve accepts connections on l and serves ONC RPC over TCP record marking
// on each, every registered program alike, until l fails or Close. After
// Close it returns ErrServerClosed.
func (s *Server) Serve(l net.Listener) error {
	if !s.addListener(l) {
		l.Close()
		return ErrServerClosed
	}
	defer s.removeListener(l)
	var delay time.Duration
	for {
		conn, err := l.Accept()
		if err != nil {
			if s.isClosed() {
				return ErrServerClosed
			}
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() || errors.Is(err, syscall.EMFILE) || errors.Is(err, syscall.ENFILE) ||
				errors.Is(err, syscall.ECONNABORTED) || errors.Is(err, syscall.ENOBUFS) || errors.Is(err, syscall.ENOMEM) {
				delay = min(max(2*delay, 5*time.Millisecond), time.Second)
				s.logf("sunrpc: accept: %v; retrying in %v", err, delay)
				time.Sleep(delay)
				continue
			}
			return fmt.Errorf("sunrpc: accept: %w", err)
		}
		delay = 0
		st, ok := s.addConn(conn)
		if !ok {
			conn.Close()
			return ErrServerClosed
		}
		go s.serveConn(conn, st)
	}
}

// isEOF reports the ordinary ends of a connection, a client's reset
// among them (clients such as libnfs close with RST).
func isEOF(err error) bool {
	return errors.Is(err, io.EOF) || errors.Is(err, net.ErrClosed) || errors.Is(err, syscall.ECONNRESET)
}

// connState is what the server tracks of a TCP connection.
type connState struct {
	lastActive atomic.Int64  // unix nanoseconds of the last byte received
	gone       chan struct{} // closed when the server closes the connection
	closeOnce  sync.Once
}

func (c *connState) touch() { c.lastActive.Store(time.Now().UnixNano()) }

// close marks the connection closed by the server: a wait of its reader
// for the budget ends.
func (c *connState) close() { c.closeOnce.Do(func() { close(c.gone) }) }

const (
	// smallRecord is the largest record a client may send that no
	// program would serve beyond a refusal or NULL (ServerConfig.Admit,
	// ServerConfig.LargeCalls): enough for any refused call's header and
	// a MOUNT path. A longer record ends the connection at its header,
	// so such a client never takes anything of the budget.
	smallRecord = 8 << 10
	// bodyTimeout bounds the time a record's body may take to arrive,
	// from its first header (or from the end of a wait for the budget):
	// a client that announces a record and stops sending holds its
	// reservation that long at most, not the idle timeout.
	bodyTimeout = 10 * time.Second
)

// errBodyTimeout ends a connection whose record body stopped arriving.
var errBodyTimeout = fmt.Errorf("sunrpc: a record's body did not arrive within %v", bodyTimeout)

// serveConn runs one TCP connection: records in, a Session in the middle,
// record-marked replies out.
func (s *Server) serveConn(conn net.Conn, st *connState) {
	defer s.serving.Done()
	defer s.removeConn(conn)
	p := peerOf(conn)
	p.Admitted = s.cfg.Admit == nil || s.cfg.Admit(&p)
	// Who the client is decides, before anything of a record's body is
	// read, how large a record it may send.
	maxRecord := s.cfg.MaxRecord
	if !p.Admitted || s.cfg.LargeCalls != nil && !s.cfg.LargeCalls(&p) {
		maxRecord = min(maxRecord, smallRecord)
	}
	send := func(reply []byte, _ Placement) error {
		var mark [4]byte
		PutRecordMark(mark[:], len(reply))
		bufs := net.Buffers{mark[:], reply}
		_, err := bufs.WriteTo(conn)
		return err
	}
	ss := s.newSession(send, p, false)
	idle := &idleReader{conn: conn, ss: ss, st: st, timeout: s.cfg.IdleTimeout}
	rv := &recordReservation{budget: &s.receiving, host: p.Remote.Addr(), wait: s.cfg.IdleTimeout, quit: s.quit, gone: st.gone}
	in := bufio.NewReaderSize(idle, connReadBuffer)
	rr := &RecordReader{R: in, MaxRecord: maxRecord, MaxFragments: maxFragments, Reserve: func(size int) error {
		err := rv.reserve(size)
		if idle.bodyBy.IsZero() || rv.waited {
			// The body is due from the record's first header, or
			// from when the budget let it in.
			idle.bodyBy = time.Now().Add(bodyTimeout)
		}
		return err
	}}
	for {
		// A connection between records holds no record buffer.
		_, err := in.Peek(4)
		if err == nil {
			// Each record is read into a pooled buffer the session
			// keeps until the call is answered: no copy of a large
			// WRITE.
			bp := recordPool.Get().(*[]byte)
			var record []byte
			record, err = rr.Read((*bp)[:0])
			idle.bodyBy = time.Time{}
			if err == nil {
				*bp = record
				err = ss.callRecord(bp, rv.take())
			} else {
				s.receiving.release(rv.host, rv.take())
				putRecord(bp)
			}
		}
		if err != nil {
			switch {
			case errors.Is(err, errBodyTimeout):
				s.logf("sunrpc: closing the connection from %v: %v", conn.RemoteAddr(), err)
			case errors.Is(err, os.ErrDeadlineExceeded):
				s.logf("sunrpc: closing the connection from %v: idle for %v", conn.RemoteAddr(), s.cfg.IdleTimeout)
			case errors.Is(err, ErrRecordTooLarge) && maxRecord < s.cfg.MaxRecord:
				s.logf("sunrpc: closing the connection from %v: %v (a client that may not make large calls)", conn.RemoteAddr(), err)
			case !isEOF(err) && !s.isClosed():
				s.logf("sunrpc: connection from %v: %v", conn.RemoteAddr(), err)
			}
			break
		}
	}
	conn.Close() // first: a send blocked on the socket must fail for Close to finish
	ss.Close()
}

// peerOf is what a TCP connection tells of its client: the addresses, and
// whether it calls from a reserved port.
func peerOf(conn net.Conn) Peer {
	var p Peer
	ra, rok := conn.RemoteAddr().(*net.TCPAddr)
	la, lok := conn.LocalAddr().(*net.TCPAddr)
	if !rok || !lok {
		return p
	}
	r, l := ra.AddrPort(), la.AddrPort()
	p.Remote = netip.AddrPortFrom(r.Addr().Unmap(), r.Port())
	p.Local = netip.AddrPortFrom(l.Addr().Unmap(), l.Port())
	p.Secure = r.Port() < 1024
	return p
}

// idleReader reads from a connection with the idle timeout as deadline. A
// connection with calls in service is not idle (its client waits for
// replies), so a deadline passing then is extended; but while a record's
// body is due (bodyBy), its deadline holds.
type idleReader struct {
	conn    net.Conn
	ss      *Session
	st      *connState
	timeout time.Duration
	bodyBy  time.Time // when the body of the record being read is due; zero between records
}

var _ io.Reader = (*idleReader)(nil)

func (r *idleReader) Read(p []byte) (int, error) {
	for {
		var deadline time.Time
		if r.timeout > 0 {
			deadline = time.Now().Add(r.timeout)
		}
		if !r.bodyBy.IsZero() && (deadline.IsZero() || r.bodyBy.Before(deadline)) {
			deadline = r.bodyBy
		}
		r.conn.SetReadDeadline(deadline)
		n, err := r.conn.Read(p)
		if n > 0 {
			r.st.touch()
		}
		if n == 0 && errors.Is(err, os.ErrDeadlineExceeded) {
			if !r.bodyBy.IsZero() && !time.Now().Before(r.bodyBy) {
				return 0, errBodyTimeout
			}
			if r.ss.inService.Load() > 0 {
				continue
			}
		}
		return n, err
	}
}

func (s *Server) addListener(l net.Listener) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return false
	}
	if s.listeners == nil {
		s.listeners = make(map[net.Listener]struct{})
	}
	s.listeners[l] = struct{}{}
	s.serving.Add(1)
	return true
}

func (s *Server) removeListener(l net.Listener) {
	s.mu.Lock()
	delete(s.listeners, l)
	s.mu.Unlock()
	s.serving.Done()
}

// addConn registers a connection and counts its goroutine, under the lock
// Close takes, so Close's Wait never misses one. At MaxConns the least
// recently active connection is closed to make room (makeRoomLocked).
func (s *Server) addConn(c net.Conn) (*connState, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil, false
	}
	if s.conns == nil {
		s.conns = make(map[net.Conn]*connState)
	}
	s.makeRoomLocked()
	st := &connState{gone: make(chan struct{})}
	st.touch()
	s.conns[c] = st
	s.serving.Add(1)
	return st, true
}

func (s *Server) removeConn(c net.Conn) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.conns, c)
}
