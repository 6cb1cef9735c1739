package fs

import (
	"bytes"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// TestFUSEReadersStay: after a burst of concurrent requests, all
// fuseReaders goroutines that read /dev/fuse stay waiting for the next
// ones instead of ending (each new one would grow its stack again on the
// way to the RPC), and the mount leaves GOMAXPROCS as it was.
func TestFUSEReadersStay(t *testing.T) {
	h := newHarness(t, harnessConfig{})
	if _, err := os.Stat("/dev/fuse"); err != nil {
		t.Fatalf("no /dev/fuse: %v", err)
	}
	h.writeServerFile("data", bytes.Repeat([]byte("x"), 1<<20), 0o644)
	procs := runtime.GOMAXPROCS(0)
	mnt := t.TempDir()
	server, err := h.fs.Mount(mnt, h.fs.MountOptions())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { h.fs.Unmount(server); h.fs.CloseFUSEChannel() })
	if got := runtime.GOMAXPROCS(0); got != procs {
		t.Errorf("GOMAXPROCS %d after the mount, %d before", got, procs)
	}

	f, err := os.OpenFile(filepath.Join(mnt, "data"), os.O_RDONLY|syscall.O_DIRECT, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var wg sync.WaitGroup
	stop := time.Now().Add(500 * time.Millisecond)
	for i := range 16 {
		wg.Go(func() {
			buf := make([]byte, 4096)
			for time.Now().Before(stop) {
				if _, err := f.ReadAt(buf, int64(i)*4096); err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	time.Sleep(100 * time.Millisecond)
	// go-fuse's own loop would have ended all but GOMAXPROCS of them.
	if n := countGoroutines("fusedev.(*Loop).read"); n != fuseReaders {
		t.Errorf("%d /dev/fuse readers after 16 concurrent reads; want all %d kept", n, fuseReaders)
	}
}

// countGoroutines counts the goroutines with fn in their stacks.
func countGoroutines(fn string) int {
	buf := make([]byte, 1<<20)
	for {
		n := runtime.Stack(buf, true)
		if n < len(buf) {
			buf = buf[:n]
			break
		}
		buf = make([]byte, 2*len(buf))
	}
	count := 0
	for _, g := range strings.Split(string(buf), "\n\n") {
		if strings.Contains(g, fn) {
			count++
		}
	}
	return count
}
