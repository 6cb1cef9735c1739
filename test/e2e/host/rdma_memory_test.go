package host

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rdmafs/rdmafs/test/e2e/e2etest"
)

// idlePinLimit is the most an idle RDMA mount may register (pin).
const idlePinLimit = 16 << 20

// TestRDMARegisteredMemory: an idle RDMA mount registers little (the
// soft provider pins nothing, so the transport's own count in `rdmafs
// stats` says what a hardware provider would pin; the process's VmPin and
// VmLck are checked too), registers more while parallel reads need
// buffers, and gives them back once idle.
func TestRDMARegisteredMemory(t *testing.T) {
	needHost(t)
	s := startServer(t, "", 0, append(rdmaServe, "no_root_squash")...)
	const files, size = 8, 32 << 20
	for i := range files {
		writeRandom(t, filepath.Join(s.dir, fmt.Sprintf("f%d", i)), uint64(i), size)
	}
	mnt := s.mount(t)
	pid := daemonOf(t, mnt)

	idle := checkRDMAStats(t, mnt)["registered_bytes"]
	if idle == 0 || idle > idlePinLimit {
		t.Fatalf("idle mount registers %d bytes, want 1 to %d", idle, idlePinLimit)
	}
	if pin := pinnedKiB(t, pid); pin > idlePinLimit>>10 {
		t.Fatalf("idle mount's process pins %d KiB, want at most %d", pin, idlePinLimit>>10)
	}

	// Parallel cold reads keep many 1 MiB READs in flight.
	e2etest.DropCaches(t)
	var wg sync.WaitGroup
	errs := make(chan error, files)
	for i := range files {
		wg.Add(1)
		go func() {
			defer wg.Done()
			f, err := os.Open(filepath.Join(mnt, fmt.Sprintf("f%d", i)))
			if err != nil {
				errs <- err
				return
			}
			defer f.Close()
			n, err := io.Copy(io.Discard, bufio.NewReaderSize(f, 1<<20))
			if err == nil && n != size {
				err = fmt.Errorf("f%d: read %d bytes, want %d", i, n, size)
			}
			if err != nil {
				errs <- err
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	busy := checkRDMAStats(t, mnt)
	if busy["registered_peak_bytes"] <= idle {
		t.Errorf("parallel reads: at most %d bytes registered, no more than idle (%d)", busy["registered_peak_bytes"], idle)
	}
	t.Logf("registered: idle %d KiB, peak under parallel reads %d KiB", idle>>10, busy["registered_peak_bytes"]>>10)

	// Idle again, the extra buffers go within two shrink periods (10 s).
	deadline := time.Now().Add(30 * time.Second)
	now := busy["registered_bytes"]
	for now > idle && time.Now().Before(deadline) {
		time.Sleep(500 * time.Millisecond)
		now = checkRDMAStats(t, mnt)["registered_bytes"]
	}
	if now > idle {
		t.Errorf("idle after the reads: %d bytes registered, want back to %d", now, idle)
	}
	if pin := pinnedKiB(t, pid); pin > idlePinLimit>>10 {
		t.Errorf("idle mount's process pins %d KiB, want at most %d", pin, idlePinLimit>>10)
	}
}

// pinnedKiB is what process pid has pinned and locked (VmPin + VmLck of
// /proc/PID/status).
func pinnedKiB(t *testing.T, pid int) uint64 {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Fatal(err)
	}
	var kib uint64
	for line := range strings.SplitSeq(string(b), "\n") {
		if name, v, ok := strings.Cut(line, ":"); ok && (name == "VmPin" || name == "VmLck") {
			n, _ := strconv.ParseUint(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			kib += n
		}
	}
	return kib
}
