package lockd

import (
	"net/netip"

	"github.com/rdmafs/rdmafs/nfs3/nlm"
	"github.com/rdmafs/rdmafs/sunrpc"
)

// nlmProcs is NLM v4 as this server serves it. The _MSG procedures (the
// asynchronous forms) are served as knfsd serves them: the call is
// answered at once with no result, and the result goes back later as a
// call of the client's _RES procedure (async.go). GRANTED and GRANTED_MSG
// are the client's to serve; GRANTED_RES is taken and ignored, as this
// server calls GRANTED, not GRANTED_MSG.
func (s *Server) nlmProcs() []sunrpc.Proc {
	procs := make([]sunrpc.Proc, nlm.ProcFreeAll+1)
	for i := range procs {
		procs[i] = sunrpc.Proc{Front: procUnavail}
	}
	procs[nlm.ProcNull] = sunrpc.NullProc
	for proc, f := range map[uint32]func(*sunrpc.Request) nlm.Message{
		nlm.ProcTest: s.test, nlm.ProcLock: s.lock, nlm.ProcCancel: s.cancelBlocked, nlm.ProcUnlock: s.unlock,
	} {
		procs[proc] = s.front(synchronous(f))
		// The _MSG form, 5 on, answers through the _RES form, 10 on.
		procs[proc+5] = s.front(s.asynchronous(proc+10, f))
	}
	procs[nlm.ProcGrantedRes] = s.front(func(r *sunrpc.Request) []byte {
		var a nlm.Res
		if nlm.Unmarshal(r.Args, &a) != nil {
			return garbageArgs(r)
		}
		return voidReply(r)
	})
	procs[nlm.ProcShare] = s.front(s.share)
	procs[nlm.ProcUnshare] = s.front(s.unshare)
	procs[nlm.ProcNMLock] = s.front(synchronous(s.lock))
	procs[nlm.ProcFreeAll] = s.front(s.freeAll)
	return procs
}

// front serves a procedure for the clients the export admits: the
// transport's goroutine refuses the others, and the session's workers
// serve the calls, since a call about a file first has the export check
// the file (Config.MayLock), which reads the filesystem.
func (s *Server) front(f func(r *sunrpc.Request) []byte) sunrpc.Proc {
	return sunrpc.Proc{
		Front: func(r *sunrpc.Request) []byte {
			if !r.Peer.Admitted {
				return sunrpc.DeniedReply(r.Xid, sunrpc.RejectAuthError, sunrpc.AuthTooWeak)
			}
			return nil
		},
		Serve: f,
	}
}

// mayLock is the export's word on a call about fh (Config.MayLock), which
// TEST, LOCK and SHARE ask. CANCEL, UNLOCK and UNSHARE only take back
// what their caller holds or waits for, and do so without it: a file
// removed on the server, or whose permissions changed, must not leave
// its locks held (knfsd asks nothing either while it holds the file's
// locks: it keeps the file open, nlm_do_fopen).
func (s *Server) mayLock(r *sunrpc.Request, fh []byte) nlm.Stat {
	if s.cfg.MayLock == nil {
		return nlm.StatGranted
	}
	return s.cfg.MayLock(r, fh)
}

// synchronous answers a call with the result f gives, or GARBAGE_ARGS
// when f gives none.
func synchronous(f func(*sunrpc.Request) nlm.Message) func(*sunrpc.Request) []byte {
	return func(r *sunrpc.Request) []byte {
		res := f(r)
		if res == nil {
			return garbageArgs(r)
		}
		return reply(r, res)
	}
}

func procUnavail(r *sunrpc.Request) []byte { return sunrpc.AcceptedReply(r.Xid, sunrpc.ProcUnavail) }
func garbageArgs(r *sunrpc.Request) []byte { return sunrpc.AcceptedReply(r.Xid, sunrpc.GarbageArgs) }
func voidReply(r *sunrpc.Request) []byte   { return sunrpc.AcceptedReply(r.Xid, sunrpc.Success) }

func reply(r *sunrpc.Request, res nlm.Message) []byte {
	w := sunrpc.SuccessHeader(r.Xid)
	res.Encode(w)
	return w.Buf
}

// ownerOf is the owner of l, as the host at the call's address names it.
func ownerOf(r *sunrpc.Request, l *nlm.Lock) Owner {
	return Owner{Host: hostKey(string(l.CallerName), r.Peer.Remote.Addr()), Svid: l.Svid}
}

