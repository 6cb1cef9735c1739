package host

import (
	"bytes"
	"context"
	"crypto/sha256"
	"fmt"
	"math/rand"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/rdmafs/rdmafs/nfs3"
	"github.com/rdmafs/rdmafs/sunrpc"
	"github.com/rdmafs/rdmafs/test/e2e/e2etest"
	"github.com/rdmafs/rdmafs/test/netns"
	"github.com/rdmafs/rdmafs/test/seed"
)

// The tests of this file hold `rdmafs serve` to what knfsd does on the same
// operations, seen through rdmafs mounts, libnfs and the server's directory:
// the files' own times, paths beyond PATH_MAX, subdirectory mounts, setuid
// cleared by a write, space freed by rm, and ".." at the root.

func statx(t *testing.T, path string) unix.Statx_t {
	t.Helper()
	var st unix.Statx_t
	if err := unix.Statx(unix.AT_FDCWD, path, unix.AT_SYMLINK_NOFOLLOW, unix.STATX_BASIC_STATS, &st); err != nil {
		t.Fatal(err)
	}
	return st
}

func sameTime(a, b unix.StatxTimestamp) bool { return a.Sec == b.Sec && a.Nsec == b.Nsec }

// TestServeTimes: through the mount, atime, mtime and ctime are the
// server's file's own, to the nanosecond; touch -a changes atime only;
// chmod moves ctime.
func TestServeTimes(t *testing.T) {
	needHost(t)
	s := startServer(t, "", 0, "no_root_squash")
	mnt := s.mount(t)
	p, sp := filepath.Join(mnt, "f"), filepath.Join(s.dir, "f")
	write(t, p, "x")
	atime := unix.Timespec{Sec: 1_000_000_000, Nsec: 123456789}
	mtime := unix.Timespec{Sec: 1_100_000_000, Nsec: 987654321}
	if err := unix.UtimesNanoAt(unix.AT_FDCWD, p, []unix.Timespec{atime, mtime}, 0); err != nil {
		t.Fatal(err)
	}
	srv := statx(t, sp)
	if srv.Atime.Sec != atime.Sec || srv.Atime.Nsec != uint32(atime.Nsec) || srv.Mtime.Sec != mtime.Sec || srv.Mtime.Nsec != uint32(mtime.Nsec) {
		t.Fatalf("utimensat through the mount: the server has atime %v mtime %v", srv.Atime, srv.Mtime)
	}
	check := func(what string) {
		t.Helper()
		srv, got := statx(t, sp), statx(t, p)
		if !sameTime(got.Atime, srv.Atime) || !sameTime(got.Mtime, srv.Mtime) || !sameTime(got.Ctime, srv.Ctime) {
			t.Errorf("%s: the mount shows atime %v mtime %v ctime %v; the server's file has %v %v %v",
				what, got.Atime, got.Mtime, got.Ctime, srv.Atime, srv.Mtime, srv.Ctime)
		}
	}
	check("after utimensat")
	// touch -a: atime only.
	now := unix.Timespec{Sec: 1_200_000_000, Nsec: 5}
	if err := unix.UtimesNanoAt(unix.AT_FDCWD, p, []unix.Timespec{now, {Nsec: unix.UTIME_OMIT}}, 0); err != nil {
		t.Fatal(err)
	}
	if srv := statx(t, sp); srv.Atime.Sec != now.Sec || srv.Mtime.Sec != mtime.Sec {
		t.Errorf("touch -a through the mount: the server has atime %v mtime %v", srv.Atime, srv.Mtime)
	}
	check("after touch -a")
	// chmod: ctime moves, mtime stays.
	before := statx(t, sp).Ctime
	time.Sleep(20 * time.Millisecond)
	if err := os.Chmod(p, 0o600); err != nil {
		t.Fatal(err)
	}
	if after := statx(t, p); sameTime(after.Ctime, before) || after.Mtime.Sec != mtime.Sec {
		t.Errorf("chmod through the mount: ctime %v (was %v), mtime %v", after.Ctime, before, after.Mtime)
	}
	check("after chmod")
}

