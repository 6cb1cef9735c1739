package host

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/rdmafs/rdmafs/nfs3"
	"github.com/rdmafs/rdmafs/sunrpc"
	"github.com/rdmafs/rdmafs/test/e2e/e2etest"
)

// The tests of this file attack `rdmafs serve` as a local user of a shared
// host would, and check that its defaults are knfsd's safe ones (secure,
// root_squash, this host only) and that a crowd of connections cannot make
// it hold memory without bound.

// nfsClients dials the server's MOUNT and NFS service (one port) with the
// repository's own client, from a reserved source port or an ordinary one.
func nfsClients(t *testing.T, port int, reserved bool) (*nfs3.MountClient, *nfs3.Client) {
	t.Helper()
	cfg := nfs3.DialConfig{Host: "127.0.0.1", Port: port, ReservedPort: reserved, Timeout: 5 * time.Second,
		Auth: sunrpc.Auth{Flavor: sunrpc.AuthSys, Machine: "attacker"}}
	mc, err := nfs3.DialMount(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { mc.Close() })
	tr := sunrpc.NewTCP(sunrpc.TCPConfig{Addr: net.JoinHostPort("127.0.0.1", strconv.Itoa(port)), ReservedPort: reserved})
	rpc := sunrpc.NewClient(tr, sunrpc.Config{Prog: nfs3.Program, Vers: nfs3.Version, Auth: cfg.Auth,
		Timeout: 5 * time.Second, Retrans: 1, Soft: true, ProcNames: nfs3.ProcNames})
	t.Cleanup(func() { rpc.Close() })
	return mc, nfs3.NewClient(rpc, nfs3.ClientConfig{})
}

var rootCred = &sunrpc.Cred{UID: 0, GID: 0}

// TestServeHostileClient: a local user who can open a connection (from an
// unprivileged port) and claim AUTH_SYS uid 0 gets neither root's secret
// nor a setuid-root program into the export; a client on a reserved port
// claiming uid 0 is squashed to nobody.
func TestServeHostileClient(t *testing.T) {
	needHost(t)
	s := startServer(t, "", 0) // the defaults
	os.Chmod(s.dir, 0o755)
	secret := filepath.Join(s.dir, "secret")
	if err := os.WriteFile(secret, []byte("root's secret"), 0o600); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()

	// From an unprivileged port: not even a MOUNT.
	mc, c := nfsClients(t, s.port, false)
	if _, _, err := mc.Mnt(ctx, rootCred, "/"); !errors.Is(err, nfs3.MountErrAcces) {
		t.Errorf("MNT from an unprivileged port: %v, want MNT3ERR_ACCES", err)
	}
	// With the root handle (learnt elsewhere): no NFS call either.
	rmc, rc := nfsClients(t, s.port, true)
	rootFH, _, err := rmc.Mnt(ctx, rootCred, "/")
	if err != nil {
		t.Fatalf("MNT from a reserved port: %v", err)
	}
	var lr nfs3.LookupResult
	if err := c.Lookup(ctx, rootCred, &rootFH, "secret", &lr); !errors.Is(err, nfs3.ErrPerm) {
		t.Errorf("LOOKUP as uid 0 from an unprivileged port: %v, want NFS3ERR_PERM", err)
	}
	if err := rc.Lookup(ctx, rootCred, &rootFH, "secret", &lr); err != nil {
		t.Fatalf("LOOKUP from a reserved port: %v", err)
	}
	var rr nfs3.ReadResult
	if err := c.Read(ctx, rootCred, &lr.FH, 0, 100, &rr); err == nil {
		t.Fatalf("READ of root's 0600 file as uid 0 from an unprivileged port: %q", rr.Data)
	} else if !errors.Is(err, nfs3.ErrPerm) {
		t.Errorf("READ from an unprivileged port: %v, want NFS3ERR_PERM", err)
	}
	var cr nfs3.CreateResult
	setuid := &nfs3.Sattr{SetMode: true, Mode: 0o4755}
	if err := c.Create(ctx, rootCred, &rootFH, "rootshell", nfs3.Unchecked, setuid, nfs3.Verf{}, &cr); err == nil {
		t.Errorf("CREATE of a setuid file as uid 0 from an unprivileged port succeeded")
	}
	if _, err := os.Lstat(filepath.Join(s.dir, "rootshell")); err == nil {
		t.Fatal("an unprivileged client created a file in the export")
	}

	// From a reserved port, uid 0 is nobody (root_squash).
	if err := rc.Read(ctx, rootCred, &lr.FH, 0, 100, &rr); !errors.Is(err, nfs3.ErrAcces) {
		t.Errorf("READ of root's 0600 file as squashed uid 0: %v (%q), want NFS3ERR_ACCES", err, rr.Data)
	}
	if err := rc.Create(ctx, rootCred, &rootFH, "rootshell", nfs3.Unchecked, setuid, nfs3.Verf{}, &cr); !errors.Is(err, nfs3.ErrAcces) {
		t.Errorf("CREATE in root's 0755 directory as squashed uid 0: %v, want NFS3ERR_ACCES", err)
	}
	os.Chmod(s.dir, 0o777)
	if err := rc.Create(ctx, rootCred, &rootFH, "rootshell", nfs3.Unchecked, setuid, nfs3.Verf{}, &cr); err != nil {
		t.Fatalf("CREATE in a 0777 directory as squashed uid 0: %v", err)
	}
	var st syscall.Stat_t
	if err := syscall.Stat(filepath.Join(s.dir, "rootshell"), &st); err != nil || st.Uid != 65534 || st.Gid != 65534 {
		t.Errorf("setuid file made as squashed uid 0: owner %d:%d (%v), want 65534:65534, not root", st.Uid, st.Gid, err)
	}
}

