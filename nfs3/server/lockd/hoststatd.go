package lockd

import (
	"context"
	"net"
	"net/netip"
	"strconv"
	"time"

	"github.com/rdmafs/rdmafs/nfs3"
	"github.com/rdmafs/rdmafs/nfs3/nlm"
	"github.com/rdmafs/rdmafs/sunrpc"
)

// On a host whose rpc.statd runs, NSM's registration with rpcbind is
// statd's, so a client's reboot notice reaches statd, not this server.
// With Config.HostStatd the server then does what Linux's lockd does: it
// asks statd to monitor each new client host (SM_MON, naming the host by
// its address as lockd does by default, nsm_use_hostnames=0), and statd,
// told of the host's reboot, calls back NLM version 3's SM_NOTIFY
// procedure, which ServeUDP answers, over UDP on the port rpcbind gives
// for NLM version 3 over UDP.

// statdCallbackProcs is NLM version 3 as the server serves it: NULL and
// the SM_NOTIFY callback of the host's statd.
func (s *Server) statdCallbackProcs() []sunrpc.Proc {
	procs := make([]sunrpc.Proc, nlm.ProcSMNotify+1)
	for i := range procs {
		procs[i] = sunrpc.Proc{Front: procUnavail}
	}
	procs[nlm.ProcNull] = sunrpc.NullProc
	procs[nlm.ProcSMNotify] = sunrpc.Proc{Front: s.statdCallback}
	return procs
}

// statdCallback is the host's statd telling that a monitored host
// restarted: its locks go. Only the local statd may say so: a call from
// loopback and a reserved port (nlm_privileged_requester).
func (s *Server) statdCallback(r *sunrpc.Request) []byte {
	var a nlm.SMStatus
	if nlm.Unmarshal(r.Args, &a) != nil {
		return garbageArgs(r)
	}
	if !r.Peer.Remote.Addr().IsLoopback() || !r.Peer.Secure {
		s.logf("lockd: SM_NOTIFY callback from %v, not the local statd: ignored", r.Peer.Remote)
		return voidReply(r)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, key := range s.hostsMatching(string(a.MonName), netip.Addr{}) {
		s.logf("lockd: statd: %q restarted (state %d)", a.MonName, a.State)
		s.dropHost(key)
	}
	return voidReply(r)
}

// monitorWithStatd asks the host's statd, in the background, to monitor
// h. s.mu is held.
func (s *Server) monitorWithStatd(h *host) {
	if !s.cfg.HostStatd || !h.addr.IsValid() || s.closed {
		return
	}
	mon := nlm.SMMon{MonID: nlm.SMMonID{MonName: []byte(h.addr.String()),
		MyID: nlm.SMMyID{MyName: []byte("127.0.0.1"), Prog: nlm.Program, Vers: 3, Proc: nlm.ProcSMNotify}}}
	s.bg.Add(1)
	go func() {
		defer s.bg.Done()
		ctx, cancel := context.WithTimeout(s.ctx, 3*s.cfg.CallbackTimeout)
		defer cancel()
		c, err := nlm.DialNSM(ctx, nfs3.DialConfig{Host: "127.0.0.1", ReservedPort: true, Timeout: s.cfg.CallbackTimeout})
		if err == nil {
			_, err = c.Mon(ctx, &mon)
			c.Close()
		}
		if err != nil {
			s.logf("lockd: asking the host's statd to monitor %s: %v: its reboot will not drop its locks", mon.MonID.MonName, err)
		}
	}()
}

// HostStatdRuns reports whether this host's rpcbind has NSM registered (a
// statd runs), in which case serve's own NSM cannot be registered and the
// server should run with Config.HostStatd.
func HostStatdRuns(ctx context.Context) bool {
	probe, err := net.DialTimeout("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(nfs3.PortmapPort)), time.Second)
	if err != nil {
		return false // no rpcbind: nobody would find a statd
	}
	probe.Close()
	_, err = nfs3.GetPort(ctx, nfs3.DialConfig{Host: "127.0.0.1", Timeout: 2 * time.Second}, nlm.NSMProgram, nlm.NSMVersion)
	return err == nil
}