// test is NLM4_TEST: the lock of another owner that would conflict.
func (s *Server) test(r *sunrpc.Request) nlm.Message {
	var a nlm.TestArgs
	if nlm.Unmarshal(r.Args, &a) != nil {
		return nil
	}
	res := nlm.TestRes{Cookie: a.Cookie, Stat: s.mayLock(r, a.Lock.FH)}
	if res.Stat != nlm.StatGranted {
		return &res
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.inGrace() {
		res.Stat = nlm.StatDeniedGracePeriod
	} else if c := s.locks.Test(string(a.Lock.FH), ownerOf(r, &a.Lock), a.Exclusive, RangeOf(a.Lock.Offset, a.Lock.Length)); c != nil {
		res.Stat = nlm.StatDenied
		res.Holder = nlm.Holder{Exclusive: c.Exclusive, Svid: c.Owner.Svid, Owner: []byte(c.OH),
			Offset: c.Start, Length: c.Length()}
	}
	return &res
}

// lock is NLM4_LOCK and NLM4_NM_LOCK: grant, refuse, or queue the request
// and call the client's GRANTED when it can be granted. During the grace
// period only reclaims are granted; after it a reclaim is refused, as
// Linux's lockd refuses it.
func (s *Server) lock(r *sunrpc.Request) nlm.Message {
	var a nlm.LockArgs
	if nlm.Unmarshal(r.Args, &a) != nil {
		return nil
	}
	res := nlm.Res{Cookie: a.Cookie, Stat: s.mayLock(r, a.Lock.FH)}
	if res.Stat != nlm.StatGranted {
		return &res
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	res.Stat = s.lockLocked(r, &a)
	return &res
}

func (s *Server) lockLocked(r *sunrpc.Request, a *nlm.LockArgs) nlm.Stat {
	switch grace := s.inGrace(); {
	case s.closed:
		return nlm.StatDeniedNoLocks
	case grace && !a.Reclaim:
		return nlm.StatDeniedGracePeriod
	case !grace && a.Reclaim:
		return nlm.StatDeniedNoLocks
	}
	fh, o, rng := string(a.Lock.FH), ownerOf(r, &a.Lock), RangeOf(a.Lock.Offset, a.Lock.Length)
	_, known := s.hosts[o.Host]
	h := s.monitor(string(a.Lock.CallerName), r.Peer.Remote.Addr())
	if h == nil {
		s.logf("lockd: LOCK from %s (%q): the server keeps %d client hosts already", r.Peer, a.Lock.CallerName, s.cfg.MaxHosts)
		return nlm.StatDeniedNoLocks
	}
	o.Host = h.key // one copy of the key for all the host's locks
	forgetNew := func() {
		if !known && s.holdsNothing(h) {
			delete(s.hosts, h.key)
			s.saveHosts()
		}
	}
	switch s.locks.Lock(fh, o, string(a.Lock.Owner), a.Exclusive, rng) {
	case Granted:
		// A retransmitted blocking LOCK that is now granted waits no more.
		if i := s.findWaiter(fh, o, a.Exclusive, rng); i >= 0 {
			s.removeWaiter(fh, i)
		}
		return nlm.StatGranted
	case NoLocks:
		forgetNew()
		return nlm.StatDeniedNoLocks
	}
	if !a.Block {
		forgetNew()
		return nlm.StatDenied
	}
	if i := s.findWaiter(fh, o, a.Exclusive, rng); i >= 0 {
		return nlm.StatBlocked // a retransmission: it waits already
	}
	if h.blocked >= s.cfg.MaxBlockedPerHost || s.nblocked >= s.maxBlocked() {
		forgetNew()
		return nlm.StatDeniedNoLocks
	}
	s.addWaiter(&waiter{fh: fh, owner: o, oh: string(a.Lock.Owner), excl: a.Exclusive, rng: rng,
		cookie: append([]byte(nil), a.Cookie...), lock: copyLock(&a.Lock), host: h})
	return nlm.StatBlocked
}

// cancelBlocked is NLM4_CANCEL: the client gives up a blocked LOCK.
func (s *Server) cancelBlocked(r *sunrpc.Request) nlm.Message {
	var a nlm.CancelArgs
	if nlm.Unmarshal(r.Args, &a) != nil {
		return nil
	}
	res := nlm.Res{Cookie: a.Cookie, Stat: nlm.StatGranted}
	s.mu.Lock()
	defer s.mu.Unlock()
	fh := string(a.Lock.FH)
	if s.inGrace() {
		res.Stat = nlm.StatDeniedGracePeriod
	} else if i := s.findWaiter(fh, ownerOf(r, &a.Lock), a.Exclusive, RangeOf(a.Lock.Offset, a.Lock.Length)); i >= 0 {
		s.removeWaiter(fh, i)
	}
	return &res
}

// unlock is NLM4_UNLOCK: it also withdraws the owner's blocked requests
// in the range (nlmsvc_unlock cancels them first), and grants what waited
// on the range.
func (s *Server) unlock(r *sunrpc.Request) nlm.Message {
	var a nlm.UnlockArgs
	if nlm.Unmarshal(r.Args, &a) != nil {
		return nil
	}
	res := nlm.Res{Cookie: a.Cookie, Stat: nlm.StatGranted}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.inGrace() {
		res.Stat = nlm.StatDeniedGracePeriod
		return &res
	}
	fh, o, rng := string(a.Lock.FH), ownerOf(r, &a.Lock), RangeOf(a.Lock.Offset, a.Lock.Length)
	ws := s.blocked[fh]
	for i := len(ws) - 1; i >= 0; i-- {
		if ws[i].owner == o && ws[i].rng.overlaps(rng) {
			s.removeWaiter(fh, i)
			ws = s.blocked[fh]
		}
	}
	if s.locks.Unlock(fh, o, rng) == NoLocks {
		res.Stat = nlm.StatDeniedNoLocks
	}
	s.wake(fh)
	return &res
}

// freeAll is NLM4_FREE_ALL: a client that restarted drops everything it
// held, at any address (Linux's lockd: every host of that name).
func (s *Server) freeAll(r *sunrpc.Request) []byte {
	var a nlm.Notify
	if nlm.Unmarshal(r.Args, &a) != nil {
		return garbageArgs(r)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, key := range s.hostsMatching(string(a.Name), netip.Addr{}) {
		s.dropHost(key)
	}
	return voidReply(r)
}

func copyLock(l *nlm.Lock) nlm.Lock {
	c := *l
	c.CallerName = append([]byte(nil), l.CallerName...)
	c.FH = append([]byte(nil), l.FH...)
	c.Owner = append([]byte(nil), l.Owner...)
	return c
}
