package guest

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"io/fs"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/rdmafs/rdmafs/test/e2e/e2etest"
	"github.com/rdmafs/rdmafs/test/e2e/workload"
)

// labEnv is the test system that setup-services.sh and build.sh describe.
type labEnv struct {
	Addr       string // server address (knfsd), on the rxe device's interface
	Export     string // exported directory, also its path on this machine
	RXE        string // rxe device name
	Rdmafs     string // rdmafs binary (build.sh builds it; a failed build fails the run)
	VerbsTests string // directory of the verbs conformance test binaries
}

// lab returns the test system, or skips the test outside of it.
func lab(t *testing.T) labEnv {
	t.Helper()
	e := labEnv{
		Addr:       os.Getenv("LAB_ADDR"),
		Export:     os.Getenv("LAB_EXPORT"),
		RXE:        os.Getenv("LAB_RXE"),
		Rdmafs:     os.Getenv("RDMAFS_BIN"),
		VerbsTests: os.Getenv("LAB_VERBS_TESTS"),
	}
	if e.Addr == "" || e.Export == "" || e.RXE == "" {
		t.Skip("not inside the e2e test system (LAB_ADDR, LAB_EXPORT or LAB_RXE unset): " +
			"these tests run in the qemu guest or the Docker container, see `make e2e` and test/e2e/README.md")
	}
	if e.Rdmafs == "" {
		t.Fatal("RDMAFS_BIN unset: run-tests.sh sets it from the build.env of build.sh")
	}
	if os.Geteuid() != 0 {
		t.Fatalf("the e2e tests must run as root (mount, drop_caches)")
	}
	return e
}

// run runs a command with a timeout and fails the test with its output if it fails.
func run(t testing.TB, timeout time.Duration, name string, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	out, err := exec.CommandContext(ctx, name, args...).CombinedOutput()
	if ctx.Err() != nil {
		t.Fatalf("%s %s: timed out after %v; output:\n%s", name, strings.Join(args, " "), timeout, out)
	}
	if err != nil {
		t.Fatalf("%s %s: %v; output:\n%s", name, strings.Join(args, " "), err, out)
	}
	return string(out)
}

// runTogether starts cmds at once and waits for all of them, killing any
// still running after limit, and fails the test with the command line and
// output of the first that failed.
func runTogether(t testing.TB, limit time.Duration, cmds ...*exec.Cmd) {
	t.Helper()
	outs := make([]*e2etest.Output, len(cmds))
	for i, cmd := range cmds {
		outs[i] = new(e2etest.Output)
		cmd.Stdout, cmd.Stderr = outs[i], outs[i]
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
	}
	deadline := time.Now().Add(limit)
	var failed error
	var which int
	for i, cmd := range cmds {
		if err := waitUntil(cmd, deadline); err != nil && failed == nil {
			failed, which = err, i
		}
	}
	if failed != nil {
		t.Fatalf("%s: %v; output:\n%s", strings.Join(cmds[which].Args, " "), failed, outs[which])
	}
}

// waitUntil waits for cmd, killing it at deadline.
func waitUntil(cmd *exec.Cmd, deadline time.Time) error {
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	timer := time.NewTimer(time.Until(deadline))
	defer timer.Stop()
	select {
	case err := <-done:
		return err
	case <-timer.C:
		cmd.Process.Kill()
		<-done
		return fmt.Errorf("still running at the deadline: killed")
	}
}

// mountPoint makes a fresh, empty directory to mount on.
func mountPoint(t testing.TB, name string) string {
	t.Helper()
	dir, err := os.MkdirTemp("/mnt", "e2e-"+name+"-")
	if err != nil {
		t.Fatalf("mount point: %v", err)
	}
	return dir
}

// mountKernel mounts the export with the kernel NFSv3 client over proto (tcp
// or rdma) and unmounts it when the test ends.
func mountKernel(t testing.TB, e labEnv, proto string) string {
	t.Helper()
	opts := "vers=3,proto=tcp"
	if proto == "rdma" {
		opts = "vers=3,proto=rdma,port=20049"
	}
	dir := mountPoint(t, "knfs-"+proto)
	start := time.Now()
	run(t, 2*time.Minute, "mount", "-t", "nfs", "-o", opts, e.Addr+":"+e.Export, dir)
	t.Logf("mount -t nfs -o %s %s:%s %s: %v", opts, e.Addr, e.Export, dir, time.Since(start).Round(time.Millisecond))
	t.Cleanup(func() { e2etest.Unmount(t, dir, "umount", dir); os.Remove(dir) })
	if fstype, _, ok := e2etest.MountInfo(dir); !ok || fstype != "nfs" {
		t.Fatalf("after mount, %s has fstype %q (mounted %v), want nfs", dir, fstype, ok)
	}
	return dir
}

