package fs

import (
	"context"
	"fmt"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/hanwen/go-fuse/v2/fuse"

	"github.com/rdmafs/rdmafs/sunrpc"
)

// dead makes every call fail as to a server that is gone (connection
// refused), while down is set.
type dead struct {
	sunrpc.Transport
	down *atomic.Bool
}

var _ sunrpc.Transport = (*dead)(nil)

func (d *dead) RoundTrip(ctx context.Context, call *sunrpc.Call) error {
	if d.down.Load() {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(20 * time.Millisecond):
		}
		return fmt.Errorf("%w: refused (test)", sunrpc.ErrConnect)
	}
	return d.Transport.RoundTrip(ctx, call)
}

// TestSilentServerRootAnsweredFromMemory: on a hard mount whose server has
// gone silent, the root's GETATTR and STATFS (what umount asks) get the
// last values seen, within a major timeout; any other file's GETATTR still
// waits for the server. When the server is back, calls go to it again.
func TestSilentServerRootAnsweredFromMemory(t *testing.T) {
	var down atomic.Bool
	h := newHarness(t, harnessConfig{
		wrap: func(tr sunrpc.Transport) sunrpc.Transport { return &dead{Transport: tr, down: &down} },
		rpc: func(c *sunrpc.Config) {
			c.Soft, c.Timeout, c.Retrans = false, 100*time.Millisecond, 1
		},
	})
	h.writeServerFile("f", []byte("data"), 0o644)
	file := h.mustLookup(rootNode, "f")
	statfs := func(cancel chan struct{}) (fuse.StatfsOut, syscall.Errno) {
		var out fuse.StatfsOut
		in := h.header(rootNode)
		st := h.raw.StatFs(cancel, &in, &out)
		return out, errnoOf(st)
	}
	before, en := statfs(nil)
	if en != 0 {
		t.Fatal(en)
	}
	rootBefore, en := h.getattr(rootNode)
	if en != 0 {
		t.Fatal(en)
	}

	down.Store(true)
	h.fs.invalidate(h.fs.root.obj) // the root's GETATTR must ask the server
	for _, what := range []string{"statfs", "getattr"} {
		start := time.Now()
		done := make(chan syscall.Errno, 1)
		var got, want any
		go func() {
			var en syscall.Errno
			switch what {
			case "statfs":
				var out fuse.StatfsOut
				out, en = statfs(nil)
				got, want = out, before
			default:
				var a fuse.Attr
				a, en = h.getattr(rootNode)
				got, want = a.Ino, rootBefore.Ino
			}
			done <- en
		}()
		select {
		case en := <-done:
			if en != 0 || got != want {
				t.Errorf("root %s with the server silent: %v, %+v; want the last values seen, %+v", what, en, got, want)
			}
			t.Logf("root %s answered from memory after %v", what, time.Since(start).Round(time.Millisecond))
		case <-time.After(10 * time.Second):
			t.Fatalf("root %s with the server silent still waits after 10 s", what)
		}
	}

	// Any other file's attributes are not made up.
	h.fs.objects.mu.Lock()
	for _, wp := range h.fs.objects.m {
		if obj := wp.Value(); obj != nil {
			h.fs.invalidate(obj)
		}
	}
	h.fs.objects.mu.Unlock()
	done := make(chan syscall.Errno, 1)
	go func() {
		_, en := h.getattr(file)
		done <- en
	}()
	select {
	case en := <-done:
		t.Fatalf("GETATTR of a file with the server silent returned %v; want it to wait", en)
	case <-time.After(time.Second):
	}

	// The server is back: the waiting call gets its answer.
	down.Store(false)
	select {
	case en := <-done:
		if en != 0 {
			t.Errorf("GETATTR of a file once the server is back: %v", en)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("GETATTR of a file still waits 10 s after the server came back")
	}
	h.writeServerFile("g", make([]byte, 1<<20), 0o644)
	deadline := time.Now().Add(10 * time.Second)
	for h.fs.serverSilent() && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
	}
	if h.fs.serverSilent() {
		t.Fatal("the server is back, yet the client still finds it silent after 10 s")
	}
	if _, _, en := h.lookup(rootNode, "g"); en != 0 {
		t.Errorf("LOOKUP of a file made on the server once it is back: %v", en)
	}
}
