package server

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// ONC RPC record marking over TCP (RFC 5531 section 11): each record is a
// sequence of fragments, each preceded by a 4-byte header holding its length
// and, in the top bit, whether it is the record's last.
const (
	lastFragment = 1 << 31

	// maxRecord is the largest valid call: a WRITE of maxIO bytes (FSINFO's
	// wtmax) with the largest RPC header (two 400-byte auth bodies) and
	// handle; every other call is smaller. A fragment that would make a
	// record longer is refused before anything of it is read, and the
	// connection ends.
	maxRecord = maxIO + 1024
	// maxFragments bounds the fragments of one record, so a stream of empty
	// fragments cannot keep the reader looping forever.
	maxFragments = 1024

	// recordBudget bounds the bytes of large call records the server holds
	// from TCP connections at once, being received or in service: the
	// part of a record beyond its first freeRecordBytes is read only once
	// reserved, and the reservation lasts until its call is answered. A
	// crowd of clients that each send most of a large record and stop
	// holds at most this plus freeRecordBytes per connection; small calls
	// (every call but a large WRITE) never wait for it.
	recordBudget    = 64 << 20
	freeRecordBytes = 64 << 10
)

var errRecordTooLarge = fmt.Errorf("server: record longer than the largest call (%d bytes)", maxRecord)

// errNoBudget means a fragment waited for its reservation for the whole
// idle timeout.
var errNoBudget = errors.New("server: no room to receive a call for the idle timeout")

// recordReader reads records from one connection.
type recordReader struct {
	r       io.Reader
	budget  *byteBudget
	wait    time.Duration   // longest wait for a reservation
	quit    <-chan struct{} // the server is closing
	holding int             // bytes reserved for the record being read
}

// read reads one record into buf (reusing it: the record is appended to
// what buf holds) and returns it. The bytes it holds reserved for the
// record stay reserved; the caller releases them (take) once the record is
// answered or dropped.
func (rr *recordReader) read(buf []byte) ([]byte, error) {
	var hdr [4]byte
	got := 0 // bytes of this record so far
	for frags := 0; ; frags++ {
		if frags == maxFragments {
			return nil, fmt.Errorf("server: record of more than %d fragments", maxFragments)
		}
		if _, err := io.ReadFull(rr.r, hdr[:]); err != nil {
			if frags > 0 && err == io.EOF {
				err = io.ErrUnexpectedEOF
			}
			return nil, err
		}
		mark := binary.BigEndian.Uint32(hdr[:])
		n := int(mark &^ lastFragment)
		if got+n > maxRecord {
			return nil, errRecordTooLarge
		}
		got += n
		if need := got - freeRecordBytes - rr.holding; need > 0 && rr.budget != nil {
			if !rr.budget.acquire(need, rr.wait, rr.quit) {
				return nil, errNoBudget
			}
			rr.holding += need
		}
		if n > 0 {
			// Reserved (or small): allocating the fragment's length
			// before it arrives is bounded.
			start := len(buf)
			if cap(buf)-start < n {
				grown := make([]byte, start, start+n)
				copy(grown, buf)
				buf = grown
			}
			buf = buf[:start+n]
			if _, err := io.ReadFull(rr.r, buf[start:]); err != nil {
				if err == io.EOF {
					err = io.ErrUnexpectedEOF
				}
				return nil, err
			}
		}
		if mark&lastFragment != 0 {
			return buf, nil
		}
	}
}

// take hands over the reservation of the record read last.
func (rr *recordReader) take() int {
	n := rr.holding
	rr.holding = 0
	return n
}

func putMark(b []byte, n int) { binary.BigEndian.PutUint32(b, lastFragment|uint32(n)) }

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
	p := s.peerOf(conn)
	if !p.allowed {
		s.logf("server: connection from %v: not among the export's clients; refusing its calls", conn.RemoteAddr())
	}
	send := func(reply []byte, _ Placement) error {
		var mark [4]byte
		putMark(mark[:], len(reply))
		bufs := net.Buffers{mark[:], reply}
		_, err := bufs.WriteTo(conn)
		return err
	}
	ss := s.newSession(send, p)
	idle := &idleReader{conn: conn, ss: ss, st: st, timeout: s.opts.IdleTimeout}
	rr := &recordReader{r: bufio.NewReaderSize(idle, 64<<10), budget: &s.receiving, wait: s.opts.IdleTimeout, quit: s.quit}
	for {
		// Each record is read into a pooled buffer the session keeps
		// until the call is answered: no copy of a large WRITE.
		bp := recordPool.Get().(*[]byte)
		record, err := rr.read(append((*bp)[:0], 0, 0, 0, 0))
		if err == nil {
			putMark(record, len(record)-4)
			*bp = record
			err = ss.callRecord(bp, rr.take())
		} else {
			s.receiving.release(rr.take())
			putRecord(bp)
		}
		if err != nil {
			switch {
			case errors.Is(err, os.ErrDeadlineExceeded):
				s.logf("server: closing the connection from %v: idle for %v", conn.RemoteAddr(), s.opts.IdleTimeout)
			case !isEOF(err) && !s.isClosed():
				s.logf("server: connection from %v: %v", conn.RemoteAddr(), err)
			}
			break
		}
	}
	conn.Close() // first: a send blocked on the socket must fail for Close to finish
	ss.Close()
}

// peerOf is what the export makes of a TCP connection's client.
func (s *Server) peerOf(conn net.Conn) peer {
	var p peer
	ra, rok := conn.RemoteAddr().(*net.TCPAddr)
	la, lok := conn.LocalAddr().(*net.TCPAddr)
	if !rok || !lok {
		return p
	}
	r, l := ra.AddrPort(), la.AddrPort()
	p.remote, p.local = r.Addr().Unmap(), l.Addr().Unmap()
	p.allowed = s.opts.Export.allows(p.remote, p.local)
	p.secure = portSecure(r.Port())
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

// byteBudget is a count of bytes that readers reserve before they read and
// release when done; a reader waits while the budget is spent.
type byteBudget struct {
	mu      sync.Mutex
	free    int
	changed chan struct{} // closed and replaced at each release
}

func (b *byteBudget) init(n int) {
	b.free = n
	b.changed = make(chan struct{})
}

// acquire reserves n bytes, waiting at most wait (forever if wait <= 0) and
// never once quit is closed. It reports whether it got them.
func (b *byteBudget) acquire(n int, wait time.Duration, quit <-chan struct{}) bool {
	var timeout <-chan time.Time
	if wait > 0 {
		t := time.NewTimer(wait)
		defer t.Stop()
		timeout = t.C
	}
	for {
		b.mu.Lock()
		if b.free >= n {
			b.free -= n
			b.mu.Unlock()
			return true
		}
		changed := b.changed
		b.mu.Unlock()
		select {
		case <-changed:
		case <-timeout:
			return false
		case <-quit:
			return false
		}
	}
}

func (b *byteBudget) release(n int) {
	if n == 0 {
		return
	}
	b.mu.Lock()
	b.free += n
	close(b.changed)
	b.changed = make(chan struct{})
	b.mu.Unlock()
}
