package lockd

import (
	"context"
	"errors"
	"time"

	"github.com/rdmafs/rdmafs/nfs3/nlm"
	"github.com/rdmafs/rdmafs/sunrpc"
)

// How a waiting lock learns that it is granted. The server grants a
// blocked lock by calling GRANTED on this host's lock manager, which it
// finds through this host's portmapper.
//
// When rdmafs's callback service is the one registered there, a waiting
// LOCK asks the server to queue it (block), and the GRANTED callback ends
// the wait, within moments of the release; the LOCK is sent again every
// pollWithCallback (Linux's NLMCLNT_POLL_TIMEOUT) in case a callback was
// lost.
//
// When it is not (the kernel's lockd is registered, as on a host that is
// itself an NFS server or client, or there is no portmapper), the server's
// GRANTED would go to the other lock manager, which refuses it, and
// Linux's lockd then drops the grant. So rdmafs does not ask to be queued:
// it polls, sending a LOCK without block after pollFirst, then at doubling
// intervals up to pollMaxNoCallback, so that a waiter still gets a lock
// within about a second of its release, at the cost of one small call a
// second per waiter while a lock is held long. A waiter queued on the
// server (a kernel client's) gets a released lock first.
const (
	pollWithCallback  = 30 * time.Second
	pollFirst         = 25 * time.Millisecond
	pollMaxNoCallback = time.Second
	// graceRetry is how long a call answered NLM4_DENIED_GRACE_PERIOD
	// waits before it is sent again (Linux's NLMCLNT_GRACE_WAIT).
	graceRetry = 5 * time.Second
)

// errInterrupted is the error of a blocked lock given up because its
// caller got a signal.
var errInterrupted = errors.New("lockd: interrupted")

// waiter is a blocked LOCK waiting for the server's GRANTED.
type waiter struct {
	fh        string
	owner     uint64
	svid      int32
	off, n    uint64
	exclusive bool
	cred      *sunrpc.Cred  // the file's: the journal's CANCEL sends it
	queued    bool          // asked the server to queue it (block)
	granted   chan struct{} // closed by the GRANTED callback
}

// matches reports whether a GRANTED for lock l is w's, as Linux's
// nlmclnt_grant matches: same file, owner and range.
func (w *waiter) matches(l *nlm.Lock) bool {
	return l.Svid == w.svid && l.Offset == w.off && l.Length == w.n && string(l.FH) == w.fh
}

// Interrupted, given to Lock, tells whether the caller's wait should end:
// it is called when ctx's Done closes, and then every
// interruptPoll, and returns true once the caller has a signal to take.
type Interrupted func() bool

// interruptPoll is how often a lock request whose context ended checks
// whether its caller has a signal pending.
const interruptPoll = 100 * time.Millisecond

// Lock takes owner's lock on r of fh, opened with cred, a write lock if
// exclusive; holder is who asks, for Test to name. Without
// wait it fails with a *StatError of NLM4_DENIED (Errno: EAGAIN) when
// another owner holds a conflicting lock. With wait it waits for the lock
// until it is granted or interrupted says the caller has a signal; then it
// sends CANCEL and returns an error whose Errno is EINTR.
func (c *Client) Lock(ctx context.Context, cred *sunrpc.Cred, fh []byte, owner uint64, holder Holder, r Range, exclusive, wait bool, interrupted Interrupted) error {
	key := heldKey{string(fh), owner}
	poll, pollMax, queue := c.pollPolicy()
	block := wait && queue
	c.mu.Lock()
	l := c.lockLocked(fh, owner, r)
	c.owners.holders[owner] = holder
	w := &waiter{fh: key.fh, owner: owner, svid: l.Svid, off: l.Offset, n: l.Length, exclusive: exclusive,
		cred: cloneCred(cred), queued: block, granted: make(chan struct{})}
	if wait {
		c.waiters[w] = struct{}{}
		if block {
			c.journalLocked()
		}
	}
	c.mu.Unlock()
	defer func() {
		c.mu.Lock()
		delete(c.waiters, w)
		if block {
			c.journalLocked()
		}
		if len(c.held[key]) == 0 {
			c.forgetOwnerLocked(owner)
		}
		c.mu.Unlock()
	}()

	// The calls go out under a context that the FUSE interrupt does not
	// end: a Go program's caller is interrupted all the time (SIGURG),
	// and a lock call cut short would leave the server unsure whether it
	// granted the lock.
	callCtx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	defer cancel()
	stopWatch := c.watchInterrupt(ctx, interrupted, cancel)
	defer stopWatch()

	for {
		args := nlm.LockArgs{Cookie: c.cookie(), Block: block, Exclusive: exclusive, Lock: l, State: c.state()}
		var res nlm.Res
		err := c.call(callCtx, cred, nlm.ProcLock, &args, &res)
		if err != nil {
			if callCtx.Err() != nil {
				c.cancel(ctx, cred, key, r, &l, exclusive, block)
				return errInterrupted
			}
			return err
		}
		switch res.Stat {
		case nlm.StatGranted:
			c.setHeld(key, cred, r, exclusive, false)
			return nil
		case nlm.StatDeniedGracePeriod:
			if err := c.graceWait(callCtx); err != nil {
				return errInterrupted
			}
			continue
		case nlm.StatBlocked:
			if !wait {
				return &StatError{"LOCK", nlm.StatDenied}
			}
		case nlm.StatDenied:
			if !wait || block {
				return &StatError{"LOCK", res.Stat}
			}
		default:
			return &StatError{"LOCK", res.Stat}
		}
		// Blocked, or polling: wait for the GRANTED callback or the
		// time to ask again.
		t := time.NewTimer(poll)
		select {
		case <-w.granted:
			t.Stop()
			c.setHeld(key, cred, r, exclusive, false)
			return nil
		case <-t.C:
		case <-callCtx.Done():
			t.Stop()
			if block {
				c.cancel(ctx, cred, key, r, &l, exclusive, block)
			}
			return errInterrupted
		case <-c.quit:
			t.Stop()
			return errInterrupted
		}
		poll = min(2*poll, pollMax)
	}
}