// TestServeDeepPath: a file whose path below the export is longer than
// PATH_MAX is created, written, read, listed and removed through the mount.
func TestServeDeepPath(t *testing.T) {
	needHost(t)
	s := startServer(t, "", 0, "no_root_squash")
	mnt := s.mount(t)
	name := strings.Repeat("d", 250)
	const depth = 20 // 20 × 251 bytes, beyond PATH_MAX (4096)
	walk := func(top string, create bool) int {
		t.Helper()
		fd, err := unix.Open(top, unix.O_PATH|unix.O_DIRECTORY, 0)
		if err != nil {
			t.Fatal(err)
		}
		for i := 0; i < depth; i++ {
			if create {
				if err := unix.Mkdirat(fd, name, 0o755); err != nil {
					t.Fatalf("mkdir at depth %d (%d bytes below %s): %v", i, i*251, top, err)
				}
			}
			next, err := unix.Openat(fd, name, unix.O_PATH|unix.O_DIRECTORY, 0)
			unix.Close(fd)
			if err != nil {
				t.Fatalf("open at depth %d (%d bytes below %s): %v", i, i*251, top, err)
			}
			fd = next
		}
		return fd
	}
	dir := walk(mnt, true)
	defer unix.Close(dir)
	data := bytes.Repeat([]byte("deep "), 10000)
	f, err := unix.Openat(dir, "file", unix.O_CREAT|unix.O_WRONLY|unix.O_TRUNC, 0o644)
	if err != nil {
		t.Fatalf("create at %d bytes: %v", depth*251, err)
	}
	if n, err := unix.Write(f, data); err != nil || n != len(data) {
		t.Fatalf("write: %d %v", n, err)
	}
	if err := unix.Close(f); err != nil {
		t.Fatalf("close: %v", err)
	}
	e2etest.DropCaches(t)
	sdir := walk(s.dir, false)
	defer unix.Close(sdir)
	for what, d := range map[string]int{"the server": sdir, "the mount": dir} {
		f, err := unix.Openat(d, "file", unix.O_RDONLY, 0)
		if err != nil {
			t.Fatalf("%s: open: %v", what, err)
		}
		got := make([]byte, 2*len(data))
		n, _ := unix.Read(f, got)
		unix.Close(f)
		if !bytes.Equal(got[:n], data) {
			t.Errorf("%s has %d bytes, want %d", what, n, len(data))
		}
	}
	lf, err := unix.Openat(dir, ".", unix.O_RDONLY|unix.O_DIRECTORY, 0)
	if err != nil {
		t.Fatal(err)
	}
	lister := os.NewFile(uintptr(lf), "deep")
	names, err := lister.Readdirnames(-1)
	lister.Close()
	if err != nil || len(names) != 1 || names[0] != "file" {
		t.Errorf("listing at depth: %q %v", names, err)
	}
	if err := unix.Unlinkat(dir, "file", 0); err != nil {
		t.Errorf("rm at depth: %v", err)
	}
	if err := unix.Faccessat(sdir, "file", unix.F_OK, 0); err == nil {
		t.Error("the file is still on the server after rm")
	}
}

// TestServeSubdirMount: a directory below the export mounts, with rdmafs
// as with knfsd.
func TestServeSubdirMount(t *testing.T) {
	needHost(t)
	s := startServer(t, "", 0, "no_root_squash")
	os.MkdirAll(filepath.Join(s.dir, "sub", "dir"), 0o755)
	os.WriteFile(filepath.Join(s.dir, "sub", "dir", "there"), []byte("below"), 0o644)
	mnt := t.TempDir()
	code, out := rdmafs(t, 30*time.Second, "-o", s.mountOpts(), "127.0.0.1:/sub/dir", mnt)
	if code != 0 {
		t.Fatalf("mount of 127.0.0.1:/sub/dir: exit %d: %s", code, out)
	}
	t.Cleanup(func() { e2etest.Unmount(t, mnt) })
	if got := read(t, filepath.Join(mnt, "there")); got != "below" {
		t.Errorf("the subdirectory mount shows %q", got)
	}
	write(t, filepath.Join(mnt, "new"), "made in the subdirectory")
	if got := read(t, filepath.Join(s.dir, "sub", "dir", "new")); got != "made in the subdirectory" {
		t.Errorf("the server has %q", got)
	}
	code, out = rdmafs(t, 30*time.Second, "-o", s.mountOpts(), "127.0.0.1:/sub/missing", t.TempDir())
	if code == 0 || !strings.Contains(out, "MNT3ERR_NOENT") {
		t.Errorf("mount of a missing directory: exit %d: %s", code, out)
	}
}

