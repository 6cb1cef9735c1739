package lockd

import (
	"fmt"

	"github.com/rdmafs/rdmafs/nfs3/nlm"
)

// waiter is a blocked LOCK: queued on its file until the locks in its way
// go, then granted and announced to the client by a GRANTED call.
type waiter struct {
	fh     string
	owner  Owner
	oh     string
	excl   bool
	rng    Range
	cookie []byte
	lock   nlm.Lock // as the LOCK named it, for GRANTED
	host   *host
}

// maxBlocked bounds the blocked requests of every host together: a
// quarter of the locks, as one keeps up to 4 KB (its cookie, and the
// names and handles GRANTED repeats).
func (s *Server) maxBlocked() int {
	return max(1, min(s.cfg.MaxBlockedPerHost*s.cfg.MaxHosts, s.cfg.MaxLocks/4))
}

func (s *Server) findWaiter(fh string, o Owner, excl bool, rng Range) int {
	for i, w := range s.blocked[fh] {
		if w.owner == o && w.excl == excl && w.rng == rng {
			return i
		}
	}
	return -1
}

func (s *Server) addWaiter(w *waiter) {
	s.blocked[w.fh] = append(s.blocked[w.fh], w)
	s.nblocked++
	w.host.blocked++
}

func (s *Server) removeWaiter(fh string, i int) {
	ws := s.blocked[fh]
	ws[i].host.blocked--
	s.nblocked--
	s.setBlocked(fh, append(ws[:i:i], ws[i+1:]...))
}

func (s *Server) setBlocked(fh string, ws []*waiter) {
	if len(ws) == 0 {
		delete(s.blocked, fh)
	} else {
		s.blocked[fh] = ws
	}
}

// wake grants, in the order they came, the blocked requests on fh that no
// lock stands in the way of any more, and calls each client's GRANTED.
func (s *Server) wake(fh string) {
	ws := s.blocked[fh]
	var next []*waiter
	for _, w := range ws {
		if s.closed || s.locks.Lock(fh, w.owner, w.oh, w.excl, w.rng) != Granted {
			next = append(next, w)
			continue
		}
		s.nblocked--
		w.host.blocked--
		s.bg.Add(1)
		go func() {
			defer s.bg.Done()
			s.sendGranted(w)
		}()
	}
	s.setBlocked(fh, next)
}

// sendGranted calls NLM4_GRANTED on the client's lockd, which it finds as
// knfsd does, through the client host's rpcbind (NLM v4 over TCP). If the
// client cannot be reached, or answers that it no longer waits, the lock
// is released again.
func (s *Server) sendGranted(w *waiter) {
	err := s.callGranted(w)
	if err == nil {
		return
	}
	s.logf("lockd: %v: releasing the lock", err)
	s.mu.Lock()
	defer s.mu.Unlock()
	s.locks.Unlock(w.fh, w.owner, w.rng)
	s.wake(w.fh)
}

func (s *Server) callGranted(w *waiter) error {
	s.mu.Lock()
	addr := w.host.addr
	s.mu.Unlock()
	if !addr.IsValid() {
		return fmt.Errorf("GRANTED to %q: no address", w.owner.Host)
	}
	var res nlm.Res
	args := nlm.TestArgs{Cookie: w.cookie, Exclusive: w.excl, Lock: w.lock}
	if err := s.callClient(addr, nlm.ProcGranted, &args, &res); err != nil {
		return fmt.Errorf("%q: %w", w.owner.Host, err)
	}
	if res.Stat != nlm.StatGranted {
		return fmt.Errorf("GRANTED to %q: the client answered %v", w.owner.Host, res.Stat)
	}
	return nil
}
