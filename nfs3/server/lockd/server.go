package lockd

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"sync"
	"time"

	"github.com/rdmafs/rdmafs/nfs3"
	"github.com/rdmafs/rdmafs/nfs3/nlm"
	"github.com/rdmafs/rdmafs/sunrpc"
)

// The defaults of Config, as Linux's lockd and knfsd have them where they
// have one.
const (
	// DefaultGraceTime is nlm_grace_period's and nfsd's grace: 90 s.
	DefaultGraceTime = 90 * time.Second
	// DefaultMaxLocksPerHost bounds the locks (and, apart, the shares) of
	// one client host.
	DefaultMaxLocksPerHost = 1024
	// DefaultMaxBlockedPerHost bounds the blocked LOCKs a host has queued.
	DefaultMaxBlockedPerHost = 64
	// DefaultMaxHosts bounds the client hosts the server keeps state of.
	DefaultMaxHosts = 1024
	// DefaultHostExpiry is how long a client host that holds nothing
	// stays recorded after its last LOCK: Linux's NLM_HOST_EXPIRE.
	DefaultHostExpiry = 5 * time.Minute
	// DefaultMaxLocks bounds the locks of every host together. A lock
	// costs at most some 2 KB (its owner handle, and the file handle of
	// a file with no other lock), so 32 MB at most in all.
	DefaultMaxLocks = 16 << 10
)

// Config configures a Server. Zero values take the defaults above.
type Config struct {
	// StateDir keeps the NSM state number and the clients that hold
	// locks, so that a restarted server knows whom to tell and whether to
	// keep a grace period. "" keeps nothing: no grace, no notification.
	StateDir string
	// GraceTime is how long after New only reclaims are granted, when the
	// state directory names clients that held locks before; < 0: none.
	GraceTime time.Duration
	// Name is how the server names itself in the SM_NOTIFY it sends its
	// clients after a restart: the name the clients' lockd knows it by
	// (the address they mount it at). "" is the host's name.
	Name string

	MaxLocksPerHost, MaxBlockedPerHost, MaxHosts, MaxLocks int

	// HostExpiry forgets a client host that holds nothing that long after
	// its last LOCK, as Linux's lockd forgets (and unmonitors) idle
	// hosts, so that a restart keeps a grace period only for clients that
	// hold locks or took some lately.
	HostExpiry time.Duration

	// HostStatd: the host's rpc.statd holds NSM's registration with
	// rpcbind, so the server asks it to monitor each client host
	// (hoststatd.go) to hear of their reboots.
	HostStatd bool

	// MayLock is the export's word on a call about the file fh names,
	// as knfsd's nlm_fopen gives it to its lockd: StatGranted to go on,
	// StatStaleFH for a handle that is not the export's, StatFailed for a
	// caller that may not lock the file. TEST, LOCK and SHARE ask it
	// first (nlmproc.go: mayLock); it may block (it runs in the
	// session's workers). nil lets every handle through.
	MayLock func(r *sunrpc.Request, fh []byte) nlm.Stat

	// CallbackTimeout bounds one try of a GRANTED callback or an
	// SM_NOTIFY to a client (default 5 s).
	CallbackTimeout time.Duration
	// Logf logs what a user may want to know (nil: silent).
	Logf func(format string, args ...any)
}

// Server is the lock manager of one rdmafs serve: NLM v4 and a minimal
// NSM over the server's sunrpc.Server.
type Server struct {
	cfg   Config
	state *stateDir

	mu         sync.Mutex
	locks      *Table
	shares     shareTable
	hosts      map[string]*host // by hostKey: those monitored
	blocked    map[string][]*waiter
	nblocked   int
	resCalls   int // _RES calls under way
	graceUntil time.Time
	nsmState   int32
	closed     bool

	ctx    context.Context // canceled by Close
	cancel context.CancelFunc
	bg     sync.WaitGroup // callbacks and notifications under way
}

// host is a client host the server monitors: one that took a lock or a
// share, or that held some before the server restarted. A host is a
// caller_name at an address, as Linux's lockd tells hosts apart
// (nlmsvc_lookup_host): two machines cloned with one node name are two
// hosts, and their processes' locks conflict.
type host struct {
	key      string     // hostKey(name, addr): its locks' Owner.Host
	name     string     // its caller_name
	addr     netip.Addr // where its lockd (and statd) is: where its calls come from
	blocked  int        // its LOCKs waiting
	shares   int
	lastUsed time.Time // its last LOCK or SHARE
}

