package fs

import (
	"context"
	"os/exec"
	"testing"
	"time"

	"github.com/hanwen/go-fuse/v2/fuse"
)

// sleeper starts a process that lives until the test kills it.
func sleeper(t *testing.T) *exec.Cmd {
	t.Helper()
	c := exec.Command("sleep", "60")
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Process.Kill(); c.Wait() })
	return c
}

// request is the context of a FUSE request of process pid and the channel
// that interrupts it.
func request(pid int) (context.Context, chan struct{}) {
	interrupt := make(chan struct{})
	return &fuse.Context{Caller: fuse.Caller{Pid: uint32(pid)}, Cancel: interrupt}, interrupt
}

// TestKillableEndsOnlyForAKilledCaller: an interrupted request goes on
// while its caller lives (an interrupt is any signal, SIGURG included), and
// its calls end soon after the caller is killed.
func TestKillableEndsOnlyForAKilledCaller(t *testing.T) {
	caller := sleeper(t)
	fctx, interrupt := request(caller.Process.Pid)
	var w killWatch
	ctx, release := w.killable(fctx)
	defer release()
	close(interrupt)
	time.Sleep(orphanWait + 2*killPoll)
	if ctx.Err() != nil {
		t.Fatalf("an interrupted request of a live caller ended: %v", ctx.Err())
	}
	caller.Process.Kill()
	caller.Wait()
	select {
	case <-ctx.Done():
	case <-time.After(3 * killPoll):
		t.Fatalf("the request of a killed caller still runs %v later", 3*killPoll)
	}
}

// TestKillableReleaseTwice: a request's release may be called again (a
// CancelFunc may), and the second call leaves the other requests in flight
// watched; the released request's context is done.
func TestKillableReleaseTwice(t *testing.T) {
	c := sleeper(t)
	fctx, interrupt := request(c.Process.Pid)
	var w killWatch
	watched, releaseWatched := w.killable(fctx)
	defer releaseWatched()
	other, release := w.killable(&fuse.Context{Caller: fuse.Caller{Pid: 1}, Cancel: make(chan struct{})})
	release()
	release()
	if other.Err() == nil {
		t.Errorf("release left the request's context running")
	}
	close(interrupt)
	c.Process.Kill()
	c.Wait()
	select {
	case <-watched.Done():
	case <-time.After(3 * killPoll):
		t.Fatalf("after another request was released twice, a killed caller's request still runs %v later", 3*killPoll)
	}
}

// TestKillableKernelRequestsStay: the kernel's own requests (pid 0) are
// never abandoned.
func TestKillableKernelRequestsStay(t *testing.T) {
	fctx, interrupt := request(0)
	var w killWatch
	ctx, release := w.killable(fctx)
	defer release()
	close(interrupt)
	time.Sleep(orphanWait + 2*killPoll)
	if ctx.Err() != nil {
		t.Errorf("a request of the kernel ended: %v", ctx.Err())
	}
}
