package sunrpc

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"sort"
	"sync"
	"time"
)

// ErrServerClosed is returned by Server.Serve after Close and by
// Session.Call after the session (or its server) closed.
var ErrServerClosed = errors.New("sunrpc: server closed")

// ServerConfig configures a Server.
type ServerConfig struct {
	// Workers bounds the calls of one session served at once; default 8.
	Workers int
	// MaxRecord is the largest call a TCP connection takes: a fragment
	// that would make a record longer ends the connection before anything
	// of it is read. Default 1 MiB.
	MaxRecord int
	// MaxConns bounds the connections served at once, TCP connections
	// and the sessions of other transports (NewSession) together; when a
	// new one comes, the least recently active goes, as knfsd does. 0
	// means no bound.
	MaxConns int
	// IdleTimeout closes a TCP connection that sent nothing and has no
	// call in service for that long; <= 0 means never.
	IdleTimeout time.Duration
	// Admit, if set, decides for each TCP connection whether its client
	// may use the service (Peer.Admitted); the programs refuse the calls
	// of one that may not, each in its own way. Without it every client
	// may.
	Admit func(p *Peer) bool
	// LargeCalls, if set, decides for each admitted TCP connection
	// whether its client may send records larger than a few KiB: not
	// one whose large calls the programs would only refuse (one calling
	// from an unreserved port where that is refused). A client that may
	// not, or is not admitted, has a record longer than that end its
	// connection at its header. Without it every admitted client may.
	LargeCalls func(p *Peer) bool
	Logf       func(format string, args ...any) // nil = silent
}