// ErrClosed is the error of a call after Close.
var ErrClosed = errors.New("lockd: closed")

// New returns a lock manager whose state lives in cfg.StateDir. If that
// directory names clients that held locks before, the server starts in
// its grace period and tells each of them (SM_NOTIFY to its statd) that
// it restarted, so that they reclaim.
func New(cfg Config) (*Server, error) {
	if cfg.GraceTime == 0 {
		cfg.GraceTime = DefaultGraceTime
	}
	def := func(v *int, d int) {
		if *v <= 0 {
			*v = d
		}
	}
	def(&cfg.MaxLocksPerHost, DefaultMaxLocksPerHost)
	def(&cfg.MaxBlockedPerHost, DefaultMaxBlockedPerHost)
	def(&cfg.MaxHosts, DefaultMaxHosts)
	def(&cfg.MaxLocks, DefaultMaxLocks)
	if cfg.HostExpiry <= 0 {
		cfg.HostExpiry = DefaultHostExpiry
	}
	if cfg.CallbackTimeout <= 0 {
		cfg.CallbackTimeout = 5 * time.Second
	}
	s := &Server{cfg: cfg, locks: NewTable(cfg.MaxLocksPerHost, cfg.MaxLocks),
		hosts: make(map[string]*host), blocked: make(map[string][]*waiter)}
	s.shares.init()
	var previous []recordedHost
	if cfg.StateDir != "" {
		st, err := openStateDir(cfg.StateDir)
		if err != nil {
			return nil, err
		}
		s.state = st
		s.nsmState = st.nsmState
		previous = st.clients
	}
	s.ctx, s.cancel = context.WithCancel(context.Background())
	for _, p := range previous {
		if len(s.hosts) < cfg.MaxHosts {
			key := hostKey(p.name, p.addr)
			s.hosts[key] = &host{key: key, name: p.name, addr: p.addr, lastUsed: time.Now()}
		}
	}
	s.bg.Add(1)
	go s.expireHosts()
	if len(previous) > 0 && cfg.GraceTime > 0 {
		s.graceUntil = time.Now().Add(cfg.GraceTime)
		s.logf("lockd: %d clients held locks before this restart: grace period of %v, only reclaims until then", len(previous), cfg.GraceTime)
		s.bg.Add(1)
		go func() {
			defer s.bg.Done()
			select {
			case <-time.After(cfg.GraceTime):
				s.endGrace()
			case <-s.ctx.Done():
			}
		}()
	}
	for _, p := range previous {
		s.bg.Add(1)
		go func() {
			defer s.bg.Done()
			s.notifyRestart(p)
		}()
	}
	return s, nil
}

// Programs are the programs, versions and protocols (IPPROTO_TCP or
// IPPROTO_UDP) the lock manager serves, for rpcbind: Register's over TCP,
// ServeUDP's over UDP.
var Programs = [][3]uint32{
	{nlm.Program, nlm.Version, nfs3.IPProtoTCP},
	{nlm.NSMProgram, nlm.NSMVersion, nfs3.IPProtoTCP},
	{nlm.NSMProgram, nlm.NSMVersion, ipProtoUDP},
	{nlm.Program, 3, ipProtoUDP}, // the host statd's callback (HostStatd)
}

const ipProtoUDP = 17

// Register serves NLM v4 and NSM v1 on rpc, before it serves.
func (s *Server) Register(rpc *sunrpc.Server) {
	rpc.Register(nlm.Program, nlm.Version, s.nlmProcs())
	rpc.Register(nlm.NSMProgram, nlm.NSMVersion, s.nsmProcs())
}

// Close stops the callbacks and notifications under way and waits for
// them. The state directory keeps the clients, for the next start.
func (s *Server) Close() error {
	s.mu.Lock()
	s.closed = true
	s.mu.Unlock()
	s.cancel()
	s.bg.Wait()
	return nil
}

// InGrace reports whether the server grants only reclaims.
func (s *Server) InGrace() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.inGrace()
}