// servePrinted starts `rdmafs serve` with opts on dir and returns the mount
// command it prints for rdmafs (with MOUNTPOINT still in it).
func servePrinted(t *testing.T, dir, opts string) []string {
	t.Helper()
	cmd := exec.Command(rdmafsBin, "serve", "-o", opts, dir)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cmd.Process.Signal(syscall.SIGTERM)
		cmd.Wait()
		if t.Failed() {
			t.Logf("rdmafs serve: %s", stderr.String())
		}
	})
	sc := bufio.NewScanner(out)
	for sc.Scan() {
		if line, ok := strings.CutPrefix(sc.Text(), "mount it with: "); ok {
			go io.Copy(io.Discard, out)
			return strings.Fields(line)
		}
	}
	t.Fatalf("rdmafs serve printed no mount command: %s", stderr.String())
	return nil
}

// runPrinted runs a printed rdmafs command with its MOUNTPOINT filled in.
func runPrinted(t *testing.T, printed []string, mnt string) (int, string) {
	t.Helper()
	if printed[0] != "rdmafs" {
		t.Fatalf("printed command %q", printed)
	}
	args := make([]string, 0, len(printed)-1)
	for _, a := range printed[1:] {
		args = append(args, strings.ReplaceAll(a, "MOUNTPOINT", mnt))
	}
	code, out := rdmafs(t, 30*time.Second, args...)
	if code == 0 {
		t.Cleanup(func() { e2etest.Unmount(t, mnt) })
	}
	return code, out
}

// TestServePrintedCommandWorks: the mount command serve prints works as
// printed with the defaults (rdmafs run as root connects from a reserved
// port), and root is squashed through it.
func TestServePrintedCommandWorks(t *testing.T) {
	needHost(t)
	dir := t.TempDir()
	os.Chmod(dir, 0o1777)
	mnt := t.TempDir()
	if code, out := runPrinted(t, servePrinted(t, dir, "port=0"), mnt); code != 0 {
		t.Fatalf("the printed mount command: exit %d: %s", code, out)
	}
	write(t, filepath.Join(mnt, "f"), "through the printed command")
	if got := read(t, filepath.Join(dir, "f")); got != "through the printed command" {
		t.Fatalf("the server has %q", got)
	}
	var st syscall.Stat_t
	if err := syscall.Stat(filepath.Join(dir, "f"), &st); err != nil || st.Uid != 65534 {
		t.Errorf("a file root wrote through the mount is owned by %d (%v), want 65534 (root_squash)", st.Uid, err)
	}

	// Over RDMA (the soft provider) too.
	dir2 := t.TempDir()
	os.Chmod(dir2, 0o1777)
	mnt2 := t.TempDir()
	if code, out := runPrinted(t, servePrinted(t, dir2, "port=0,proto=rdma,provider=soft,rdmaport=0"), mnt2); code != 0 {
		t.Fatalf("the printed RDMA mount command: exit %d: %s", code, out)
	}
	write(t, filepath.Join(mnt2, "f"), "over rdma")
	if got := read(t, filepath.Join(dir2, "f")); got != "over rdma" {
		t.Fatalf("the server has %q", got)
	}
}

