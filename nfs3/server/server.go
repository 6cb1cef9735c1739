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

	"github.com/rdmafs/rdmafs/sunrpc"
)

// Options configure a Server.
type Options struct {
	Root     string // directory to export; must exist and be a directory
	ReadOnly bool
	Export   Export // security options (knfsd's exports(5) defaults when zero)
	Workers  int    // calls served at once per connection; 0 = DefaultWorkers
	// MaxConns bounds the connections served at once, TCP and RDMA
	// (svcrdma's sessions) together; when a new one comes, the least
	// recently active goes, as knfsd does. 0 means DefaultMaxConns.
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
	rpc        *sunrpc.Server // the RPC service NFS and MOUNT are registered on

	// testHook, when set (by tests, before serving), runs in the worker
	// before each call.
	testHook func(*worker, *call)

	closeOnce sync.Once
}

// maxRecord is the largest valid call: a WRITE of maxIO bytes (FSINFO's
// wtmax) with the largest RPC header (two 400-byte auth bodies) and
// handle; every other call is smaller. A TCP record that would be longer
// ends its connection before anything of it is read.
const maxRecord = maxIO + 1024

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
	s := &Server{opts: opts, rootfd: fd}
	if err := s.init(); err != nil {
		unix.Close(fd)
		return nil, err
	}
	s.rpc = sunrpc.NewServer(sunrpc.ServerConfig{Workers: opts.Workers, MaxRecord: maxRecord, MaxConns: opts.MaxConns,
		IdleTimeout: opts.IdleTimeout, Admit: s.admit, LargeCalls: s.largeCalls, Logf: opts.Logf})
	s.register(s.rpc)
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

// RPC is the RPC service NFS v3 and MOUNT v3 are registered on; other
// programs served on the same port register there too.
func (s *Server) RPC() *sunrpc.Server { return s.rpc }

// Serve accepts connections on l and serves ONC RPC over TCP record marking
// on each, MOUNT v3 and NFSv3 alike, until l fails or Close. After Close it
// returns ErrClosed.
func (s *Server) Serve(l net.Listener) error { return s.rpc.Serve(l) }

// Close stops Serve, closes every connection and session, waits for their
// goroutines and releases the root. It is safe to call more than once.
func (s *Server) Close() error {
	s.closeOnce.Do(func() {
		s.rpc.Close()
		s.files.closeAll()
		unix.Close(s.rootfd)
	})
	return nil
}