func (s *Server) inGrace() bool { return !s.graceUntil.IsZero() && time.Now().Before(s.graceUntil) }

// endGrace ends the grace period and forgets the clients that held locks
// before the restart and did not reclaim any.
func (s *Server) endGrace() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.graceUntil = time.Time{}
	for name, h := range s.hosts {
		if s.holdsNothing(h) {
			delete(s.hosts, name)
		}
	}
	s.saveHosts()
	s.logf("lockd: grace period over")
}

// expireHosts forgets, every half HostExpiry, the hosts that hold
// nothing and took nothing for HostExpiry, until Close.
func (s *Server) expireHosts() {
	defer s.bg.Done()
	tick := time.NewTicker(s.cfg.HostExpiry / 2)
	defer tick.Stop()
	for {
		select {
		case <-s.ctx.Done():
			return
		case now := <-tick.C:
			s.mu.Lock()
			if !s.inGrace() {
				forgot := false
				for name, h := range s.hosts {
					if s.holdsNothing(h) && now.Sub(h.lastUsed) >= s.cfg.HostExpiry {
						delete(s.hosts, name)
						forgot = true
					}
				}
				if forgot {
					s.saveHosts()
				}
			}
			s.mu.Unlock()
		}
	}
}

func (s *Server) holdsNothing(h *host) bool {
	return s.locks.Held(h.key) == 0 && h.blocked == 0 && h.shares == 0
}

// Stats is what the server holds, for tests and logs.
type Stats struct {
	Hosts, Locks, Blocked, Shares int
}

// Stats returns what the server holds now.
func (s *Server) Stats() Stats {
	s.mu.Lock()
	defer s.mu.Unlock()
	return Stats{Hosts: len(s.hosts), Locks: s.locks.Total(), Blocked: s.nblocked, Shares: s.shares.total}
}

// NSMState is the server's NSM state number (odd: up).
func (s *Server) NSMState() int32 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.nsmState
}

// hostKey names the host of caller_name name at addr.
func hostKey(name string, addr netip.Addr) string { return name + "\x00" + addr.String() }

// monitor returns the host record of name at addr, making one (and
// recording it in the state directory) if it is new; nil when the server
// keeps as many hosts as it may.
func (s *Server) monitor(name string, addr netip.Addr) *host {
	key := hostKey(name, addr)
	h := s.hosts[key]
	if h == nil {
		if len(s.hosts) >= s.cfg.MaxHosts {
			return nil
		}
		h = &host{key: key, name: name, addr: addr, lastUsed: time.Now()}
		s.hosts[key] = h
		s.saveHosts()
		s.monitorWithStatd(h)
		return h
	}
	h.lastUsed = time.Now()
	return h
}

// dropHost forgets everything of the host of key: its locks, its blocked
// requests and its shares (FREE_ALL, or its reboot), and grants what
// waited on them.
func (s *Server) dropHost(key string) {
	h := s.hosts[key]
	files := s.locks.filesOf(key)
	s.locks.DropHost(key)
	s.shares.dropHost(key)
	for fh, ws := range s.blocked {
		next := ws[:0]
		for _, w := range ws {
			if w.owner.Host == key {
				s.nblocked--
				continue
			}
			next = append(next, w)
		}
		s.setBlocked(fh, next)
	}
	if h != nil {
		delete(s.hosts, key)
		s.saveHosts()
		s.logf("lockd: dropped the locks of %q at %s", h.name, h.addr)
	}
	for _, fh := range files {
		s.wake(fh)
	}
}

// saveHosts records the monitored hosts in the state directory.
func (s *Server) saveHosts() {
	if s.state == nil {
		return
	}
	list := make([]recordedHost, 0, len(s.hosts))
	for _, h := range s.hosts {
		list = append(list, recordedHost{name: h.name, addr: h.addr})
	}
	if err := s.state.saveClients(list); err != nil {
		s.logf("lockd: %v", err)
	}
}

func (s *Server) logf(format string, args ...any) {
	if s.cfg.Logf != nil {
		s.cfg.Logf(format, args...)
	}
}

func (s *Server) String() string { return fmt.Sprintf("lockd(state %d)", s.nsmState) }
