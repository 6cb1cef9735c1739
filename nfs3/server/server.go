package server

import (
	"crypto/rand"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"golang.org/x/sys/unix"
)

// Options configure a Server.
type Options struct {
	Root     string // directory to export; must exist and be a directory
	ReadOnly bool
	Export   Export // security options (knfsd's exports(5) defaults when zero)
	Workers  int    // calls served at once per connection; 0 = default (8)
	// MaxConns bounds the connections served at once, TCP connections
	// and the sessions of other transports (RPC-over-RDMA's) together;
	// when a new one comes, the least recently active goes, as knfsd
	// does. 0 means DefaultMaxConns.
	MaxConns int
	// IdleTimeout closes a TCP connection that sent nothing and has no call
	// in service for that long; 0 means DefaultIdleTimeout, < 0 never.
	IdleTimeout time.Duration
	Logf        func(format string, args ...any) // nil = silent
}

// Defaults of Options.
const (
	DefaultWorkers  = 8
	DefaultMaxConns = 256
	// DefaultIdleTimeout is knfsd's: it closes connections idle for six
	// minutes (svc_age_temp_xprts).
	DefaultIdleTimeout = 6 * time.Minute
)

// Server exports one directory over NFSv3 and MOUNT v3.
type Server struct {
	opts       Options
	rootfd     int    // O_RDONLY directory: the base of all resolution and the mount fd for open_by_handle_at
	rootPath   string // the root's canonical path, as /proc/self/fd shows it
	rootPrefix string // rootPath with a trailing slash
	rootStat   unix.Statx_t
	rootHandle []byte
	mountID    int
	umask      uint32 // the process umask, which creation must undo for exact modes
	self       *identity
	verifier   [8]byte // WRITE/COMMIT verifier: new at every start
	hints      hintCache
	files      fileCache
	receiving  byteBudget // call records being received or served over TCP

	// testHook, when set (by tests, before serving), runs in the worker
	// before each call.
	testHook func(*worker, *call)

	mu        sync.Mutex
	closed    bool
	quit      chan struct{} // closed by Close
	listeners map[net.Listener]struct{}
	conns     map[net.Conn]*connState
	sessions  map[*Session]struct{}
	// transportSessions are the sessions of other transports
	// (NewSession): they count as connections under MaxConns.
	transportSessions map[*Session]struct{}
	serving           sync.WaitGroup // Serve calls and their connection goroutines
	closeOnce         sync.Once
}

// New validates opts.Root and checks, before any client arrives, everything
// the server depends on: that the root's filesystem gives out file handles
// and this process may open them (CAP_DAC_READ_SEARCH), that it may switch
// credentials per thread (CAP_SETUID, CAP_SETGID), and that the kernel has
// openat2 and faccessat2 (Linux 5.8).
func New(opts Options) (*Server, error) {
	if opts.Root == "" {
		return nil, errors.New("server: no root directory to export")
	}
	if opts.Workers < 0 || opts.MaxConns < 0 {
		return nil, fmt.Errorf("server: %d workers, %d connections", opts.Workers, opts.MaxConns)
	}
	if opts.Workers == 0 {
		opts.Workers = DefaultWorkers
	}
	if opts.MaxConns == 0 {
		opts.MaxConns = DefaultMaxConns
	}
	if opts.IdleTimeout == 0 {
		opts.IdleTimeout = DefaultIdleTimeout
	}
	abs, err := filepath.Abs(opts.Root)
	if err != nil {
		return nil, fmt.Errorf("server: root %s: %w", opts.Root, err)
	}
	fi, err := os.Stat(abs)
	if err != nil {
		return nil, fmt.Errorf("server: root: %w", err)
	}
	if !fi.IsDir() {
		return nil, fmt.Errorf("server: root %s is not a directory", abs)
	}
	fd, err := unix.Open(abs, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("server: open root %s: %w", abs, err)
	}
	s := &Server{opts: opts, rootfd: fd, quit: make(chan struct{})}
	s.receiving.init(recordBudget)
	if err := s.init(); err != nil {
		unix.Close(fd)
		return nil, err
	}
	return s, nil
}

func (s *Server) init() error {
	var err error
	if s.rootPath, err = readlinkFD(s.rootfd); err != nil {
		return fmt.Errorf("server: the server needs /proc: %w", err)
	}
	s.rootPrefix = strings.TrimSuffix(s.rootPath, "/") + "/"
	if err := s.initHandles(); err != nil {
		return err
	}
	if fd, err := openat2(s.rootfd, ".", unix.O_PATH, 0); err != nil {
		return fmt.Errorf("server: openat2 (Linux 5.6) is needed: %w", err)
	} else {
		unix.Close(fd)
	}
	if err := unix.Faccessat2(s.rootfd, "", unix.F_OK, unix.AT_EMPTY_PATH|unix.AT_EACCESS); err != nil {
		return fmt.Errorf("server: faccessat2 (Linux 5.8) is needed: %w", err)
	}
	if s.self, err = currentIdentity(); err != nil {
		return err
	}
	if err := s.self.checkSwitching(); err != nil {
		return fmt.Errorf("server: serving each call as its caller needs CAP_SETUID and CAP_SETGID (run as root): %w", err)
	}
	s.umask = processUmask()
	if _, err := rand.Read(s.verifier[:]); err != nil {
		return fmt.Errorf("server: write verifier: %w", err)
	}
	return nil
}

