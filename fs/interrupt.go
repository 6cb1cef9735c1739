package fs

import (
	"context"
	"strconv"
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

// killPoll is how often an interrupted call checks for a fatal signal.
const killPoll = 200 * time.Millisecond

// killable returns a context for the calls of the FUSE request in ctx that
// ends when the caller is being killed; release it when the request is
// done.
func killable(ctx context.Context) (context.Context, context.CancelFunc) {
	caller, ok := fuse.FromContext(ctx)
	if !ok || ctx.Done() == nil {
		return context.WithoutCancel(ctx), func() {}
	}
	pid := caller.Pid
	rctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	stop := context.AfterFunc(ctx, func() {
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
	})
	return rctx, func() {
		stop()
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
