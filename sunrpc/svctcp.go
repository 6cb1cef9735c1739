package sunrpc

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os"
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
	lastActive atomic.Int64 // unix nanoseconds of the last byte received
}

func (c *connState) touch() { c.lastActive.Store(time.Now().UnixNano()) }

// serveConn runs one TCP connection: records in, a Session in the middle,
// record-marked replies out.
func (s *Server) serveConn(conn net.Conn, st *connState) {
	defer s.serving.Done()
	defer s.removeConn(conn)
	p := peerOf(conn)
	p.Admitted = s.cfg.Admit == nil || s.cfg.Admit(&p)
	send := func(reply []byte, _ Placement) error {
		var mark [4]byte
		PutRecordMark(mark[:], len(reply))
		bufs := net.Buffers{mark[:], reply}
		_, err := bufs.WriteTo(conn)
		return err
	}
	ss := s.NewSession(send, p)
	idle := &idleReader{conn: conn, ss: ss, st: st, timeout: s.cfg.IdleTimeout}
	rv := &recordReservation{budget: &s.receiving, wait: s.cfg.IdleTimeout, quit: s.quit}
	rr := &RecordReader{R: bufio.NewReaderSize(idle, 64<<10), MaxRecord: s.cfg.MaxRecord, MaxFragments: maxFragments, Reserve: rv.reserve}
	for {
		// Each record is read into a pooled buffer the session keeps
		// until the call is answered: no copy of a large WRITE.
		bp := recordPool.Get().(*[]byte)
		record, err := rr.Read((*bp)[:0])
		if err == nil {
			*bp = record
			err = ss.callRecord(bp, rv.take())
		} else {
			s.receiving.release(rv.take())
			putRecord(bp)
		}
		if err != nil {
			switch {
			case errors.Is(err, os.ErrDeadlineExceeded):
				s.logf("sunrpc: closing the connection from %v: idle for %v", conn.RemoteAddr(), s.cfg.IdleTimeout)
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
// replies), so a deadline passing then is extended.
type idleReader struct {
	conn    net.Conn
	ss      *Session
	st      *connState
	timeout time.Duration
}

var _ io.Reader = (*idleReader)(nil)

func (r *idleReader) Read(p []byte) (int, error) {
	for {
		if r.timeout > 0 {
			r.conn.SetReadDeadline(time.Now().Add(r.timeout))
		}
		n, err := r.conn.Read(p)
		if n > 0 {
			r.st.touch()
		}
		if n == 0 && errors.Is(err, os.ErrDeadlineExceeded) && r.ss.inService.Load() > 0 {
			continue
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
// recently active connection is closed to make room, as knfsd does: a
// client that holds connections without using them cannot lock others out.
func (s *Server) addConn(c net.Conn) (*connState, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil, false
	}
	if s.conns == nil {
		s.conns = make(map[net.Conn]*connState)
	}
	if s.cfg.MaxConns > 0 && len(s.conns) >= s.cfg.MaxConns {
		var oldest net.Conn
		var at int64
		for oc, st := range s.conns {
			if t := st.lastActive.Load(); oldest == nil || t < at {
				oldest, at = oc, t
			}
		}
		s.logf("sunrpc: %d connections (max_connections): closing the least recently active, from %v", len(s.conns), oldest.RemoteAddr())
		oldest.Close() // its goroutine removes it
		delete(s.conns, oldest)
	}
	st := &connState{}
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
