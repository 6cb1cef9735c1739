package guest

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/rdmafs/rdmafs/test/e2e/e2etest"
	"github.com/rdmafs/rdmafs/test/e2e/workload"
)

// The RPC-over-RDMA tests beyond the workload: the kernel's NFS/RDMA client
// as the reference peer of rdmafs's own server, and a knfsd restart in the
// middle of a write.

// TestKernelClientOnRdmafsServe mounts `rdmafs serve -o proto=rdma` (the
// ibverbs provider on the rxe device) with the kernel NFS/RDMA client and
// runs the workload through it, checked in the served directory.
func TestKernelClientOnRdmafsServe(t *testing.T) {
	e := lab(t)
	bin := rdmafsBin(t, e)
	// The workload runs as root: no_root_squash (the default squashes root,
	// as knfsd's does).
	dir := t.TempDir()
	port := startServe(t, e, bin, dir, serveRDMAPort, "no_root_squash")
	mnt := mountKernelOnServe(t, e, port, serveRDMAPort, "rdma")
	workload.Run(t, mnt, workload.DirChecker(dir))
	served := e
	served.Export = dir
	bigFile(t, served, mnt, 64<<20)
}

// serveRDMAPort is where startServe serves NFS over RDMA.
const serveRDMAPort = 20050

// startServe runs `rdmafs serve` of dir over TCP and over RDMA on rdmaPort
// (the ibverbs provider on the rxe device), with the export options opts,
// until the test ends; it returns the TCP port.
func startServe(t *testing.T, e labEnv, bin, dir string, rdmaPort int, opts string) (port string) {
	t.Helper()
	srv := exec.Command(bin, "serve", "-o", fmt.Sprintf("addr=%s,port=0,proto=rdma,provider=ibverbs,rdmaport=%d,%s", e.Addr, rdmaPort, opts), dir)
	stdout, _ := srv.StdoutPipe()
	var stderr strings.Builder
	srv.Stderr = &stderr
	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		srv.Process.Signal(os.Interrupt)
		srv.Wait()
		if t.Failed() {
			t.Logf("rdmafs serve: %s", stderr.String())
		}
	})
	sc := bufio.NewScanner(stdout)
	re := regexp.MustCompile(`as .* on port (\d+) `)
	sawRDMA := false
	for sc.Scan() {
		if m := re.FindStringSubmatch(sc.Text()); m != nil {
			port = m[1]
		}
		if strings.Contains(sc.Text(), "over RDMA") {
			sawRDMA = true
			break
		}
	}
	go io.Copy(io.Discard, stdout)
	if port == "" || !sawRDMA {
		t.Fatalf("rdmafs serve -o %s did not start over RDMA: %s", opts, stderr.String())
	}
	return port
}

// mountKernelOnServe mounts the `rdmafs serve` of startServe with the
// kernel NFS client over proto (tcp, or rdma on rdmaPort) until the test
// ends.
func mountKernelOnServe(t *testing.T, e labEnv, port string, rdmaPort int, proto string) string {
	t.Helper()
	mnt := mountPoint(t, "knfs-on-rdmafs-"+proto)
	opts := fmt.Sprintf("vers=3,proto=tcp,port=%s,mountport=%s,mountproto=tcp,nolock", port, port)
	if proto == "rdma" {
		opts = fmt.Sprintf("vers=3,proto=rdma,port=%d,mountport=%s,mountproto=tcp,nolock", rdmaPort, port)
	}
	run(t, 2*time.Minute, "mount", "-t", "nfs", "-o", opts, e.Addr+":/", mnt)
	t.Cleanup(func() { e2etest.Unmount(t, mnt, "umount", mnt); os.Remove(mnt) })
	if x := xprt(t, mnt); !strings.HasPrefix(x, proto) {
		t.Fatalf("kernel mount of rdmafs serve: xprt %q, want %s", x, proto)
	}
	return mnt
}

