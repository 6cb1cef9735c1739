package guest

import (
	"bytes"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

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

// mountRdmafs runs `rdmafs -f -o opts ADDR:EXPORT DIR` in the background until
// the mount appears, and when the test ends unmounts it with fusermount3 -u
// and checks that rdmafs exits with status 0.
func mountRdmafs(t *testing.T, e labEnv, opts string) string {
	t.Helper()
	bin := rdmafsBin(t, e)
	dir := mountPoint(t, "rdmafs")
	var out bytes.Buffer
	cmd := exec.Command(bin, "-f", "-o", opts, e.Addr+":"+e.Export, dir)
	cmd.Stdout, cmd.Stderr = &out, &out
	start := time.Now()
	if err := cmd.Start(); err != nil {
		t.Fatalf("start %s: %v", cmd, err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	mounted := false
	for !mounted && time.Since(start) < time.Minute {
		select {
		case err := <-exited:
			t.Fatalf("%s exited before mounting: %v; output:\n%s", cmd, err, out.String())
		case <-time.After(100 * time.Millisecond):
		}
		fstype, _, ok := mountInfo(t, dir)
		mounted = ok && strings.HasPrefix(fstype, "fuse")
	}
	if !mounted {
		cmd.Process.Kill()
		t.Fatalf("%s: no FUSE mount on %s after 1 minute; output:\n%s", cmd, dir, out.String())
	}
	t.Logf("%s: mounted in %v", cmd, time.Since(start).Round(time.Millisecond))
	t.Cleanup(func() {
		unmount(t, dir, "fusermount3", "-u", dir)
		select {
		case err := <-exited:
			if err != nil {
				t.Errorf("rdmafs exited with %v after unmount; output:\n%s", err, out.String())
			}
		case <-time.After(30 * time.Second):
			// SIGQUIT makes the Go runtime print every goroutine's stack:
			// where the daemon waits.
			cmd.Process.Signal(syscall.SIGQUIT)
			select {
			case <-exited:
			case <-time.After(5 * time.Second):
				cmd.Process.Kill()
			}
			t.Errorf("rdmafs still running 30 s after unmount (ended with SIGQUIT); output:\n%s", out.String())
		}
		if t.Failed() {
			t.Logf("rdmafs output:\n%s", out.String())
		}
	})
	return dir
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
		if fstype, _, ok := mountInfo(t, dir); !ok || !strings.HasPrefix(fstype, "fuse") {
			exec.Command("fusermount3", "-u", dir).Run()
			t.Fatalf("rdmafs returned, but %s is not a FUSE mount (fstype %q)", dir, fstype)
		}
		if _, err := os.ReadDir(dir); err != nil {
			t.Errorf("readdir of the daemon's mount: %v", err)
		}
		unmount(t, dir, "fusermount3", "-u", dir)
	})
}
