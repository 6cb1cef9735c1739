package guest

import (
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rdmafs/rdmafs/test/e2e/e2etest"
)

// Memory an RDMA mount pins, on rxe, where registration pins for real
// (ibv_reg_mr: VmPin, charged against RLIMIT_MEMLOCK).

// idlePinLimit is the most an idle RDMA mount may pin.
const idlePinLimit = 16 << 20

// TestRdmafsRDMAPinnedMemory: an idle mount pins at most 16 MiB, pins more
// while parallel reads need buffers, and gives them back once idle.
func TestRdmafsRDMAPinnedMemory(t *testing.T) {
	e := lab(t)
	m := startRdmafs(t, e, "proto=rdma,vers=3")
	t.Cleanup(func() {
		e2etest.Unmount(t, m.dir, "fusermount3", "-u", m.dir)
		os.Remove(m.dir)
		m.wait(t, 30*time.Second)
		if t.Failed() {
			t.Logf("rdmafs output:\n%s", m.out)
		}
	})
	pid := m.cmd.Process.Pid
	idle := vmPin(t, pid)
	t.Logf("idle: VmPin %d KiB", idle>>10)
	if idle == 0 || idle > idlePinLimit {
		t.Fatalf("idle mount pins %d KiB, want some and at most %d", idle>>10, idlePinLimit>>10)
	}

	const files, size = 4, 16 << 20
	dir := fmt.Sprintf("pin-%d", time.Now().UnixNano())
	if err := os.Mkdir(filepath.Join(e.Export, dir), 0o755); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, size)
	for i := range files {
		if err := os.WriteFile(filepath.Join(e.Export, dir, strconv.Itoa(i)), buf, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	e2etest.DropCaches(t)
	var peak uint64
	var mu sync.Mutex
	stop := make(chan struct{})
	sampled := make(chan struct{})
	go func() {
		defer close(sampled)
		for {
			p := vmPin(t, pid)
			mu.Lock()
			peak = max(peak, p)
			mu.Unlock()
			select {
			case <-stop:
				return
			case <-time.After(20 * time.Millisecond):
			}
		}
	}()
	var wg sync.WaitGroup
	for i := range files {
		wg.Add(1)
		go func() {
			defer wg.Done()
			f, err := os.Open(filepath.Join(m.dir, dir, strconv.Itoa(i)))
			if err != nil {
				t.Error(err)
				return
			}
			defer f.Close()
			if n, err := io.Copy(io.Discard, f); err != nil || n != size {
				t.Errorf("read %d: %d bytes, %v", i, n, err)
			}
		}()
	}
	wg.Wait()
	close(stop)
	<-sampled
	t.Logf("parallel reads: VmPin at most %d KiB", peak>>10)
	if peak <= idle {
		t.Errorf("parallel reads pinned at most %d KiB, no more than idle (%d KiB)", peak>>10, idle>>10)
	}
	now := vmPin(t, pid)
	for deadline := time.Now().Add(30 * time.Second); now > idle && time.Now().Before(deadline); {
		time.Sleep(500 * time.Millisecond)
		now = vmPin(t, pid)
	}
	if now > idle {
		t.Errorf("idle again: VmPin %d KiB, want back to %d KiB", now>>10, idle>>10)
	}
}

// TestRdmafsRDMAMemLock: a mount whose process may not pin what an idle
// mount needs (RLIMIT_MEMLOCK of 1 MiB, and no CAP_IPC_LOCK, which
// would lift the limit) fails with a message naming the limit and the
// options that lower the need, not with a bare verbs error.
func TestRdmafsRDMAMemLock(t *testing.T) {
	e := lab(t)
	bin := rdmafsBin(t, e)
	dir := mountPoint(t, "rdmafs-memlock")
	cmd := exec.Command("setpriv", "--bounding-set", "-ipc_lock", "--inh-caps", "-ipc_lock",
		"prlimit", "--memlock=1048576:1048576",
		bin, "-f", "-o", "proto=rdma,vers=3", e.Addr+":"+e.Export, dir)
	done := make(chan struct{})
	var out []byte
	var err error
	go func() { out, err = cmd.CombinedOutput(); close(done) }()
	select {
	case <-done:
	case <-time.After(2 * time.Minute):
		cmd.Process.Kill()
		<-done
		t.Fatalf("rdmafs under a 1 MiB RLIMIT_MEMLOCK still runs after 2 minutes; output:\n%s", out)
	}
	if _, _, ok := e2etest.MountInfo(dir); ok {
		exec.Command("fusermount3", "-u", dir).Run()
		t.Fatalf("mounted under a 1 MiB RLIMIT_MEMLOCK; output:\n%s", out)
	}
	msg := string(out)
	t.Logf("%v: %s", err, msg)
	for _, want := range []string{"RLIMIT_MEMLOCK", "1024 KiB", "rsize", "slot_table_entries"} {
		if !strings.Contains(msg, want) {
			t.Errorf("error does not name %q: %s", want, msg)
		}
	}
}

// vmPin is what process pid has pinned (VmPin of /proc/PID/status), in
// bytes.
func vmPin(t *testing.T, pid int) uint64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Errorf("status of %d: %v", pid, err)
		return 0
	}
	for line := range strings.SplitSeq(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "VmPin:"); ok {
			n, _ := strconv.ParseUint(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			return n << 10
		}
	}
	return 0
}
