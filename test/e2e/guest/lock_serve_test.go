package guest

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/rdmafs/rdmafs/test/e2e/e2etest"
)

// The kernel client's locks on `rdmafs serve`.

// nlmTCPPort returns the TCP port rpcbind at addr gives for NLM version 4,
// or "" if none.
func nlmTCPPort(t *testing.T, addr string) string {
	t.Helper()
	out := run(t, time.Minute, "rpcinfo", "-p", addr)
	for line := range strings.SplitSeq(out, "\n") {
		if f := strings.Fields(line); len(f) >= 4 && f[0] == "100021" && f[1] == "4" && f[2] == "tcp" {
			return f[3]
		}
	}
	return ""
}

// The network of TestLockKernelClientOnRdmafsServe: `rdmafs serve` and an
// rpcbind of its own in a network namespace, reached from this one over a
// veth pair.
const (
	lockNetHost  = "10.213.7.1" // this end
	lockNetServe = "10.213.7.2" // the namespace's end, where serve serves
)

// TestLockKernelClientOnRdmafsServe: the kernel client, mounting `rdmafs
// serve` without nolock, uses serve's lock manager, and its locks and
// rdmafs's (a lock mount of the same serve) exclude each other: fcntl
// both ways (EAGAIN, F_GETLK, F_SETLKW granted after the release) and
// flock.
//
// In this guest NLM in rpcbind is knfsd's lockd, so a kernel client of a
// serve here would lock through it. serve runs instead in a network
// namespace with an rpcbind of its own (in a mount namespace of its own,
// over a tmpfs /run, so as not to touch this one's socket), where it
// registers its NLM.
func TestLockKernelClientOnRdmafsServe(t *testing.T) {
	e := lab(t)
	bin := rdmafsBin(t, e)
	ns := fmt.Sprintf("rdmafs-lock-%d", os.Getpid())
	run(t, time.Minute, "ip", "netns", "add", ns)
	t.Cleanup(func() { exec.Command("ip", "netns", "del", ns).Run() })
	const hostEnd, serveEnd = "rdmafslk0", "rdmafslk1"
	exec.Command("ip", "link", "del", hostEnd).Run() // left by a test run that was killed
	run(t, time.Minute, "ip", "link", "add", hostEnd, "type", "veth", "peer", "name", serveEnd)
	t.Cleanup(func() { exec.Command("ip", "link", "del", hostEnd).Run() })
	run(t, time.Minute, "ip", "link", "set", serveEnd, "netns", ns)
	run(t, time.Minute, "ip", "addr", "add", lockNetHost+"/24", "dev", hostEnd)
	run(t, time.Minute, "ip", "link", "set", hostEnd, "up")
	run(t, time.Minute, "ip", "-n", ns, "addr", "add", lockNetServe+"/24", "dev", serveEnd)
	run(t, time.Minute, "ip", "-n", ns, "link", "set", serveEnd, "up")
	run(t, time.Minute, "ip", "-n", ns, "link", "set", "lo", "up")

	rpcbind := exec.Command("ip", "netns", "exec", ns, "sh", "-c",
		"mount -t tmpfs -o mode=755 tmpfs /run && mkdir -m 1777 /run/rpcbind && exec rpcbind -f -w")
	rpcbindOut := new(e2etest.Output)
	rpcbind.Stdout, rpcbind.Stderr = rpcbindOut, rpcbindOut
	if err := rpcbind.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		rpcbind.Process.Kill()
		rpcbind.Wait()
		if t.Failed() {
			t.Logf("rpcbind in %s: %s", ns, rpcbindOut)
		}
	})
	for i := 0; ; i++ {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		err := exec.CommandContext(ctx, "rpcinfo", "-p", lockNetServe).Run()
		cancel()
		if err == nil {
			break
		}
		if i == 100 {
			t.Fatalf("the rpcbind of network namespace %s does not answer at %s after 10 s: %s", ns, lockNetServe, rpcbindOut)
		}
		time.Sleep(100 * time.Millisecond)
	}

	dir := t.TempDir()
	if err := os.Chmod(dir, 0o777); err != nil {
		t.Fatal(err)
	}
	srv := exec.Command("ip", "netns", "exec", ns, bin, "serve", "-o",
		fmt.Sprintf("addr=%s,port=0,clients=%s,no_root_squash,insecure", lockNetServe, lockNetHost), dir)
	stdout, err := srv.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	srvErr := new(e2etest.Output)
	srv.Stderr = srvErr
	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		srv.Process.Signal(os.Interrupt)
		done := make(chan struct{})
		go func() { srv.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			srv.Process.Kill()
			<-done
		}
		if t.Failed() {
			t.Logf("rdmafs serve: %s", srvErr)
		}
	})
	port, sawLocks := "", false
	sc := bufio.NewScanner(stdout)
	re := regexp.MustCompile(`as .* on port (\d+) `)
	for sc.Scan() {
		t.Logf("rdmafs serve: %s", sc.Text())
		if m := re.FindStringSubmatch(sc.Text()); m != nil {
			port = m[1]
		}
		if strings.Contains(sc.Text(), "file locks (NLM v4") {
			sawLocks = true
		}
		if strings.HasPrefix(sc.Text(), "mount it with") {
			break
		}
	}
	go io.Copy(io.Discard, stdout)
	if port == "" || !sawLocks {
		t.Fatalf("rdmafs serve did not start with file locks (port %q): %s", port, srvErr)
	}
	// serve registers with rpcbind after it prints how to mount.
	for i := 0; ; i++ {
		p := nlmTCPPort(t, lockNetServe)
		if p == port {
			break
		}
		if i == 100 {
			t.Fatalf("NLM version 4 over TCP at port %q in the rpcbind of %s after 10 s, want serve's %s: %s", p, ns, port, srvErr)
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Logf("rdmafs serve in network namespace %s on %s port %s, its NLM registered with the rpcbind there", ns, lockNetServe, port)

	const name = "lock-on-serve"
	if err := os.WriteFile(filepath.Join(dir, name), []byte("data"), 0o666); err != nil {
		t.Fatal(err)
	}
	knfs := mountPoint(t, "knfs-lock-on-serve")
	opts := fmt.Sprintf("vers=3,proto=tcp,port=%s,mountport=%s,mountproto=tcp", port, port)
	run(t, 2*time.Minute, "mount", "-t", "nfs", "-o", opts, lockNetServe+":/", knfs)
	t.Cleanup(func() { e2etest.Unmount(t, knfs, "umount", knfs); os.Remove(knfs) })
	t.Logf("mount -t nfs -o %s %s:/ %s", opts, lockNetServe, knfs)
	served := e
	served.Addr, served.Export = lockNetServe, "/"
	rfs := mountRdmafs(t, served, fmt.Sprintf("proto=tcp,vers=3,port=%s,mountport=%s,lock", port, port))

	k, r := openLocked(t, knfs, name), openLocked(t, rfs, name)
	t.Run("fcntl kernel holds", func(t *testing.T) { contend(t, k, r, grantWithin) })
	t.Run("fcntl rdmafs holds", func(t *testing.T) { contend(t, r, k, grantWithin) })
	t.Run("flock", func(t *testing.T) {
		for _, c := range []struct {
			who              string
			holder, excluded *os.File
		}{
			{"kernel holds", k, r},
			{"rdmafs holds", r, k},
		} {
			flockContend(t, c.who, c.holder, c.excluded)
		}
	})
}
