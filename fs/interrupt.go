package fs

import (
	"bufio"
	"bytes"
	"context"
	"os"
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
	f, err := os.Open("/proc/" + strconv.FormatUint(uint64(pid), 10) + "/status")
	if err != nil {
		return true
	}
	defer f.Close()
	const sigkill = 1 << (9 - 1)
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Bytes()
		for _, key := range [][]byte{[]byte("SigPnd:"), []byte("ShdPnd:")} {
			if rest, ok := bytes.CutPrefix(line, key); ok {
				mask, err := strconv.ParseUint(string(bytes.TrimSpace(rest)), 16, 64)
				if err == nil && mask&sigkill != 0 {
					return true
				}
			}
		}
	}
	return false
}
