package host

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/rdmafs/rdmafs/test/e2e/e2etest"
	"github.com/rdmafs/rdmafs/test/e2e/workload"
)

// The server side of TestRDMAMatrix: rdmafs over the soft provider against
// `rdmafs serve -o proto=rdma,provider=soft` with each of serve's options
// that applies to RDMA connections, as the guest runs the kernel NFS/RDMA
// client against it. Each case checks what a user of the option would.

// serveCases are serve's options over RDMA, each with the check of what it
// does. The workload runs as root: the cases that are not about squashing
// export with no_root_squash.
var serveCases = []struct {
	name string
	opts []string
	test func(t *testing.T, s *server)
}{
	{"rw", []string{"rw", "no_root_squash"}, serveWorkload},
	{"ro", []string{"ro", "no_root_squash"}, serveReadOnly},
	{"workers=1", []string{"workers=1", "no_root_squash"}, serveWorkload},
	{"secure", []string{"no_root_squash"}, serveSecure},
	{"insecure", []string{"insecure", "no_root_squash"}, serveInsecure},
	{"root_squash", nil, serveRootSquash},
	{"all_squash", []string{"all_squash", "anonuid=4321", "anongid=8765"}, serveAllSquash},
	{"clients/admitted", []string{"clients=192.0.2.0/24+127.0.0.0/8", "no_root_squash"}, serveWorkload},
}

// testServeOptions runs serveCases, each against its own server, and the
// refusals of a client outside clients=.
func testServeOptions(t *testing.T) {
	for _, c := range serveCases {
		t.Run("serve/"+c.name, func(t *testing.T) {
			c.test(t, startServer(t, "", 0, append(rdmaServe, c.opts...)...))
		})
	}
	t.Run("serve/clients/refused", serveClientRefused)
}

// serveWorkload: the small workload through the mount, checked in the
// server's directory, all of it over RPC-over-RDMA.
func serveWorkload(t *testing.T, s *server) {
	mnt := s.mount(t)
	workload.RunSmall(t, mnt, workload.DirChecker(s.dir))
	if f := checkRDMAStats(t, mnt); f["sends"] == 0 || f["read_chunk_count"]+f["write_chunk_count"] == 0 {
		t.Errorf("%d calls, %d read and %d write chunks: the workload did not go over RDMA", f["sends"], f["read_chunk_count"], f["write_chunk_count"])
	}
}

// serveReadOnly: what the server has can be read; every change is refused
// (with EROFS, or EACCES for an open to write) and the server's directory
// stays as it was.
func serveReadOnly(t *testing.T, s *server) {
	write(t, filepath.Join(s.dir, "given"), "from the server")
	if err := os.Mkdir(filepath.Join(s.dir, "sub"), 0o755); err != nil {
		t.Fatal(err)
	}
	mnt := s.mount(t)
	if got := read(t, filepath.Join(mnt, "given")); got != "from the server" {
		t.Errorf("read through the ro export: %q", got)
	}
	wantErrno(t, "create", os.WriteFile(filepath.Join(mnt, "new"), []byte("x"), 0o644), syscall.EROFS)
	// Opening a file to write it is refused earlier, with EACCES: ACCESS
	// grants no MODIFY on a ro export (knfsd's nfsd_access leaves out
	// the bits its permission check answers with ROFS), so the kernel
	// NFS client against knfsd refuses the open with EACCES too.
	wantErrno(t, "overwrite", os.WriteFile(filepath.Join(mnt, "given"), []byte("changed"), 0o644), syscall.EACCES)
	wantErrno(t, "mkdir", os.Mkdir(filepath.Join(mnt, "dir"), 0o755), syscall.EROFS)
	wantErrno(t, "rename", os.Rename(filepath.Join(mnt, "given"), filepath.Join(mnt, "moved")), syscall.EROFS)
	wantErrno(t, "unlink", os.Remove(filepath.Join(mnt, "given")), syscall.EROFS)
	wantErrno(t, "rmdir", os.Remove(filepath.Join(mnt, "sub")), syscall.EROFS)
	wantErrno(t, "chmod", os.Chmod(filepath.Join(mnt, "given"), 0o600), syscall.EROFS)
	names, err := os.ReadDir(s.dir)
	if err != nil || len(names) != 2 {
		t.Errorf("the server's directory after the refused changes: %v, %v; want given and sub", names, err)
	}
	if got := read(t, filepath.Join(s.dir, "given")); got != "from the server" {
		t.Errorf("the server's copy after the refused changes: %q", got)
	}
	checkRDMAStats(t, mnt)
}

// serveSecure: secure (the default) refuses a MOUNT from an unreserved
// port: MOUNT stays on TCP, where the port is what serve checks. The
// RPC-over-RDMA connection itself counts as secure, as in knfsd's svcrdma
// (which marks every RDMA request secure): the soft provider connects from
// an ordinary port, and the calls over it are served.
func serveSecure(t *testing.T, s *server) {
	wantMountError(t, s.mountOpts()+",noresvport", "access denied by server (MNT3ERR_ACCES)")
	mnt := s.mount(t) // root: MOUNT from a reserved port
	port := rdmaSourcePort(t, s.rdmaPort)
	if port < 1024 {
		t.Fatalf("the RDMA connection comes from port %d, a reserved one: the case tests nothing", port)
	}
	write(t, filepath.Join(mnt, "f"), "over a connection from an unreserved port")
	if got := read(t, filepath.Join(s.dir, "f")); got != "over a connection from an unreserved port" {
		t.Errorf("the server has %q", got)
	}
	checkRDMAStats(t, mnt)
	e2etest.Unmount(t, mnt)
	s.stop() // its log is whole once it has exited
	if !strings.Contains(s.log.String(), "unreserved source port") {
		t.Errorf("the server's log does not say why it refused the MOUNT: %s", s.log)
	}
}

