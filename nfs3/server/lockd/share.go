package lockd

import (
	"github.com/rdmafs/rdmafs/nfs3/nlm"
	"github.com/rdmafs/rdmafs/sunrpc"
)

// DOS share reservations (NLM4_SHARE, NLM4_UNSHARE), as fs/lockd/svcshare.c
// keeps them: one per (host, owner handle) and file; a SHARE is refused
// when its access meets another's deny mode or its deny mode another's
// access. Linux's client never sends them; they are bounded per host
// like locks.
type share struct {
	host, oh string
	mode     nlm.ShareMode
	access   nlm.ShareAccess
}

type shareTable struct {
	files map[string][]share
	total int
}

func (t *shareTable) init() { t.files = make(map[string][]share) }

func (t *shareTable) dropHost(key string) {
	for fh, ss := range t.files {
		next := ss[:0]
		for _, sh := range ss {
			if sh.host != key {
				next = append(next, sh)
			} else {
				t.total--
			}
		}
		if len(next) == 0 {
			delete(t.files, fh)
		} else {
			t.files[fh] = next
		}
	}
}

func (s *Server) share(r *sunrpc.Request) []byte {
	var a nlm.ShareArgs
	if nlm.Unmarshal(r.Args, &a) != nil {
		return garbageArgs(r)
	}
	res := nlm.ShareRes{Cookie: a.Cookie, Stat: s.mayLock(r, a.Share.FH)}
	if res.Stat != nlm.StatGranted {
		return reply(r, &res)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	res.Stat = s.shareLocked(r, &a)
	return reply(r, &res)
}

func (s *Server) shareLocked(r *sunrpc.Request, a *nlm.ShareArgs) nlm.Stat {
	switch grace := s.inGrace(); {
	case s.closed:
		return nlm.StatDeniedNoLocks
	case grace && !a.Reclaim:
		return nlm.StatDeniedGracePeriod
	case !grace && a.Reclaim:
		return nlm.StatDeniedNoLocks
	}
	fh, oh := string(a.Share.FH), string(a.Share.Owner)
	key := hostKey(string(a.Share.CallerName), r.Peer.Remote.Addr())
	ss := s.shares.files[fh]
	for i := range ss {
		if ss[i].host == key && ss[i].oh == oh {
			ss[i].mode, ss[i].access = a.Share.Mode, a.Share.Access
			return nlm.StatGranted
		}
	}
	for _, sh := range ss {
		if uint32(sh.access)&uint32(a.Share.Mode) != 0 || uint32(sh.mode)&uint32(a.Share.Access) != 0 {
			return nlm.StatDenied
		}
	}
	h := s.monitor(string(a.Share.CallerName), r.Peer.Remote.Addr())
	if h == nil || h.shares >= s.cfg.MaxLocksPerHost || s.shares.total >= s.cfg.MaxLocks {
		return nlm.StatDeniedNoLocks
	}
	h.shares++
	s.shares.total++
	s.shares.files[fh] = append(ss, share{host: h.key, oh: oh, mode: a.Share.Mode, access: a.Share.Access})
	return nlm.StatGranted
}

func (s *Server) unshare(r *sunrpc.Request) []byte {
	var a nlm.ShareArgs
	if nlm.Unmarshal(r.Args, &a) != nil {
		return garbageArgs(r)
	}
	res := nlm.ShareRes{Cookie: a.Cookie, Stat: nlm.StatGranted}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.inGrace() {
		res.Stat = nlm.StatDeniedGracePeriod
		return reply(r, &res)
	}
	fh, oh := string(a.Share.FH), string(a.Share.Owner)
	key := hostKey(string(a.Share.CallerName), r.Peer.Remote.Addr())
	ss := s.shares.files[fh]
	for i, sh := range ss {
		if sh.host == key && sh.oh == oh {
			s.shares.files[fh] = append(ss[:i:i], ss[i+1:]...)
			if len(s.shares.files[fh]) == 0 {
				delete(s.shares.files, fh)
			}
			s.shares.total--
			if h := s.hosts[key]; h != nil {
				h.shares--
			}
			break
		}
	}
	return reply(r, &res)
}