// Server is the server side of ONC RPC (the kernel's svc): it serves the
// calls of the programs registered on it, over TCP (Serve) and over any
// transport that hands it whole call messages (NewSession).
type Server struct {
	cfg       ServerConfig
	programs  map[uint32]map[uint32][]Proc // by program, then version
	receiving hostBudget                   // the memory budget: call records being received or served over TCP, other transports' buffers

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

// Proc is one procedure of a registered program version. A call goes to
// Front first, in the goroutine of its session's transport and in the
// order calls arrive: Front decodes the arguments and answers what needs
// no worker (refusals, malformed arguments, cheap procedures). If it
// returns nil, Serve answers the call in one of the session's workers.
type Proc struct {
	Front func(r *Request) []byte // nil: straight to Serve
	Serve func(r *Request) []byte // nil: Front answers every call
}

// NullProc is procedure 0 of every program: it does nothing and answers
// at once.
var NullProc = Proc{Front: func(r *Request) []byte { return AcceptedReply(r.Xid, Success) }}

// Request is one call on its way through a Server (the kernel's svc_rqst).
type Request struct {
	Xid, Prog, Vers, Proc uint32
	// Flavor is the credential's flavor; Cred holds an AUTH_SYS
	// credential's ids as the client claims them, and NoID for AUTH_NONE.
	Flavor Flavor
	Cred   Cred
	Args   []byte // the procedure's arguments; they alias the call message
	Peer   *Peer  // the client, as the transport knows it
	// State is what the procedure's Front leaves for its Serve.
	State any

	// Placement, set by Serve, is where the reply's result that the
	// transport may place directly lies.
	Placement Placement
	// AfterReply, if set by Serve, runs once the reply has been sent: it
	// gives back the buffer the reply was built in.
	AfterReply func()

	buf *[]byte // the pooled buffer of the call message, or nil
	// release gives back the transport's buffer the call message lies
	// in, if it lies in one (Session.CallInPlace).
	release func()
	held    int // bytes of the server's record budget the call holds
}

var _ fmt.Stringer = (*Request)(nil)

// Placement says where a reply's result that may be placed directly lies
// (RFC 8267: READ data): Len bytes at Off in the reply, then their XDR
// pad. Len is 0 for a reply with none.
type Placement struct {
	Off, Len int
}

// Peer is what a transport knows of a session's client.
type Peer struct {
	// Remote and Local are the client's address and the address it
	// reached (IPv4 unmapped); invalid when the transport does not know
	// them.
	Remote, Local netip.AddrPort
	// Secure: the client called from a reserved port, which only root can
	// bind, or over a transport that counts as secure (RPC-over-RDMA).
	Secure bool
	// Admitted: the client may use the service (ServerConfig.Admit).
	Admitted bool
}

var _ fmt.Stringer = (*Peer)(nil)

func (p *Peer) String() string {
	if p.Remote.IsValid() {
		return p.Remote.Addr().String()
	}
	return "a client"
}

// NewServer returns a Server with no programs; Register adds them, before
// it serves.
func NewServer(cfg ServerConfig) *Server {
	if cfg.Workers <= 0 {
		cfg.Workers = 8
	}
	if cfg.MaxRecord <= 0 {
		cfg.MaxRecord = 1 << 20
	}
	s := &Server{cfg: cfg, programs: make(map[uint32]map[uint32][]Proc), quit: make(chan struct{})}
	s.receiving.init(recordBudget, max(cfg.MaxRecord-freeRecordBytes, 0))
	return s
}

// Register serves version vers of program prog with procs, indexed by
// procedure number: a call of a procedure beyond them is PROC_UNAVAIL. It
// must be called before the server serves.
func (s *Server) Register(prog, vers uint32, procs []Proc) {
	if s.programs[prog] == nil {
		s.programs[prog] = make(map[uint32][]Proc)
	}
	s.programs[prog][vers] = procs
}

// lookup finds the procedure of r, or returns the refusal: PROG_UNAVAIL,
// PROG_MISMATCH with the versions served, or PROC_UNAVAIL.
func (s *Server) lookup(r *Request) (*Proc, []byte) {
	versions := s.programs[r.Prog]
	if versions == nil {
		return nil, AcceptedReply(r.Xid, ProgUnavail)
	}
	procs, ok := versions[r.Vers]
	if !ok {
		low, high := versionRange(versions)
		return nil, AcceptedReply(r.Xid, ProgMismatch, low, high)
	}
	if r.Proc >= uint32(len(procs)) {
		return nil, AcceptedReply(r.Xid, ProcUnavail)
	}
	return &procs[r.Proc], nil
}

// versionRange is the lowest and highest version of a program served.
func versionRange(versions map[uint32][]Proc) (low, high uint32) {
	vs := make([]uint32, 0, len(versions))
	for v := range versions {
		vs = append(vs, v)
	}
	sort.Slice(vs, func(i, j int) bool { return vs[i] < vs[j] })
	return vs[0], vs[len(vs)-1]
}

func (s *Server) logf(format string, args ...any) {
	if s.cfg.Logf != nil {
		s.cfg.Logf(format, args...)
	}
}

// Close stops Serve, closes every connection and session and waits for
// their goroutines. It is safe to call more than once.
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
	})
	return nil
}

func (s *Server) isClosed() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.closed
}

// makeRoomLocked closes the least recently active connection, TCP
// connection or another transport's session, when MaxConns are served, as
// knfsd does: a client that holds connections without using them cannot
// lock others out. The caller holds mu.
func (s *Server) makeRoomLocked() {
	n := len(s.conns) + len(s.transportSessions)
	if s.cfg.MaxConns <= 0 || n < s.cfg.MaxConns {
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
	switch {
	case oldSession != nil:
		s.logf("sunrpc: %d connections (max_connections): closing the least recently active, from %v", n, &oldSession.peer)
		delete(s.transportSessions, oldSession)
		// Its transport ends the connection (Session.Done); Close
		// waits for calls in service, so not under mu.
		go oldSession.Close()
	case oldConn != nil:
		s.logf("sunrpc: %d connections (max_connections): closing the least recently active, from %v", n, oldConn.RemoteAddr())
		s.conns[oldConn].close() // a wait for the budget ends
		oldConn.Close()          // its goroutine removes it
		delete(s.conns, oldConn)
	}
}

// addSession registers a session; one of another transport (NewSession,
// not Serve's) counts as a connection, making room for itself under
// MaxConns.
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