// serveInsecure: insecure takes a MOUNT from an unreserved port.
func serveInsecure(t *testing.T, s *server) {
	mnt := s.mount(t, "noresvport")
	workload.RunSmall(t, mnt, workload.DirChecker(s.dir))
	checkRDMAStats(t, mnt)
}

// rdmaSourcePort is the source port of the one soft-RDMA connection to
// 127.0.0.1:port (the soft provider carries RDMA over a TCP connection).
func rdmaSourcePort(t *testing.T, port int) int {
	t.Helper()
	b, err := os.ReadFile("/proc/net/tcp")
	if err != nil {
		t.Fatal(err)
	}
	var found []int
	for l := range strings.SplitSeq(string(b), "\n") {
		// sl local_address rem_address st ...: addresses are HEX:PORT,
		// 127.0.0.1 is 0100007F; state 01 is ESTABLISHED.
		f := strings.Fields(l)
		if len(f) < 4 || f[3] != "01" {
			continue
		}
		_, loc, _ := strings.Cut(f[1], ":")
		if f[2] == fmt.Sprintf("0100007F:%04X", port) {
			l, _ := strconv.ParseUint(loc, 16, 16)
			found = append(found, int(l))
		}
	}
	if len(found) != 1 {
		t.Fatalf("connections to the RDMA port %d from ports %v, want one", port, found)
	}
	return found[0]
}

// serveRootSquash: by default root is nobody: what it creates is owned by
// 65534, and it cannot read root's 0600 file.
func serveRootSquash(t *testing.T, s *server) {
	os.Chmod(s.dir, 0o777)
	if err := os.WriteFile(filepath.Join(s.dir, "secret"), []byte("root's secret"), 0o600); err != nil {
		t.Fatal(err)
	}
	mnt := s.mount(t)
	write(t, filepath.Join(mnt, "f"), "by root")
	wantOwner(t, filepath.Join(s.dir, "f"), 65534, 65534)
	if b, err := os.ReadFile(filepath.Join(mnt, "secret")); err == nil {
		t.Errorf("squashed root read root's 0600 file: %q", b)
	} else {
		wantErrno(t, "read of root's 0600 file", err, syscall.EACCES)
	}
	checkRDMAStats(t, mnt)
}

// serveAllSquash: every caller, root or not, is anonuid:anongid: the
// workload runs, and what root and another user create is the anonymous
// identity's on the server.
func serveAllSquash(t *testing.T, s *server) {
	mnt := sharedMount(t, s)
	workload.RunSmall(t, mnt, workload.DirChecker(s.dir))
	write(t, filepath.Join(mnt, "by-root"), "x")
	if err := os.Mkdir(filepath.Join(mnt, "dir-by-root"), 0o755); err != nil {
		t.Fatal(err)
	}
	if e := asUser(t, 1000, 1000, nil, "create", filepath.Join(mnt, "by-user")); e != 0 {
		t.Fatalf("create as uid 1000: %v", e)
	}
	for _, name := range []string{"by-root", "dir-by-root", "by-user"} {
		wantOwner(t, filepath.Join(s.dir, name), 4321, 8765)
	}
	checkRDMAStats(t, mnt)
}

// wantOwner checks the owner of the server's file path.
func wantOwner(t *testing.T, path string, uid, gid uint32) {
	t.Helper()
	var st syscall.Stat_t
	if err := syscall.Lstat(path, &st); err != nil {
		t.Errorf("%s on the server: %v", filepath.Base(path), err)
	} else if st.Uid != uid || st.Gid != gid {
		t.Errorf("%s is owned by %d:%d on the server, want %d:%d", filepath.Base(path), st.Uid, st.Gid, uid, gid)
	}
}

// serveClientRefused: a client outside clients= gets no mount over RDMA.
// With one server it is refused at MOUNT (over TCP). A client that has the
// export's root handle from elsewhere and skips MOUNT is refused by the
// RDMA listener: here it mounts through a second server that does admit
// it (serving the same directory) and connects over RDMA to the one that
// does not.
func serveClientRefused(t *testing.T) {
	s := startServer(t, "", 0, append(rdmaServe, "clients=192.0.2.0/24")...)
	wantMountError(t, s.mountOpts(), "access denied by server (MNT3ERR_ACCES)")

	admits := startServer(t, s.dir, 0)
	wantMountError(t, fmt.Sprintf("proto=rdma,provider=soft,port=%d,mountport=%d", s.rdmaPort, admits.port),
		"it does not admit this client")
	s.stop() // its log is whole once it has exited
	if !strings.Contains(s.log.String(), "not among the export's clients") {
		t.Errorf("the server's log does not say why it refused the connection: %s", s.log)
	}
}

// wantMountError mounts 127.0.0.1:/ with opts and wants the mount to fail
// at once, with exit status 32 and an error that contains want.
func wantMountError(t *testing.T, opts, want string) {
	t.Helper()
	mnt := t.TempDir()
	start := time.Now()
	code, out := rdmafs(t, time.Minute, "-o", opts, "127.0.0.1:/", mnt)
	d := time.Since(start)
	if code != 32 || !strings.Contains(out, want) {
		t.Errorf("mount -o %s: exit %d, output %q; want 32 and %q", opts, code, out, want)
	}
	if d > 5*time.Second {
		t.Errorf("mount -o %s took %v to fail", opts, d)
	}
	if e2etest.Mounted(mnt) {
		t.Errorf("mount -o %s failed but left %s mounted", opts, mnt)
		e2etest.Unmount(t, mnt)
	}
}