// xprt returns the transport of the mount on dir from /proc/self/mountstats
// (the first field of its "xprt:" line: tcp, rdma, udp).
func xprt(t testing.TB, dir string) string {
	t.Helper()
	b, err := os.ReadFile("/proc/self/mountstats")
	if err != nil {
		t.Fatalf("mountstats: %v", err)
	}
	in := false
	for _, line := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(line, "device ") {
			in = strings.Contains(line, " mounted on "+dir+" ")
			continue
		}
		if f := strings.Fields(line); in && len(f) >= 2 && f[0] == "xprt:" {
			return f[1]
		}
	}
	t.Fatalf("no xprt line for %s in /proc/self/mountstats", dir)
	return ""
}

// rxePackets returns the packets the rxe device has sent and received.
func rxePackets(t testing.TB, e labEnv) (sent, rcvd uint64) {
	t.Helper()
	read := func(name string) uint64 {
		p := filepath.Join("/sys/class/infiniband", e.RXE, "ports/1/hw_counters", name)
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatalf("rxe counter: %v", err)
		}
		v, err := strconv.ParseUint(strings.TrimSpace(string(b)), 10, 64)
		if err != nil {
			t.Fatalf("rxe counter %s: %v", p, err)
		}
		return v
	}
	return read("sent_pkts"), read("rcvd_pkts")
}

// bigFile writes a random file of size bytes through mnt, checks it on the
// server, drops the caches and reads it back through mnt.
func bigFile(t *testing.T, e labEnv, mnt string, size int) {
	name := fmt.Sprintf("big-%d-%d", os.Getpid(), time.Now().UnixNano())
	p := filepath.Join(mnt, name)
	f, err := os.OpenFile(p, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		t.Fatalf("create %s: %v", p, err)
	}
	h := sha256.New()
	buf := make([]byte, 1<<20)
	var seed [32]byte
	copy(seed[:], name)
	rnd := rand.NewChaCha8(seed)
	start := time.Now()
	for done := 0; done < size; done += len(buf) {
		rnd.Read(buf)
		n := min(len(buf), size-done)
		h.Write(buf[:n])
		if _, err := f.Write(buf[:n]); err != nil {
			f.Close()
			t.Fatalf("write %s at %d: %v", p, done, err)
		}
	}
	if err := f.Sync(); err != nil {
		t.Fatalf("fsync %s: %v", p, err)
	}
	if err := f.Close(); err != nil {
		t.Fatalf("close %s: %v", p, err)
	}
	wrote := time.Since(start)
	var want workload.Sum
	h.Sum(want[:0])
	if err := workload.DirChecker(e.Export)(name, want); err != nil {
		t.Errorf("server side: %v", err)
	}
	e2etest.DropCaches(t)
	start = time.Now()
	got, n, err := e2etest.SumFile(p)
	if err != nil {
		t.Fatalf("read back %s: %v", p, err)
	}
	if got != want || n != int64(size) {
		t.Errorf("read back %s after drop_caches: %d bytes, sha256 %x, want %d bytes, sha256 %x", p, n, got[:8], size, want[:8])
	}
	// the rates include generating and hashing the data in the guest: not a benchmark
	t.Logf("%d MiB: write+fsync %v (%.1f MiB/s), read after drop_caches %v (%.1f MiB/s)",
		size>>20, wrote.Round(time.Millisecond), float64(size)/(1<<20)/wrote.Seconds(),
		time.Since(start).Round(time.Millisecond), float64(size)/(1<<20)/time.Since(start).Seconds())
	if err := os.Remove(p); err != nil {
		t.Fatalf("remove %s: %v", p, err)
	}
	if err := workload.DirChecker(e.Export)(name, want); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("server side after remove: got %v, want it not to exist", err)
	}
}
