package lockd

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"strconv"

	"github.com/rdmafs/rdmafs/nfs3"
	"github.com/rdmafs/rdmafs/nfs3/nlm"
	"github.com/rdmafs/rdmafs/sunrpc"
)

// maxResCalls bounds the _RES calls under way at once: past it, a result
// is dropped, as a lost datagram would be (the client retransmits its
// _MSG call), so that a client flooding the server with _MSG calls costs
// it no more than that many connections.
const maxResCalls = 64

// asynchronous serves the _MSG form of a procedure, as knfsd does
// (nlm4svc_callback): the call gets an empty reply at once, and f's result
// goes to the calling host's lockd, found through its rpcbind, as the
// arguments of procedure resProc.
func (s *Server) asynchronous(resProc uint32, f func(*sunrpc.Request) nlm.Message) func(*sunrpc.Request) []byte {
	return func(r *sunrpc.Request) []byte {
		res := f(r)
		if res == nil {
			return garbageArgs(r)
		}
		addr := r.Peer.Remote.Addr()
		s.mu.Lock()
		start := !s.closed && s.resCalls < maxResCalls && addr.IsValid()
		if start {
			s.resCalls++
			s.bg.Add(1)
		}
		s.mu.Unlock()
		if !start {
			s.logf("lockd: %s to %s dropped (%d under way)", nlm.ProcNames[resProc], addr, maxResCalls)
			return voidReply(r)
		}
		go func() {
			defer s.bg.Done()
			if err := s.callClient(addr, resProc, res, nil); err != nil {
				s.logf("lockd: %v", err)
			}
			s.mu.Lock()
			s.resCalls--
			s.mu.Unlock()
		}()
		return voidReply(r)
	}
}

// callClient calls procedure proc with args on the lockd of the client
// host at addr, which it finds through that host's rpcbind (NLM v4 over
// TCP), and decodes the reply into res unless res is nil.
func (s *Server) callClient(addr netip.Addr, proc uint32, args, res nlm.Message) error {
	ctx, cancel := context.WithTimeout(s.ctx, 4*s.cfg.CallbackTimeout)
	defer cancel()
	host := addr.String()
	port, err := nfs3.GetPort(ctx, nfs3.DialConfig{Host: host, Timeout: s.cfg.CallbackTimeout}, nlm.Program, nlm.Version)
	if err != nil {
		return fmt.Errorf("%s to %s: %w", nlm.ProcNames[proc], host, err)
	}
	rpc := sunrpc.NewClient(sunrpc.NewTCP(sunrpc.TCPConfig{Addr: net.JoinHostPort(host, strconv.Itoa(port)), MaxRecord: 64 << 10}),
		sunrpc.Config{Prog: nlm.Program, Vers: nlm.Version, Timeout: s.cfg.CallbackTimeout, Retrans: 1, Soft: true,
			Server: host, ProcNames: nlm.ProcNames})
	defer rpc.Close()
	call := rpc.NewCall(proc, nil)
	defer call.Release()
	e := call.Args()
	args.Encode(&e)
	call.SetArgs(e)
	if err := rpc.Do(ctx, call); err != nil {
		return fmt.Errorf("%s to %s: %w", nlm.ProcNames[proc], host, err)
	}
	if res == nil {
		return nil
	}
	if err := nlm.Unmarshal(call.Reply.Body, res); err != nil {
		return fmt.Errorf("%s to %s: %w", nlm.ProcNames[proc], host, err)
	}
	return nil
}