// TestServeWriteClearsSetuid: another user's WRITE to a setuid and setgid
// file clears both bits on the server, as it does under knfsd. The WRITE
// comes from the repository's NFS client, so that nothing but the server
// can clear them.
func TestServeWriteClearsSetuid(t *testing.T) {
	needHost(t)
	s := startServer(t, "", 0)
	os.Chmod(s.dir, 0o755)
	sp := filepath.Join(s.dir, "suid")
	os.WriteFile(sp, []byte("#!/bin/sh\n"), 0o755)
	os.Chown(sp, 2002, 2002)
	if err := syscall.Chmod(sp, 0o6777); err != nil {
		t.Fatal(err)
	}
	mc, c := nfsClients(t, s.port, true)
	ctx := context.Background()
	root, _, err := mc.Mnt(ctx, rootCred, "/")
	if err != nil {
		t.Fatal(err)
	}
	alice := &sunrpc.Cred{UID: 2001, GID: 2001}
	var lr nfs3.LookupResult
	if err := c.Lookup(ctx, alice, &root, "suid", &lr); err != nil {
		t.Fatal(err)
	}
	var wr nfs3.WriteResult
	if err := c.Write(ctx, alice, &lr.FH, 0, []byte("#"), nfs3.FileSync, &wr); err != nil {
		t.Fatalf("WRITE as uid 2001 to 2002's 06777 file: %v", err)
	}
	fi, err := os.Stat(sp)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode()&(os.ModeSetuid|os.ModeSetgid) != 0 || fi.Mode().Perm() != 0o777 {
		t.Errorf("after another user's WRITE the server's file has mode %v, want 0777 without setuid and setgid", fi.Mode())
	}
}

// TestServeLookupDotDotAtRoot: LOOKUP ".." of the export's root answers the
// root itself, as knfsd does.
func TestServeLookupDotDotAtRoot(t *testing.T) {
	needHost(t)
	s := startServer(t, "", 0)
	mc, c := nfsClients(t, s.port, true)
	ctx := context.Background()
	root, _, err := mc.Mnt(ctx, rootCred, "/")
	if err != nil {
		t.Fatal(err)
	}
	var lr nfs3.LookupResult
	if err := c.Lookup(ctx, rootCred, &root, "..", &lr); err != nil {
		t.Fatalf("LOOKUP .. at the root: %v", err)
	}
	if lr.FH != root || !lr.HasAttr || lr.Attr.FileID != statx(t, s.dir).Ino {
		t.Errorf("LOOKUP .. at the root: handle %v, attributes %+v; want the root (inode %d)", lr.FH, lr.Attr, statx(t, s.dir).Ino)
	}
}

// TestServeSpaceAfterRm: on a small tmpfs export, a file written through
// the mount and removed gives its space back at once (the server's file
// cache lets go of it), and a program written through the mount runs on
// the server (no "Text file busy" from a file the cache holds open).
func TestServeSpaceAfterRm(t *testing.T) {
	needHost(t)
	export := tmpfsExport(t)
	s := startServer(t, export, 0, "no_root_squash")
	mnt := s.mount(t)
	free := func() uint64 {
		var sfs unix.Statfs_t
		if err := unix.Statfs(export, &sfs); err != nil {
			t.Fatal(err)
		}
		return sfs.Bavail * uint64(sfs.Bsize)
	}
	empty := free()
	fill := func(name string) {
		t.Helper()
		p := filepath.Join(mnt, name)
		if err := os.WriteFile(p, bytes.Repeat([]byte{0x5a}, 12<<20), 0o644); err != nil {
			t.Fatalf("writing 12 MiB to a 16 MiB export: %v", err)
		}
	}
	fill("first")
	if f := free(); f > empty-12<<20 {
		t.Fatalf("after writing 12 MiB, %d of %d bytes are free", f, empty)
	}
	if err := os.Remove(filepath.Join(mnt, "first")); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(time.Second)
	for free() < empty-1<<20 {
		if time.Now().After(deadline) {
			t.Fatalf("1 s after rm, %d of %d bytes are free: the server holds the removed file", free(), empty)
		}
		time.Sleep(20 * time.Millisecond)
	}
	fill("second") // ENOSPC if the first were still held

	// A program written through the mount runs on the server.
	prog := filepath.Join(mnt, "prog")
	write(t, prog, "#!/bin/sh\necho ran\n")
	if err := os.Chmod(prog, 0o755); err != nil {
		t.Fatal(err)
	}
	var out []byte
	var err error
	for start := time.Now(); time.Since(start) < 10*time.Second; time.Sleep(200 * time.Millisecond) {
		out, err = exec.Command(filepath.Join(export, "prog")).CombinedOutput()
		if err == nil || !strings.Contains(err.Error(), "text file busy") {
			break
		}
	}
	if err != nil || string(out) != "ran\n" {
		t.Errorf("running on the server a program written through the mount: %v: %q", err, out)
	}
}