// TestRdmafsRDMAKnfsdRestart restarts knfsd while rdmafs (proto=rdma, hard)
// writes a file: the write goes on once knfsd is back, and the server's
// copy has the checksum of what was written. Then rdmafs unmounts and
// exits promptly: the lost connection's queue pair was destroyed without
// delay (rxe makes its destruction wait up to 50 s while memory windows of
// the calls lost with it are still bound to it).
func TestRdmafsRDMAKnfsdRestart(t *testing.T) {
	e := lab(t)
	m := startRdmafs(t, e, "proto=rdma,vers=3,hard,timeo=50")
	mnt := m.dir
	defer func() {
		if t.Failed() {
			t.Logf("rdmafs output:\n%s", m.out)
		}
	}()
	src := filepath.Join(t.TempDir(), "src")
	run(t, time.Minute, "dd", "if=/dev/urandom", "of="+src, "bs=1M", "count=192", "status=none")
	name := fmt.Sprintf("restart-%d", time.Now().UnixNano())
	// The writer is another process: a fork of this one with a file of the
	// mount open would flush it at exec.
	dd := exec.Command("dd", "if="+src, "of="+filepath.Join(mnt, name), "bs=1M", "conv=fsync")
	var ddOut strings.Builder
	dd.Stdout, dd.Stderr = &ddOut, &ddOut
	if err := dd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- dd.Wait() }()
	serverCopy := filepath.Join(e.Export, name)
	deadline := time.Now().Add(2 * time.Minute)
	for {
		if st, err := os.Stat(serverCopy); err == nil && st.Size() >= 32<<20 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the write did not reach knfsd")
		}
		time.Sleep(50 * time.Millisecond)
	}
	run(t, time.Minute, "rpc.nfsd", "0")
	t.Log("knfsd stopped mid-write")
	time.Sleep(3 * time.Second)
	run(t, time.Minute, "rpc.nfsd", "8")
	if err := os.WriteFile("/proc/fs/nfsd/portlist", []byte("rdma 20049\n"), 0); err != nil {
		t.Fatalf("adding the RDMA listener back: %v", err)
	}
	t.Log("knfsd started again")
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("dd across the knfsd restart: %v: %s", err, ddOut.String())
		}
	case <-time.After(5 * time.Minute):
		dd.Process.Kill()
		t.Fatal("the write did not finish after knfsd came back")
	}
	want, _ := e2etest.FileSum(t, src)
	if got, _ := e2etest.FileSum(t, serverCopy); want != got {
		t.Fatalf("server copy has sha256 %x, written %x", got, want)
	}
	e2etest.Unmount(t, mnt, "fusermount3", "-u", mnt)
	os.Remove(mnt)
	if err := m.wait(t, 10*time.Second); err != nil {
		t.Errorf("rdmafs exited with %v after unmount", err)
	}
	if strings.Contains(m.out.String(), "to destroy the queue pair") {
		t.Errorf("destroying a queue pair took long:\n%s", m.out)
	}
}

// TestRdmafsUnmountDeadServer stops knfsd for good under a hard RDMA mount
// while a reader (its readahead), a statfs and a writer wait on it, and
// kills them: once no process holds the mount, fusermount3 -u unmounts it,
// and rdmafs, whose write-back gets one major timeout (timeo x (retrans+1)),
// exits with status 1, saying how many bytes of which file it could not
// write back.
func TestRdmafsUnmountDeadServer(t *testing.T) {
	e := lab(t)
	m := startRdmafs(t, e, "proto=rdma,vers=3,hard,timeo=10,retrans=2")
	big := filepath.Join(m.dir, fmt.Sprintf("unmount-big-%d", time.Now().UnixNano()))
	run(t, time.Minute, "dd", "if=/dev/urandom", "of="+big, "bs=1M", "count=64", "conv=fsync", "status=none")
	e2etest.DropCaches(t)
	held := filepath.Join(m.dir, fmt.Sprintf("unmount-held-%d", time.Now().UnixNano()))
	// The writer opens its file while the server is there and writes
	// once it is gone: the data waits in rdmafs, and the close blocks.
	// The shell is killed first, and its close at exit waits behind
	// head's; then head, the rest of its process group.
	writer := exec.Command("sh", "-c", "exec 3>"+held+"; sleep 2; head -c 3000000 /dev/urandom >&3")
	writer.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := writer.Start(); err != nil {
		t.Fatal(err)
	}
	defer syscall.Kill(-writer.Process.Pid, syscall.SIGKILL)
	time.Sleep(500 * time.Millisecond)
	run(t, time.Minute, "rpc.nfsd", "0")
	t.Log("knfsd stopped")
	t.Cleanup(func() {
		run(t, time.Minute, "rpc.nfsd", "8")
		if err := os.WriteFile("/proc/fs/nfsd/portlist", []byte("rdma 20049\n"), 0); err != nil {
			t.Errorf("adding knfsd's RDMA listener back: %v", err)
		}
	})
	waiters := []*exec.Cmd{
		writer,
		exec.Command("dd", "if="+big, "of=/dev/null", "bs=1M", "status=none"),
		exec.Command("stat", "-f", m.dir),
	}
	for _, c := range waiters[1:] {
		if err := c.Start(); err != nil {
			t.Fatal(err)
		}
	}
	time.Sleep(4 * time.Second)
	for _, c := range waiters {
		c.Process.Kill()
	}
	for _, c := range waiters {
		done := make(chan struct{})
		go func() { c.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(30 * time.Second):
			t.Fatalf("%s did not die of SIGKILL within 30 s", c)
		}
	}
	syscall.Kill(-writer.Process.Pid, syscall.SIGKILL)
	t.Log("the programs using the mount are killed")
	start := time.Now()
	var out []byte
	var err error
	for time.Since(start) < 20*time.Second {
		if out, err = exec.Command("fusermount3", "-u", m.dir).CombinedOutput(); err == nil {
			break
		}
		time.Sleep(500 * time.Millisecond)
	}
	if err != nil {
		t.Fatalf("fusermount3 -u of a hard mount of a dead server that no process uses: %v: %s", err, out)
	}
	t.Logf("unmounted in %v", time.Since(start).Round(time.Millisecond))
	exit := m.wait(t, daemonExit)
	var ee *exec.ExitError
	if !errors.As(exit, &ee) || ee.ExitCode() != 1 {
		t.Errorf("rdmafs exited with %v after its mount of a dead server was gone with data unwritten, want status 1", exit)
	}
	if log := m.out.String(); !strings.Contains(log, filepath.Base(held)) || !strings.Contains(log, "not written back") {
		t.Errorf("rdmafs's log does not say which file's data it could not write back:\n%s", log)
	}
	os.Remove(m.dir)
}
