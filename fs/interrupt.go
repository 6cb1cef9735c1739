package fs

import (
	"context"
	"strconv"
	"sync/atomic"
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

// killPoll is how often a call checks for a fatal signal, once it does.
const killPoll = 200 * time.Millisecond

// orphanWait is how long a call runs before it checks that its caller is
// still there.
const orphanWait = time.Second

// killable returns a context for the calls of the FUSE request in ctx that
// ends when the caller is being killed or is gone; release it when the
// request is done. Requests of the kernel itself (pid 0) are never
// abandoned.
func killable(ctx context.Context) (context.Context, context.CancelFunc) {
	caller, ok := fuse.FromContext(ctx)
	if !ok || caller.Pid == 0 {
		return context.WithoutCancel(ctx), func() {}
	}
	pid := caller.Pid
	rctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	var watching atomic.Bool
	watch := func() {
		if watching.Swap(true) {
			return
		}
		t := time.NewTicker(killPoll)
		defer t.Stop()
		for {
			if fatalSignalPending(pid) {
				cancel()
				return
			}
			select {
			case <-rctx.Done():
				return
			case <-t.C:
			}
		}
	}
	stopOnInterrupt := func() bool { return true }
	if ctx.Done() != nil {
		stopOnInterrupt = context.AfterFunc(ctx, watch)
	}
	orphanCheck := time.AfterFunc(orphanWait, watch)
	return rctx, func() {
		stopOnInterrupt()
		orphanCheck.Stop()
		cancel()
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