// TestServeClients: a client outside clients= cannot mount; one inside can.
func TestServeClients(t *testing.T) {
	needHost(t)
	dir := t.TempDir()
	mnt := t.TempDir()
	code, out := runPrinted(t, servePrinted(t, dir, "port=0,clients=192.0.2.0/24+198.51.100.7"), mnt)
	if code == 0 || !strings.Contains(out, "denied") {
		t.Errorf("mount from 127.0.0.1 of an export for 192.0.2.0/24: exit %d: %s", code, out)
	}
	if code, out := runPrinted(t, servePrinted(t, dir, "port=0,clients=192.0.2.0/24+127.0.0.0/8"), mnt); code != 0 {
		t.Errorf("mount from a listed network: exit %d: %s", code, out)
	}
}

// vmRSS is the resident memory of process pid, in bytes.
func vmRSS(t *testing.T, pid int) int64 {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Fatal(err)
	}
	for line := range strings.SplitSeq(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			if err != nil {
				t.Fatal(err)
			}
			return kb << 10
		}
	}
	t.Fatal("no VmRSS")
	return 0
}

// TestServeMemoryBounded: 150 connections that each send most of a large
// record and stop hold the server's memory to its record budget, where
// before the server buffered every record: 150 records of 4 MB took it from
// 31 MB to 923 MB. A record claiming more than the largest call (1 MiB
// WRITE) ends its connection at once.
func TestServeMemoryBounded(t *testing.T) {
	needHost(t)
	const conns = 150
	s := startServer(t, "", 0)
	os.Chmod(s.dir, 0o755)
	pid := s.cmd.Process.Pid
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(s.port))
	// Warm the server up: one ordinary mount's worth of calls.
	mnt := s.mount(t)
	os.ReadDir(mnt)
	base := vmRSS(t, pid)

	attack := func(claim, send int) []net.Conn {
		t.Helper()
		data := make([]byte, send)
		var mu sync.Mutex
		var all []net.Conn
		var wg sync.WaitGroup
		for range conns {
			wg.Add(1)
			go func() {
				defer wg.Done()
				c, err := net.Dial("tcp", addr)
				if err != nil {
					t.Error(err)
					return
				}
				mu.Lock()
				all = append(all, c)
				mu.Unlock()
				hdr := []byte{byte(claim >> 24), byte(claim >> 16), byte(claim >> 8), byte(claim)}
				hdr[0] |= 0x80 // last fragment
				c.SetWriteDeadline(time.Now().Add(10 * time.Second))
				c.Write(append(hdr, data...))
			}()
		}
		wg.Wait()
		t.Cleanup(func() {
			for _, c := range all {
				c.Close()
			}
		})
		return all
	}

	// Records longer than the largest call: refused at the header.
	for _, c := range attack(4<<20, 4<<20-4096) {
		c.SetReadDeadline(time.Now().Add(10 * time.Second))
		if _, err := c.Read(make([]byte, 1)); err == nil || errors.Is(err, os.ErrDeadlineExceeded) {
			t.Fatalf("a connection claiming a 4 MiB record is still open: %v", err)
		}
	}

	// Records of the largest valid size, all but the last KiB sent.
	const claim = 1<<20 + 512
	attack(claim, claim-1024)
	var peak int64
	for range 20 {
		peak = max(peak, vmRSS(t, pid))
		time.Sleep(100 * time.Millisecond)
	}
	// What the server may hold: its 64 MiB record budget, plus per
	// connection the first 64 KiB of a record and a 64 KiB read buffer.
	bound := int64(64<<20 + conns*(128<<10) + 32<<20) // and 32 MiB of slack for the runtime
	t.Logf("rdmafs serve RSS: %d MiB before, peak %d MiB with %d connections each holding %d of a %d-byte record (bound: %d MiB more)",
		base>>20, peak>>20, conns, claim-1024, claim, bound>>20)
	if peak-base > bound {
		t.Errorf("rdmafs serve grew by %d MiB, more than %d MiB", (peak-base)>>20, bound>>20)
	}
	// The server still serves.
	if _, err := os.ReadDir(mnt); err != nil {
		t.Errorf("the mount during the attack: %v", err)
	}
}

// TestServeIdleTimeout: idle_timeout closes a connection that says nothing.
func TestServeIdleTimeout(t *testing.T) {
	needHost(t)
	s := startServer(t, "", 0, "idle_timeout=1")
	c, err := net.Dial("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(s.port)))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetReadDeadline(time.Now().Add(10 * time.Second))
	start := time.Now()
	if _, err := c.Read(make([]byte, 1)); err == nil || errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("an idle connection is still open after 10 s (%v)", err)
	}
	if d := time.Since(start); d < 900*time.Millisecond {
		t.Errorf("closed after %v, before the 1 s idle timeout", d)
	}
}
