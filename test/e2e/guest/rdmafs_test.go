package guest

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/rdmafs/rdmafs/test/e2e/e2etest"
	"github.com/rdmafs/rdmafs/test/e2e/workload"
)

// rdmafsBin returns the rdmafs binary.
func rdmafsBin(t *testing.T, e labEnv) string {
	t.Helper()
	if _, err := os.Stat(e.Rdmafs); err != nil {
		t.Fatalf("rdmafs binary: %v", err)
	}
	return e.Rdmafs
}

// rdmafsMount is an rdmafs process and its mount.
type rdmafsMount struct {
	dir    string
	cmd    *exec.Cmd
	out    *e2etest.Output // its output
	exited chan error      // its exit, once
}

// startRdmafs runs `rdmafs -f -o opts ADDR:EXPORT DIR` in the background
// until the mount appears.
func startRdmafs(t *testing.T, e labEnv, opts string) *rdmafsMount {
	t.Helper()
	bin := rdmafsBin(t, e)
	if extra := os.Getenv(extraOptsEnv); extra != "" {
		opts = strings.Trim(opts+","+extra, ",")
	}
	m := &rdmafsMount{dir: mountPoint(t, "rdmafs"), out: new(e2etest.Output), exited: make(chan error, 1)}
	m.cmd = exec.Command(bin, "-f", "-o", opts, e.Addr+":"+e.Export, m.dir)
	m.cmd.Stdout, m.cmd.Stderr = m.out, m.out
	start := time.Now()
	if err := m.cmd.Start(); err != nil {
		t.Fatalf("start %s: %v", m.cmd, err)
	}
	go func() { m.exited <- m.cmd.Wait() }()
	mounted := false
	for !mounted && time.Since(start) < time.Minute {
		select {
		case err := <-m.exited:
			t.Fatalf("%s exited before mounting: %v; output:\n%s", m.cmd, err, m.out)
		case <-time.After(100 * time.Millisecond):
		}
		fstype, _, ok := e2etest.MountInfo(m.dir)
		mounted = ok && strings.HasPrefix(fstype, "fuse")
	}
	if !mounted {
		m.cmd.Process.Kill()
		t.Fatalf("%s: no FUSE mount on %s after 1 minute; output:\n%s", m.cmd, m.dir, m.out)
	}
	t.Logf("%s: mounted in %v", m.cmd, time.Since(start).Round(time.Millisecond))
	if os.Getenv(extraOptsEnv) != "" {
		// Say which FUSE channel the options gave: io_uring falls back
		// to /dev/fuse where the kernel does not offer it.
		out, _ := exec.Command(bin, "stats", "-json", m.dir).Output()
		if i := bytes.Index(out, []byte(`"fuse_channel"`)); i >= 0 {
			t.Logf("%s: %s", m.dir, bytes.SplitN(out[i:], []byte(","), 2)[0])
		}
	}
	return m
}

// extraOptsEnv names mount options added to every rdmafs mount of the
// guest tests: RDMAFS_E2E_OPTS=io_uring runs them through FUSE over
// io_uring (with LAB_KERNEL=current, whose kernel offers it).
const extraOptsEnv = "RDMAFS_E2E_OPTS"

// daemonExit is how long rdmafs may take to exit once its mount is gone.
const daemonExit = 30 * time.Second

// wait returns rdmafs's exit status once it has exited, at most within
// limit; if it has not by then, it fails the test after SIGQUIT, which
// makes the Go runtime print every goroutine's stack: where it waits.
func (m *rdmafsMount) wait(t *testing.T, limit time.Duration) error {
	t.Helper()
	select {
	case err := <-m.exited:
		return err
	case <-time.After(limit):
		t.Logf("rdmafs still running after %v:\n%s", limit, kernelStacks(m.cmd.Process.Pid))
		m.cmd.Process.Signal(syscall.SIGQUIT)
		select {
		case <-m.exited:
		case <-time.After(5 * time.Second):
			m.cmd.Process.Kill()
		}
		t.Fatalf("rdmafs still running %v after its mount was gone (ended with SIGQUIT); output:\n%s", limit, m.out)
		return nil
	}
}