// processUmask reads the umask without changing it (umask(2) would race
// with files created elsewhere in the process). If it cannot be read, every
// requested mode is re-applied after creation.
func processUmask() uint32 {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0o777
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "Umask:"); ok {
			if m, err := strconv.ParseUint(strings.TrimSpace(v), 8, 32); err == nil {
				return uint32(m)
			}
		}
	}
	return 0o777
}

func (s *Server) logf(format string, args ...any) {
	if s.opts.Logf != nil {
		s.opts.Logf(format, args...)
	}
}

// AllowsClient reports whether the export lets a client at remote in over
// a transport listening at listen (both host:port). A transport that makes
// its own Sessions (RPC-over-RDMA) asks before accepting a connection.
func (s *Server) AllowsClient(remote, listen string) bool {
	r, err := netip.ParseAddrPort(remote)
	if err != nil {
		return false
	}
	var l netip.Addr
	if lp, err := netip.ParseAddrPort(listen); err == nil {
		l = lp.Addr()
	}
	return s.opts.Export.allows(r.Addr(), l)
}

// TryReserve takes n bytes of the server's memory budget, which the large
// parts of TCP call records come out of too, for a transport's own buffers
// (RPC-over-RDMA's), if it has them; it never waits. Unreserve gives them
// back.
func (s *Server) TryReserve(n int) bool { return s.receiving.tryAcquire(n) }

// Unreserve gives back n bytes TryReserve took.
func (s *Server) Unreserve(n int) { s.receiving.release(n) }

// Serve accepts connections on l and serves ONC RPC over TCP record marking
// on each, MOUNT v3 and NFSv3 alike, until l fails or Close. After Close it
// returns ErrClosed.
func (s *Server) Serve(l net.Listener) error {
	if !s.addListener(l) {
		l.Close()
		return ErrClosed
	}
	defer s.removeListener(l)
	var delay time.Duration
	for {
		conn, err := l.Accept()
		if err != nil {
			if s.isClosed() {
				return ErrClosed
			}
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() || errors.Is(err, unix.EMFILE) || errors.Is(err, unix.ENFILE) ||
				errors.Is(err, unix.ECONNABORTED) || errors.Is(err, unix.ENOBUFS) || errors.Is(err, unix.ENOMEM) {
				delay = min(max(2*delay, 5*time.Millisecond), time.Second)
				s.logf("server: accept: %v; retrying in %v", err, delay)
				time.Sleep(delay)
				continue
			}
			return fmt.Errorf("server: accept: %w", err)
		}
		delay = 0
		st, ok := s.addConn(conn)
		if !ok {
			conn.Close()
			return ErrClosed
		}
		go s.serveConn(conn, st)
	}
}

// Close stops Serve, closes every connection and session, waits for their
// goroutines and releases the root. It is safe to call more than once.
func (s *Server) Close() error {
	s.closeOnce.Do(func() {
		s.mu.Lock()
		s.closed = true
		close(s.quit)
		var ls []net.Listener
		var cs []net.Conn
		var ss []*Session
		for l := range s.listeners {
			ls = append(ls, l)
		}
		for c := range s.conns {
			cs = append(cs, c)
		}
		for x := range s.sessions {
			ss = append(ss, x)
		}
		s.mu.Unlock()
		for _, l := range ls {
			l.Close()
		}
		for _, c := range cs {
			c.Close()
		}
		for _, x := range ss {
			x.Close()
		}
		s.serving.Wait()
		s.files.closeAll()
		unix.Close(s.rootfd)
	})
	return nil
}

func (s *Server) isClosed() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.closed
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
	s.makeRoomLocked()
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

// makeRoomLocked closes the least recently active connection, TCP
// connection or another transport's session, when MaxConns are served, as
// knfsd does: a client that holds connections without using them cannot
// lock others out. The caller holds mu.
func (s *Server) makeRoomLocked() {
	if len(s.conns)+len(s.transportSessions) < s.opts.MaxConns {
		return
	}
	var oldConn net.Conn
	var oldSession *Session
	var at int64
	for oc, st := range s.conns {
		if t := st.lastActive.Load(); oldConn == nil || t < at {
			oldConn, at = oc, t
		}
	}
	for ss := range s.transportSessions {
		if t := ss.lastActive.Load(); oldConn == nil && oldSession == nil || t < at {
			oldConn, oldSession, at = nil, ss, t
		}
	}
	n := len(s.conns) + len(s.transportSessions)
	switch {
	case oldSession != nil:
		s.logf("server: %d connections (max_connections): closing the least recently active, from %s", n, oldSession.peerString())
		delete(s.transportSessions, oldSession)
		// Its transport ends the connection (Session.Done); Close
		// waits for calls in service, so not under mu.
		go oldSession.Close()
	case oldConn != nil:
		s.logf("server: %d connections (max_connections): closing the least recently active, from %v", n, oldConn.RemoteAddr())
		oldConn.Close() // its goroutine removes it
		delete(s.conns, oldConn)
	}
}

// addSession registers a session; one of another transport (not made by
// Serve) counts as a connection, making room for itself under MaxConns.
func (s *Server) addSession(ss *Session, transport bool) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return false
	}
	if s.sessions == nil {
		s.sessions = make(map[*Session]struct{})
		s.transportSessions = make(map[*Session]struct{})
	}
	if transport {
		s.makeRoomLocked()
		s.transportSessions[ss] = struct{}{}
	}
	s.sessions[ss] = struct{}{}
	return true
}

func (s *Server) removeSession(ss *Session) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.sessions, ss)
	delete(s.transportSessions, ss)
}
