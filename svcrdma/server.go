package svcrdma

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"sync"
	"time"

	"github.com/rdmafs/rdmafs/rpcrdma"
	"github.com/rdmafs/rdmafs/sunrpc"
	"github.com/rdmafs/rdmafs/verbs"
)

// Config configures a Server.
type Config struct {
	Provider verbs.Provider
	Addr     string // host:port to listen on
	// Credits granted to each client (at most what it asks for); Linux
	// svcrdma grants 64. Default 64.
	Credits int
	// MaxInline is the largest message sent or received inline; default
	// 4096.
	MaxInline int
	// MaxIO is the largest chunk the server moves for one call; default
	// 1 MiB plus room for a call's headers.
	MaxIO int
	// Service serves the calls: each connection runs a session of it
	// (sunrpc.Session), which places READ data as the reply's Placement
	// says. Its clients count as admitted (Admit has let them in) and as
	// calling from a secure port, as knfsd's svcrdma counts them. Its
	// connections count against its MaxConns: when it ends a session to
	// make room for another connection, the connection ends.
	Service *sunrpc.Server
	// Budget is the memory the connections' buffers beyond each
	// connection's first come out of; when it is spent, a connection
	// makes do with the buffers it has. Default: the Service's memory
	// budget, which TCP call records come out of too.
	Budget Budget
	// Admit, if set, decides whether a client at the given address
	// (host:port) may connect; a refused request is rejected before the
	// server sets up anything for it.
	Admit func(remoteAddr string) bool
	Logf  func(format string, args ...any)
}

// Server listens for RPC-over-RDMA connections.
type Server struct {
	cfg Config
	dev verbs.Device
	pd  verbs.PD
	l   verbs.Listener

	mu    sync.Mutex
	conns map[*svcConn]struct{}
	wg    sync.WaitGroup
	done  chan struct{}
}

// Listen starts listening at cfg.Addr.
func Listen(ctx context.Context, cfg Config) (*Server, error) {
	if cfg.Credits <= 0 {
		cfg.Credits = 64
	}
	if cfg.MaxInline <= 0 {
		cfg.MaxInline = 4096
	}
	if cfg.MaxIO <= 0 {
		cfg.MaxIO = 1<<20 + 64<<10
	}
	if cfg.Service == nil {
		return nil, errors.New("svcrdma: server without a service")
	}
	if cfg.Budget == nil {
		cfg.Budget = cfg.Service
	}
	s := &Server{cfg: cfg, conns: make(map[*svcConn]struct{}), done: make(chan struct{})}
	var err error
	if s.dev, err = cfg.Provider.Open(ctx, "", cfg.Addr); err != nil {
		return nil, err
	}
	if s.pd, err = s.dev.AllocPD(); err != nil {
		s.dev.Close()
		return nil, err
	}
	if s.l, err = s.pd.Listen(cfg.Addr); err != nil {
		s.pd.Close()
		s.dev.Close()
		return nil, err
	}
	return s, nil
}

// Addr is the address the server listens on.
func (s *Server) Addr() string { return s.l.Addr() }

// Serve accepts connections until Close.
func (s *Server) Serve() error {
	for {
		req, err := s.l.Accept(context.Background())
		if err != nil {
			select {
			case <-s.done:
				return nil
			default:
			}
			return fmt.Errorf("svcrdma: accept: %w", err)
		}
		if s.cfg.Admit != nil && !s.cfg.Admit(req.RemoteAddr()) {
			s.logf("svcrdma: connection from %s refused: not among the export's clients", req.RemoteAddr())
			req.Reject(nil)
			continue
		}
		c, err := s.accept(req)
		if err != nil {
			s.logf("svcrdma: connection from %s: %v", req.RemoteAddr(), err)
			continue
		}
		s.mu.Lock()
		select {
		case <-s.done:
			s.mu.Unlock()
			c.close()
			return nil
		default:
		}
		s.conns[c] = struct{}{}
		s.wg.Add(1)
		s.mu.Unlock()
		go func() {
			defer s.wg.Done()
			c.run()
			s.mu.Lock()
			delete(s.conns, c)
			s.mu.Unlock()
		}()
	}
}

// Close stops listening, ends every connection and waits for them.
func (s *Server) Close() error {
	s.mu.Lock()
	select {
	case <-s.done:
		s.mu.Unlock()
		return nil
	default:
	}
	close(s.done)
	conns := make([]*svcConn, 0, len(s.conns))
	for c := range s.conns {
		conns = append(conns, c)
	}
	s.mu.Unlock()
	s.l.Close()
	for _, c := range conns {
		c.conn.Disconnect()
	}
	s.wg.Wait()
	s.pd.Close()
	return s.dev.Close()
}

func (s *Server) logf(format string, args ...any) {
	if s.cfg.Logf != nil {
		s.cfg.Logf(format, args...)
	}
}

// accept takes a connection request: it learns the client's inline sizes
// and sets up the connection's buffers.
func (s *Server) accept(req verbs.ConnRequest) (*svcConn, error) {
	peer, _ := rpcrdma.DecodePrivateData(req.PrivateData())
	cfg := &s.cfg
	c := &svcConn{s: s, calls: make(map[uint32]*svcCall), lost: make(chan struct{})}
	if ap, err := netip.ParseAddrPort(req.RemoteAddr()); err == nil {
		c.remote = netip.AddrPortFrom(ap.Addr().Unmap(), ap.Port())
		c.host = c.remote.Addr()
	}
	// What the client sends and receives inline.
	c.recvInline = min(cfg.MaxInline, peer.SendSize)
	c.sendInline = min(cfg.MaxInline, peer.RecvSize)
	c.remoteInv = peer.Flags&rpcrdma.PrivRemoteInvalidate != 0
	if err := c.newBuffers(); err != nil {
		req.Reject(nil)
		return nil, err
	}
	caps := s.dev.Caps()
	own := rpcrdma.PrivateData{SendSize: cfg.MaxInline, RecvSize: cfg.MaxInline}
	var err error
	c.conn, err = req.Accept(verbs.ConnConfig{
		SendDepth: 8*cfg.Credits + 8, RecvDepth: cfg.Credits + 8,
		MaxSendSGE: 2, MaxRecvSGE: 1,
		ResponderResources: 0,
		// The server pulls read chunks: as many RDMA Reads at once as
		// the client lets it and the device can.
		InitiatorDepth: uint8(min(int(req.ResponderResources()), max(caps.MaxQPInitRdAtom, 1), 255)),
		PrivateData:    own.Encode(),
		Timeout:        10 * time.Second,
	})
	if err != nil {
		c.freeMemory()
		return nil, err
	}
	// Twice the credits: a call's slot is free only once its reply's Send
	// completed, and the client may already send its next call.
	c.table = make([]svcCall, 2*cfg.Credits)
	for i := range c.table {
		c.table[i] = svcCall{c: c, idx: i}
		c.free = append(c.free, &c.table[i])
	}
	return c, nil
}