// mountRdmafs mounts with startRdmafs, and when the test ends unmounts
// with fusermount3 -u and checks that rdmafs exits with status 0.
func mountRdmafs(t *testing.T, e labEnv, opts string) string {
	t.Helper()
	m := startRdmafs(t, e, opts)
	t.Cleanup(func() {
		e2etest.Unmount(t, m.dir, "fusermount3", "-u", m.dir)
		os.Remove(m.dir)
		if err := m.wait(t, daemonExit); err != nil {
			t.Errorf("rdmafs exited with %v after unmount; output:\n%s", err, m.out)
		}
		if t.Failed() {
			t.Logf("rdmafs output:\n%s", m.out)
		}
	})
	return m.dir
}

// TestRdmafsTCP: rdmafs over TCP against knfsd, the workload checked on the
// server side, then cross-checked with the kernel client mounted alongside.
func TestRdmafsTCP(t *testing.T) {
	e := lab(t)
	testRdmafs(t, e, "proto=tcp,vers=3", "tcp")
}

// TestRdmafsRDMA: the same over RPC-over-RDMA on the rxe device.
func TestRdmafsRDMA(t *testing.T) {
	e := lab(t)
	sent0, rcvd0 := rxePackets(t, e)
	testRdmafs(t, e, "proto=rdma,vers=3", "rdma")
	sent1, rcvd1 := rxePackets(t, e)
	t.Logf("%s: sent %d, received %d packets", e.RXE, sent1-sent0, rcvd1-rcvd0)
	// the workload moves more than 8 MiB; over RDMA that is thousands of packets
	const least = 8 << 20 / 4096
	if sent1-sent0 < least || rcvd1-rcvd0 < least {
		t.Errorf("%s moved %d/%d packets (sent/received), want at least %d: rdmafs did not use RDMA",
			e.RXE, sent1-sent0, rcvd1-rcvd0, least)
	}
}

func testRdmafs(t *testing.T, e labEnv, opts, peerProto string) {
	rdmafsBin(t, e)
	check := workload.DirChecker(e.Export)
	t.Run("workload", func(t *testing.T) {
		mnt := mountRdmafs(t, e, opts)
		workload.Run(t, mnt, check)
	})
	t.Run("kernel-peer", func(t *testing.T) {
		mnt := mountRdmafs(t, e, opts)
		peer := mountKernel(t, e, peerProto)
		workload.CrossCheck(t, mnt, peer, check)
		workload.CrossCheck(t, peer, mnt, check)
	})
	t.Run("bigfile", func(t *testing.T) {
		mnt := mountRdmafs(t, e, opts)
		bigFile(t, e, mnt, 64<<20)
	})
	t.Run("daemon", func(t *testing.T) {
		// without -f, rdmafs returns once the file system is mounted
		bin := rdmafsBin(t, e)
		dir := mountPoint(t, "rdmafs-daemon")
		run(t, time.Minute, bin, "-o", opts, e.Addr+":"+e.Export, dir)
		if fstype, _, ok := e2etest.MountInfo(dir); !ok || !strings.HasPrefix(fstype, "fuse") {
			exec.Command("fusermount3", "-u", dir).Run()
			t.Fatalf("rdmafs returned, but %s is not a FUSE mount (fstype %q)", dir, fstype)
		}
		if _, err := os.ReadDir(dir); err != nil {
			t.Errorf("readdir of the daemon's mount: %v", err)
		}
		e2etest.Unmount(t, dir, "fusermount3", "-u", dir)
		os.Remove(dir)
	})
}

// kernelStacks returns the state and kernel stack of each thread of
// process pid: where a process that does not end waits in the kernel.
func kernelStacks(pid int) string {
	var b strings.Builder
	tasks, _ := filepath.Glob(fmt.Sprintf("/proc/%d/task/*", pid))
	for _, task := range tasks {
		status, _ := os.ReadFile(filepath.Join(task, "status"))
		state := ""
		for line := range strings.SplitSeq(string(status), "\n") {
			if strings.HasPrefix(line, "State:") {
				state = strings.TrimSpace(strings.TrimPrefix(line, "State:"))
			}
		}
		stack, _ := os.ReadFile(filepath.Join(task, "stack"))
		fmt.Fprintf(&b, "thread %s: %s\n%s", filepath.Base(task), state, stack)
	}
	return b.String()
}