// TestLibnfsSubdirectory: libnfs's nfs-cp writes and reads a file in a
// subdirectory of `rdmafs serve` (a MOUNT of the subdirectory), and nfs-ls
// lists it; the checksums match, and the server holds the same bytes. The
// defaults apply: libnfs run as root connects from a reserved port, and
// root is squashed.
func TestLibnfsSubdirectory(t *testing.T) {
	needHost(t)
	for _, tool := range []string{"nfs-cp", "nfs-ls"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("%s is not installed (Debian libnfs-utils; make deps installs it)", tool)
		}
	}
	s := startServer(t, "", 0)
	os.Chmod(s.dir, 0o755)
	sub := filepath.Join(s.dir, "sub", "dir")
	os.MkdirAll(sub, 0o755)
	os.Chmod(sub, 0o777)
	data := make([]byte, 3<<20+12345)
	rand.New(rand.NewSource(int64(seed.New(t, "RDMAFS_LIBNFS_SEED")))).Read(data)
	local := filepath.Join(t.TempDir(), "local")
	os.WriteFile(local, data, 0o644)
	want := sha256.Sum256(data)
	q := fmt.Sprintf("?nfsport=%d&mountport=%d&version=3", s.port, s.port)
	run := func(args ...string) string {
		t.Helper()
		out, err := exec.Command(args[0], args[1:]...).CombinedOutput()
		if err != nil {
			t.Fatalf("%s: %v: %s", strings.Join(args, " "), err, out)
		}
		return string(out)
	}
	for i, url := range []string{"nfs://127.0.0.1/sub/dir/file1", "nfs://127.0.0.1//sub/dir/file2"} {
		name := "file" + strconv.Itoa(i+1)
		run("nfs-cp", local, url+q)
		srv, err := os.ReadFile(filepath.Join(sub, name))
		if err != nil || sha256.Sum256(srv) != want {
			t.Fatalf("nfs-cp to %s: the server has %d bytes (%v), checksum differs", url, len(srv), err)
		}
		var st syscall.Stat_t
		if syscall.Stat(filepath.Join(sub, name), &st); st.Uid != 65534 {
			t.Errorf("the file libnfs wrote as root is owned by %d, want 65534 (root_squash)", st.Uid)
		}
		back := filepath.Join(t.TempDir(), "back")
		run("nfs-cp", url+q, back)
		if got, _ := os.ReadFile(back); sha256.Sum256(got) != want {
			t.Errorf("nfs-cp from %s: %d bytes, checksum differs", url, len(got))
		}
	}
	ls := run("nfs-ls", "nfs://127.0.0.1/sub/dir"+q)
	for _, name := range []string{"file1", "file2"} {
		if !strings.Contains(ls, " "+name) || !strings.Contains(ls, strconv.Itoa(len(data))) {
			t.Errorf("nfs-ls of the subdirectory does not list %s with its size:\n%s", name, ls)
		}
	}
}

// TestServeShowmount: with an rpcbind on the host, serve registers MOUNT
// and NFS as mountd and nfsd do, `showmount -e` lists the export with its
// clients, and stopping serve takes the registrations back. The rpcbind is
// the test's own, in a network and mount namespace of its own (loopback
// only, a private /run), so the host's services are not touched.
func TestServeShowmount(t *testing.T) {
	needHost(t)
	netns.Need(t, "showmount")
	dir := t.TempDir()
	script := netns.Script(`"$RDMAFS" serve -o port=0 "$DIR" >"$DIR.out" 2>"$DIR.err" & serve=$!
for i in $(seq 100); do rpcinfo -p 127.0.0.1 | grep -q mountd && break; sleep 0.05; done
echo "== showmount"
showmount -e 127.0.0.1
kill $serve; wait $serve || true
echo "== after"
rpcinfo -p 127.0.0.1
`)
	cmd := netns.Command(script)
	cmd.Env = append(os.Environ(), "RDMAFS="+rdmafsBin, "DIR="+dir)
	out, err := cmd.CombinedOutput()
	if err != nil {
		log, _ := os.ReadFile(dir + ".err")
		t.Fatalf("%v: %s\nrdmafs serve: %s", err, out, log)
	}
	during, after, _ := strings.Cut(string(out), "== after")
	if !strings.Contains(during, "Export list for 127.0.0.1:\n/ 127.0.0.1\n") {
		t.Errorf("showmount -e does not list / for 127.0.0.1:\n%s", out)
	}
	if strings.Contains(after, "mountd") || strings.Contains(after, "nfs") {
		t.Errorf("after serve stopped, rpcbind still has:\n%s", after)
	}
}
