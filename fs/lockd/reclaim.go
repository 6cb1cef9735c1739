package lockd

import (
	"context"
	"strconv"
	"time"

	"github.com/rdmafs/rdmafs/nfs3/nlm"
	"github.com/rdmafs/rdmafs/sunrpc"
)

// A server that restarts forgets every lock, then, for its grace period
// (90 s for Linux's lockd), grants only reclaims: LOCKs with Reclaim set,
// of locks their clients held before. Linux's client learns of the restart
// from its statd, which the server's sm-notify tells. rdmafs cannot hear
// those notifications (this host's statd calls the kernel's lockd), so it
// watches the server's statd itself: it asks for the server's state number
// every statdPoll, well within the grace period, and
// a changed number is a restart. A call answered NLM4_DENIED_GRACE_PERIOD
// is one too. Either way it reclaims every lock it holds, and calls that
// are not reclaims wait until it is done.

// statdPoll is how often the server's state number is asked while locks
// are held.
const statdPoll = 15 * time.Second

// state returns this client's NSM state number for LOCK's State. rdmafs
// does not own this host's statd: it sends 0, as Linux's lockd does when
// it does not know its own.
func (c *Client) state() int32 { return 0 }

// graceWait waits out a call answered NLM4_DENIED_GRACE_PERIOD: the server
// restarted, so the held locks are reclaimed first, then the call is sent
// again after graceRetry.
func (c *Client) graceWait(ctx context.Context) error {
	c.startReclaim("the server answered NLM4_DENIED_GRACE_PERIOD")
	c.mu.Lock()
	done := c.grace
	c.mu.Unlock()
	if done != nil {
		select {
		case <-done:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	t := time.NewTimer(graceRetry)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// startReclaim reclaims every held lock in the background, unless a
// reclaim is under way.
func (c *Client) startReclaim(why string) {
	c.mu.Lock()
	if c.grace != nil || len(c.held) == 0 {
		c.mu.Unlock()
		return
	}
	done := make(chan struct{})
	c.grace = done
	type one struct {
		key  heldKey
		cred *sunrpc.Cred
		seg  segment
	}
	var all []one
	for k, h := range c.held {
		for _, s := range h {
			all = append(all, one{k, c.creds[k], s})
		}
	}
	c.mu.Unlock()
	c.logf("lockd: server %s restarted (%s): reclaiming %d locks", c.cfg.Dial.Host, why, len(all))
	c.wg.Add(1)
	go func() {
		defer c.wg.Done()
		defer func() {
			c.mu.Lock()
			c.grace = nil
			c.mu.Unlock()
			close(done)
		}()
		ctx, cancel := context.WithTimeout(c.bg, 90*time.Second)
		defer cancel()
		lost := 0
		for _, o := range all {
			l := c.nlmLock([]byte(o.key.fh), o.key.owner, o.seg.Range)
			args := nlm.LockArgs{Cookie: c.cookie(), Exclusive: o.seg.Exclusive, Lock: l, Reclaim: true, State: c.state()}
			var res nlm.Res
			if err := c.call(ctx, o.cred, nlm.ProcLock, &args, &res); err != nil || res.Stat != nlm.StatGranted {
				lost++
				c.logf("lockd: reclaim of a lock (svid %d, bytes %d-%d) failed: %v %v", l.Svid, o.seg.Start, o.seg.End, res.Stat, err)
			}
		}
		if lost > 0 {
			c.logf("lockd: %d locks could not be reclaimed after the restart of server %s; their owners no longer hold them", lost, c.cfg.Dial.Host)
		}
	}()
}

// WatchServer asks the server's statd for its state number every
// statdPoll, and reclaims the held locks when it changes. stat is the NSM
// client's Stat (nil: no statd, only grace-period answers tell of a
// restart). It asks whether or not locks are held, so that a restart
// while none were is not taken later for one that forgot locks taken since.
func (c *Client) WatchServer(stat func(ctx context.Context) (int32, error)) {
	if stat == nil {
		return
	}
	c.wg.Add(1)
	go func() {
		defer c.wg.Done()
		var last int32
		known := false
		t := time.NewTicker(statdPoll)
		defer t.Stop()
		for {
			ctx, cancel := context.WithTimeout(c.bg, 10*time.Second)
			st, err := stat(ctx)
			cancel()
			if err == nil {
				if known && st != last {
					c.startReclaim("its statd's state went from " + itoa(last) + " to " + itoa(st))
				}
				last, known = st, true
			}
			select {
			case <-t.C:
			case <-c.quit:
				return
			}
		}
	}()
}

func itoa(n int32) string { return strconv.Itoa(int(n)) }