// watchInterrupt calls cancel once ctx has ended and interrupted says the
// caller has a signal. It returns the function that stops watching.
func (c *Client) watchInterrupt(ctx context.Context, interrupted Interrupted, cancel func()) func() {
	stop := make(chan struct{})
	go func() {
		select {
		case <-ctx.Done():
		case <-stop:
			return
		}
		for {
			if interrupted == nil || interrupted() {
				cancel()
				return
			}
			select {
			case <-stop:
				return
			case <-time.After(interruptPoll):
			}
		}
	}()
	return func() { close(stop) }
}

// cancel withdraws a LOCK the caller gave up on: one queued on the server
// (CANCEL), or one whose call was cut short. The server may have granted
// it meanwhile, so an UNLOCK of its range follows unless CANCEL found it
// still queued: after an interrupted F_SETLKW the owner holds nothing of
// that range, as with the kernel's client ("ensure that we remove the lock
// altogether").
func (c *Client) cancel(ctx context.Context, cred *sunrpc.Cred, key heldKey, r Range, l *nlm.Lock, exclusive, block bool) {
	cctx, done := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
	defer done()
	if block {
		args := nlm.CancelArgs{Cookie: c.cookie(), Block: block, Exclusive: exclusive, Lock: *l}
		var res nlm.Res
		err := c.call(cctx, cred, nlm.ProcCancel, &args, &res)
		if err == nil && res.Stat == nlm.StatGranted {
			return // withdrawn while still queued
		}
		if err != nil {
			c.logf("lockd: CANCEL of an interrupted lock: %v", err)
		}
	}
	un := nlm.UnlockArgs{Cookie: c.cookie(), Lock: *l}
	var ures nlm.Res
	if err := c.call(cctx, cred, nlm.ProcUnlock, &un, &ures); err != nil {
		c.logf("lockd: UNLOCK after an interrupted lock: %v", err)
		return
	}
	c.setHeld(key, cred, r, false, true)
}

// granted is the GRANTED callback: it wakes the waiter of l and tells
// whether there was one.
func (c *Client) granted(l *nlm.Lock) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	for w := range c.waiters {
		if w.matches(l) {
			select {
			case <-w.granted:
			default:
				close(w.granted)
			}
			return true
		}
	}
	return false
}

// pollPolicy returns how long a waiting lock first waits before asking
// again, the longest it waits, and whether it asks the server to queue it
// (the server can call rdmafs back).
func (c *Client) pollPolicy() (first, most time.Duration, queue bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.callbacks {
		return pollWithCallback, pollWithCallback, true
	}
	return pollFirst, pollMaxNoCallback, false
}

func (c *Client) logf(format string, args ...any) {
	if c.cfg.Logf != nil {
		c.cfg.Logf(format, args...)
	}
}
