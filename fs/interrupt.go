package fs

import (
	"context"
	"strconv"
	"sync"
	"time"

	"github.com/hanwen/go-fuse/v2/fuse"
)

// The kernel interrupts a FUSE request whenever its caller gets a signal,
// and Go programs get SIGURG all the time. The kernel NFS client lets only
// a fatal signal end a call (its waits are killable), so a close(2) does
// not fail with EINTR because the runtime preempted a goroutine. rdmafs
// does the same: after an interrupt it keeps the call going unless, or
// until, the caller has a fatal signal pending, which the kernel shows as
// a pending SIGKILL.

// A request whose caller is gone is abandoned too. The kernel's readahead
// and asynchronous reads are requests no one waits for: when their
// program dies, nobody interrupts them, and on a hard mount of a dead
// server they would wait for ever, holding the pages they read locked, so
// that the file system could not be unmounted even once no process used
// it. After orphanWait, a call checks now and then that its caller is
// still there.

// Nearly every request is done long before either check could matter, so
// a request costs no more than its place in a list: one goroutine looks
// at the requests in flight every killPoll, while there are any. (A
// goroutine per request watching its interrupt, as context.AfterFunc makes
// one, or a timer per request, took several percent of rdmafs's CPU time
// in the guest benchmark's small operations, in waking goroutines and
// reading the clock.)

// killPoll is how often the requests in flight are looked at.
const killPoll = 200 * time.Millisecond

// orphanWait is how long a call runs before it checks that its caller is
// still there.
const orphanWait = time.Second

// killWatchIdle is how many looks finding no request the watching
// goroutine makes before it ends; the next request starts it again.
const killWatchIdle = 50

// inFlight is a request that a killWatch watches.
type inFlight struct {
	interrupted <-chan struct{} // nil if the request cannot be interrupted
	pid         uint32
	born        uint64 // killWatch.looks when the request came
	cancel      context.CancelFunc
	index       int // in killWatch.reqs; -1 once released
}

// killWatch holds the requests in flight of one mount, and runs the
// goroutine that looks at them while there are any. The zero value is
// ready to use.
type killWatch struct {
	mu       sync.Mutex
	reqs     []*inFlight
	looks    uint64 // looks made so far, the clock of orphanWait
	watching bool   // the goroutine runs
}

// killable returns a context for the calls of the FUSE request in ctx that
// ends when the caller is being killed or is gone; release it when the
// request is done. Requests of the kernel itself (pid 0) are never
// abandoned.
func (w *killWatch) killable(ctx context.Context) (context.Context, context.CancelFunc) {
	caller, ok := fuse.FromContext(ctx)
	if !ok || caller.Pid == 0 {
		return context.WithoutCancel(ctx), func() {}
	}
	// The parent never ends (WithoutCancel), so WithCancel watches nothing.
	rctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	r := &inFlight{interrupted: ctx.Done(), pid: caller.Pid, cancel: cancel}
	w.mu.Lock()
	r.born = w.looks
	r.index = len(w.reqs)
	w.reqs = append(w.reqs, r)
	if !w.watching {
		w.watching = true
		go w.watch()
	}
	w.mu.Unlock()
	return rctx, func() {
		w.mu.Lock()
		if i := r.index; i >= 0 { // a CancelFunc may be called again
			last := len(w.reqs) - 1
			w.reqs[i] = w.reqs[last]
			w.reqs[i].index = i
			w.reqs[last] = nil
			w.reqs = w.reqs[:last]
			r.index = -1
		}
		w.mu.Unlock()
		cancel()
	}
}

// watch ends the calls of requests whose callers are being killed or are
// gone: those interrupted, and those older than orphanWait. It returns
// when no request has been in flight for killWatchIdle looks.
func (w *killWatch) watch() {
	const orphanLooks = uint64(orphanWait / killPoll)
	type suspect struct {
		pid    uint32
		cancel context.CancelFunc
	}
	var suspects []suspect
	for idle := 0; ; {
		time.Sleep(killPoll)
		suspects = suspects[:0]
		w.mu.Lock()
		w.looks++
		if len(w.reqs) == 0 {
			if idle++; idle >= killWatchIdle {
				w.watching = false
				w.mu.Unlock()
				return
			}
		} else {
			idle = 0
		}
		for _, r := range w.reqs {
			check := w.looks-r.born > orphanLooks
			select {
			case <-r.interrupted:
				check = true
			default:
			}
			if check {
				suspects = append(suspects, suspect{r.pid, r.cancel})
			}
		}
		w.mu.Unlock()
		// A suspect's request may have ended since: its cancel then does
		// nothing.
		for _, s := range suspects {
			if fatalSignalPending(s.pid) {
				s.cancel()
			}
		}
	}
}

// fatalSignalPending reports whether process pid is being killed (or is
// gone).
func fatalSignalPending(pid uint32) bool {
	const sigkill = 1 << (9 - 1)
	killed := false
	err := procStatus(pid, func(name string, value []byte) bool {
		if name == "SigPnd" || name == "ShdPnd" {
			mask, err := strconv.ParseUint(string(value), 16, 64)
			killed = err == nil && mask&sigkill != 0
		}
		return !killed
	})
	return err != nil || killed
}
