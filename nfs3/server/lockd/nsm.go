package lockd

import (
	"context"
	"net/netip"
	"os"
	"strings"
	"time"

	"github.com/rdmafs/rdmafs/nfs3"
	"github.com/rdmafs/rdmafs/nfs3/nlm"
	"github.com/rdmafs/rdmafs/sunrpc"
)

// nsmProcs is the minimal NSM (statd) the server runs for itself: it
// answers SM_STAT with its own state number, takes SM_NOTIFY from a client
// that rebooted (dropping what that client held), and refuses to monitor
// hosts for anyone else (SM_MON answers stat_fail: it is not the host's
// statd). See the package doc for why it is not the host's rpc.statd.
func (s *Server) nsmProcs() []sunrpc.Proc {
	procs := make([]sunrpc.Proc, nlm.NSMProcNotify+1)
	procs[nlm.NSMProcNull] = sunrpc.NullProc
	procs[nlm.NSMProcStat] = sunrpc.Proc{Front: func(r *sunrpc.Request) []byte {
		var a nlm.SMName
		if nlm.Unmarshal(r.Args, &a) != nil {
			return garbageArgs(r)
		}
		return reply(r, &nlm.SMStatRes{Result: nlm.SMSuccess, State: s.NSMState()})
	}}
	procs[nlm.NSMProcMon] = sunrpc.Proc{Front: func(r *sunrpc.Request) []byte {
		var a nlm.SMMon
		if nlm.Unmarshal(r.Args, &a) != nil {
			return garbageArgs(r)
		}
		return reply(r, &nlm.SMStatRes{Result: nlm.SMFail, State: s.NSMState()})
	}}
	unmon := sunrpc.Proc{Front: func(r *sunrpc.Request) []byte {
		return reply(r, &nlm.SMStat{State: s.NSMState()})
	}}
	procs[nlm.NSMProcUnmon] = unmon
	procs[nlm.NSMProcUnmonAll] = unmon
	procs[nlm.NSMProcSimuCrash] = sunrpc.Proc{Front: procUnavail}
	procs[nlm.NSMProcNotify] = sunrpc.Proc{Front: s.smNotify}
	return procs
}

// smNotify is SM_NOTIFY from a client's statd (its sm-notify) after the
// client restarted: the server drops the locks of the host it names, and
// of every host at the address it comes from. The address matters most:
// sm-notify names its host by its canonical name ("localhost" for
// 127.0.0.1), which need not be the caller_name its lockd sends, and
// statd's own matching of names through DNS has no place in a call the
// transport's goroutine answers.
func (s *Server) smNotify(r *sunrpc.Request) []byte {
	var a nlm.SMStatChange
	if nlm.Unmarshal(r.Args, &a) != nil {
		return garbageArgs(r)
	}
	from := r.Peer.Remote.Addr()
	s.mu.Lock()
	defer s.mu.Unlock()
	if a.State == s.nsmState && string(a.MonName) == s.notifyName() {
		// The server's own notice of its restart, come back: a client it
		// recorded on this host has no statd of its own, and rpcbind
		// gave this NSM for it.
		return voidReply(r)
	}
	for _, key := range s.hostsMatching(string(a.MonName), from) {
		s.logf("lockd: SM_NOTIFY from %s: %q restarted (state %d)", r.Peer, a.MonName, a.State)
		s.dropHost(key)
	}
	return voidReply(r)
}

// notifyRestart tells a client that held locks before this restart that
// the server restarted (SM_NOTIFY to the statd of its host, found through
// its rpcbind), so that its lockd reclaims them within the grace period.
// It tries three times, a few seconds apart.
func (s *Server) notifyRestart(p recordedHost) {
	if !p.addr.IsValid() {
		return
	}
	ch := nlm.SMStatChange{MonName: []byte(s.notifyName()), State: s.nsmState}
	var err error
	for try := range 3 {
		if try > 0 {
			select {
			case <-time.After(time.Duration(try) * 2 * time.Second):
			case <-s.ctx.Done():
				return
			}
		}
		if err = s.notifyOnce(p, &ch); err == nil {
			return
		}
	}
	s.logf("lockd: telling %q (%s) of the restart: %v", p.name, p.addr, err)
}

func (s *Server) notifyOnce(p recordedHost, ch *nlm.SMStatChange) error {
	ctx, cancel := context.WithTimeout(s.ctx, 3*s.cfg.CallbackTimeout)
	defer cancel()
	c, err := nlm.DialNSM(ctx, nfs3.DialConfig{Host: p.addr.String(), Timeout: s.cfg.CallbackTimeout})
	if err != nil {
		return err
	}
	defer c.Close()
	return c.Notify(ctx, ch)
}

// notifyName is how the server names itself in SM_NOTIFY.
func (s *Server) notifyName() string {
	if s.cfg.Name != "" {
		return s.cfg.Name
	}
	name, _ := os.Hostname()
	return name
}

// hostsMatching returns the keys of the monitored hosts a notice of
// monName's restart concerns: the hosts of that caller_name (in any case),
// the hosts at that address if monName is one, and the hosts at address
// from if it is valid.
func (s *Server) hostsMatching(monName string, from netip.Addr) []string {
	ip, err := netip.ParseAddr(monName)
	if err != nil {
		ip = netip.Addr{}
	}
	var names []string
	for key, h := range s.hosts {
		if strings.EqualFold(h.name, monName) || (ip.IsValid() && h.addr == ip.Unmap()) || (from.IsValid() && h.addr == from) {
			names = append(names, key)
		}
	}
	return names
}
