package host

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/rdmafs/rdmafs/test/e2e/e2etest"
)

func write(t *testing.T, path, data string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(data), 0o644); err != nil {
		t.Fatal(err)
	}
}

func read(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func wantErrno(t *testing.T, what string, err error, want syscall.Errno) {
	t.Helper()
	if !errors.Is(err, want) {
		t.Errorf("%s: error %v, want %v", what, err, want)
	}
}

// TestRenameOverExisting renames a file over another: the target's content
// is replaced, the source name is gone, on the mount and on the server.
func TestRenameOverExisting(t *testing.T) {
	needHost(t)
	s := startServer(t, "", 0, "no_root_squash")
	mnt := s.mount(t)
	write(t, filepath.Join(mnt, "a"), "new")
	write(t, filepath.Join(mnt, "b"), "old content")
	if err := os.Rename(filepath.Join(mnt, "a"), filepath.Join(mnt, "b")); err != nil {
		t.Fatal(err)
	}
	if got := read(t, filepath.Join(mnt, "b")); got != "new" {
		t.Errorf("b through the mount = %q", got)
	}
	if got := read(t, filepath.Join(s.dir, "b")); got != "new" {
		t.Errorf("b on the server = %q", got)
	}
	_, err := os.Stat(filepath.Join(mnt, "a"))
	wantErrno(t, "stat a after rename", err, syscall.ENOENT)
	// A directory over an empty one, and into another directory.
	os.Mkdir(filepath.Join(mnt, "d1"), 0o755)
	os.Mkdir(filepath.Join(mnt, "d2"), 0o755)
	write(t, filepath.Join(mnt, "d1", "f"), "in d1")
	// syscall.Rename: os.Rename refuses to replace a directory.
	if err := syscall.Rename(filepath.Join(mnt, "d1"), filepath.Join(mnt, "d2")); err != nil {
		t.Fatal(err)
	}
	if got := read(t, filepath.Join(s.dir, "d2", "f")); got != "in d1" {
		t.Errorf("d2/f on the server = %q", got)
	}
	os.Mkdir(filepath.Join(mnt, "d3"), 0o755)
	write(t, filepath.Join(mnt, "d3", "g"), "x")
	wantErrno(t, "rename over a non-empty directory", syscall.Rename(filepath.Join(mnt, "d2"), filepath.Join(mnt, "d3")), syscall.ENOTEMPTY)
}

// TestDirectory20000 lists a directory of 20,000 entries through the mount:
// every name exactly once, over many READDIRPLUS pages.
func TestDirectory20000(t *testing.T) {
	needHost(t)
	s := startServer(t, "", 0)
	const n = 20000
	dir := filepath.Join(s.dir, "big")
	os.Mkdir(dir, 0o755)
	for i := range n {
		f, err := os.Create(filepath.Join(dir, fmt.Sprintf("entry-with-a-longer-name-%06d", i)))
		if err != nil {
			t.Fatal(err)
		}
		f.Close()
	}
	mnt := s.mount(t)
	f, err := os.Open(filepath.Join(mnt, "big"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	seen := make(map[string]int, n)
	for {
		names, err := f.Readdirnames(1000)
		for _, name := range names {
			seen[name]++
		}
		if err != nil {
			break
		}
	}
	if len(seen) != n {
		t.Errorf("listed %d distinct names, want %d", len(seen), n)
	}
	for name, count := range seen {
		if count != 1 {
			t.Errorf("%s listed %d times", name, count)
		}
	}
	for i := 0; i < n; i += 997 {
		if name := fmt.Sprintf("entry-with-a-longer-name-%06d", i); seen[name] != 1 {
			t.Errorf("%s missing", name)
		}
	}
	st, err := os.Stat(filepath.Join(mnt, "big", "entry-with-a-longer-name-012345"))
	if err != nil || !st.Mode().IsRegular() {
		t.Errorf("stat of a listed entry: %v %v", st, err)
	}
	// ls -l, and a getdents64 with a 1 MiB buffer: newer kernels ask
	// FUSE for as much of a listing as the buffer holds.
	out, err := exec.Command("ls", "-l", filepath.Join(mnt, "big")).Output()
	if lines := bytes.Count(out, []byte("\n")); err != nil || lines != n+1 {
		t.Errorf("ls -l: %d lines, want %d (%v)", lines, n+1, err)
	}
	if got, err := getdentsNames(filepath.Join(mnt, "big"), 1<<20); err != nil || got != n {
		t.Errorf("getdents64 with a 1 MiB buffer: %d names, want %d (%v)", got, n, err)
	}
}

// getdentsNames counts the names in directory dir but . and .., read by
// getdents64 with a buffer of size bytes.
func getdentsNames(dir string, size int) (int, error) {
	f, err := os.Open(dir)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	buf := make([]byte, size)
	names := 0
	for {
		n, err := unix.Getdents(int(f.Fd()), buf)
		if err != nil {
			return names, err
		}
		if n == 0 {
			return names, nil
		}
		for off := 0; off < n; {
			reclen := int(binary.LittleEndian.Uint16(buf[off+16:]))
			if name := unix.ByteSliceToString(buf[off+19 : off+reclen]); name != "." && name != ".." {
				names++
			}
			off += reclen
		}
	}
}

// TestSpecialFiles makes a FIFO, a socket and devices through the mount.
func TestSpecialFiles(t *testing.T) {
	needHost(t)
	s := startServer(t, "", 0, "no_root_squash")
	mnt := s.mount(t)
	if err := unix.Mkfifo(filepath.Join(mnt, "fifo"), 0o640); err != nil {
		t.Fatal(err)
	}
	if err := unix.Mknod(filepath.Join(mnt, "chr"), unix.S_IFCHR|0o600, int(unix.Mkdev(1, 3))); err != nil {
		t.Fatal(err)
	}
	if err := unix.Mknod(filepath.Join(mnt, "blk"), unix.S_IFBLK|0o600, int(unix.Mkdev(7, 200))); err != nil {
		t.Fatal(err)
	}
	l, err := net.ListenUnix("unix", &net.UnixAddr{Name: filepath.Join(mnt, "sock"), Net: "unix"})
	if err != nil {
		t.Fatal(err)
	}
	l.SetUnlinkOnClose(false)
	l.Close()
	for _, c := range []struct {
		name string
		typ  uint32
		rdev uint64
	}{
		{"fifo", unix.S_IFIFO, 0}, {"chr", unix.S_IFCHR, unix.Mkdev(1, 3)},
		{"blk", unix.S_IFBLK, unix.Mkdev(7, 200)}, {"sock", unix.S_IFSOCK, 0},
	} {
		for _, where := range []string{mnt, s.dir} {
			var st unix.Stat_t
			if err := unix.Lstat(filepath.Join(where, c.name), &st); err != nil {
				t.Errorf("%s: %v", c.name, err)
				continue
			}
			if st.Mode&unix.S_IFMT != c.typ || (c.rdev != 0 && st.Rdev != c.rdev) {
				t.Errorf("%s in %s: mode %o rdev %d:%d", c.name, where, st.Mode, unix.Major(st.Rdev), unix.Minor(st.Rdev))
			}
		}
	}
	// The character device works through the mount: it is /dev/null.
	write(t, filepath.Join(mnt, "chr"), "discarded")
}

// TestSetattr changes mode, owner, size and times through the mount.
func TestSetattr(t *testing.T) {
	needHost(t)
	s := startServer(t, "", 0, "no_root_squash")
	mnt := s.mount(t)
	p := filepath.Join(mnt, "f")
	write(t, p, "0123456789")
	check := func(what string, ok func(st *unix.Stat_t) bool) {
		t.Helper()
		for _, where := range []string{p, filepath.Join(s.dir, "f")} {
			var st unix.Stat_t
			if err := unix.Stat(where, &st); err != nil || !ok(&st) {
				t.Errorf("%s: %s: %+v %v", what, where, st, err)
			}
		}
	}
	if err := os.Chmod(p, 0o751); err != nil {
		t.Fatal(err)
	}
	check("chmod 751", func(st *unix.Stat_t) bool { return st.Mode&0o7777 == 0o751 })
	if err := os.Chown(p, 1234, 5678); err != nil {
		t.Fatal(err)
	}
	check("chown 1234:5678", func(st *unix.Stat_t) bool { return st.Uid == 1234 && st.Gid == 5678 })
	if err := os.Truncate(p, 4); err != nil {
		t.Fatal(err)
	}
	check("truncate to 4", func(st *unix.Stat_t) bool { return st.Size == 4 })
	if got := read(t, p); got != "0123" {
		t.Errorf("after truncate: %q", got)
	}
	if err := os.Truncate(p, 1<<20); err != nil {
		t.Fatal(err)
	}
	check("truncate to 1 MiB", func(st *unix.Stat_t) bool { return st.Size == 1<<20 })
	when := time.Date(2001, 2, 3, 4, 5, 6, 0, time.UTC)
	if err := os.Chtimes(p, when, when); err != nil {
		t.Fatal(err)
	}
	check("utimes 2001", func(st *unix.Stat_t) bool { return st.Mtim.Sec == when.Unix() && st.Atim.Sec == when.Unix() })
	// UTIME_NOW: the server's clock.
	if err := unix.UtimesNanoAt(unix.AT_FDCWD, p, []unix.Timespec{{Nsec: unix.UTIME_NOW}, {Nsec: unix.UTIME_NOW}}, 0); err != nil {
		t.Fatal(err)
	}
	check("utimes now", func(st *unix.Stat_t) bool { return time.Since(time.Unix(st.Mtim.Sec, 0)) < time.Minute })
	// Truncate through an open file, with data written just before.
	f, err := os.OpenFile(p, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	f.WriteAt([]byte("abcdef"), 0)
	if err := f.Truncate(3); err != nil {
		t.Fatal(err)
	}
	f.Close()
	if got := read(t, filepath.Join(s.dir, "f")); got != "abc" {
		t.Errorf("server copy after write and ftruncate: %q", got)
	}
}

// TestCreateModes checks O_CREAT|O_EXCL and O_CREAT|O_TRUNC.
func TestCreateModes(t *testing.T) {
	needHost(t)
	s := startServer(t, "", 0, "no_root_squash")
	mnt := s.mount(t)
	p := filepath.Join(mnt, "x")
	f, err := os.OpenFile(p, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o640)
	if err != nil {
		t.Fatal(err)
	}
	f.WriteString("first")
	f.Close()
	if st, err := os.Stat(filepath.Join(s.dir, "x")); err != nil || st.Mode().Perm() != 0o640 {
		t.Errorf("exclusive create on the server: %v %v", st, err)
	}
	_, err = os.OpenFile(p, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o640)
	wantErrno(t, "O_EXCL on an existing file", err, syscall.EEXIST)
	f, err = os.OpenFile(p, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	f.Close()
	if got := read(t, filepath.Join(s.dir, "x")); got != "" {
		t.Errorf("O_TRUNC left %q", got)
	}
}

// TestErrnos checks that NFS errors reach programs as the right errno.
func TestErrnos(t *testing.T) {
	needHost(t)
	s := startServer(t, "", 0, "no_root_squash")
	mnt := s.mount(t)
	os.Mkdir(filepath.Join(mnt, "full"), 0o755)
	write(t, filepath.Join(mnt, "full", "f"), "x")
	wantErrno(t, "rmdir of a non-empty directory", os.Remove(filepath.Join(mnt, "full")), syscall.ENOTEMPTY)
	wantErrno(t, "unlink of a missing file", os.Remove(filepath.Join(mnt, "missing")), syscall.ENOENT)
	_, err := os.Stat(filepath.Join(mnt, "missing"))
	wantErrno(t, "stat of a missing file", err, syscall.ENOENT)
	wantErrno(t, "name of 256 bytes", os.WriteFile(filepath.Join(mnt, strings.Repeat("n", 256)), nil, 0o644), syscall.ENAMETOOLONG)
	wantErrno(t, "mkdir over a file", os.Mkdir(filepath.Join(mnt, "full", "f"), 0o755), syscall.EEXIST)
	wantErrno(t, "rmdir of a file", syscall.Rmdir(filepath.Join(mnt, "full", "f")), syscall.ENOTDIR)
	wantErrno(t, "unlink of a directory", syscall.Unlink(filepath.Join(mnt, "full")), syscall.EISDIR)

	// A file removed on the server while the client has it open is stale.
	p := filepath.Join(mnt, "gone")
	write(t, p, "soon gone")
	f, err := os.Open(p)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := os.Remove(filepath.Join(s.dir, "gone")); err != nil {
		t.Fatal(err)
	}
	e2etest.DropCaches(t)
	_, err = f.ReadAt(make([]byte, 4), 0)
	wantErrno(t, "read of a file removed on the server", err, syscall.ESTALE)
}

// TestUnlinkOpenFile: a program that unlinks a file it has open can still
// use it, and nothing is left behind after it closes it.
func TestUnlinkOpenFile(t *testing.T) {
	needHost(t)
	s := startServer(t, "", 0, "no_root_squash")
	mnt := s.mount(t)
	p := filepath.Join(mnt, "tmp")
	write(t, p, "still here")
	f, err := os.OpenFile(p, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(p); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(p); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("stat after unlink: %v", err)
	}
	e2etest.DropCaches(t)
	buf := make([]byte, 10)
	if _, err := f.ReadAt(buf, 0); err != nil || string(buf) != "still here" {
		t.Errorf("read after unlink: %q %v", buf, err)
	}
	if _, err := f.WriteAt([]byte("STILL"), 0); err != nil {
		t.Errorf("write after unlink: %v", err)
	}
	f.Close()
	expectEmpty(t, s.dir)
}

// expectEmpty checks that dir on the server becomes empty. The kernel
// releases a file after close(2) returns, as it does for the kernel
// client: a hidden .nfs name may take a moment to go.
func expectEmpty(t *testing.T, dir string) {
	t.Helper()
	var entries []os.DirEntry
	for range 100 {
		if entries, _ = os.ReadDir(dir); len(entries) == 0 {
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
	for _, e := range entries {
		t.Errorf("left on the server after the last close: %s", e.Name())
	}
}

// TestUnlinkRightAfterClose: unlinking files just closed, while their
// release is still on its way to rdmafs (FUSE sends it after close(2)
// returns), leaves no hidden .nfs file behind on the server.
func TestUnlinkRightAfterClose(t *testing.T) {
	needHost(t)
	s := startServer(t, "", 0, "no_root_squash")
	mnt := s.mount(t)
	for i := range 300 {
		p := filepath.Join(mnt, fmt.Sprintf("f%d", i))
		write(t, p, "short-lived")
		if err := os.Remove(p); err != nil {
			t.Fatal(err)
		}
	}
	expectEmpty(t, s.dir)
	// Each was a plain REMOVE: none needed a hidden name (RENAME), as
	// with the kernel client, whose close is synchronous.
	if code, out := rdmafs(t, 10*time.Second, "stats", mnt); code != 0 || !strings.Contains(out, "RENAME: 0 0 ") {
		t.Errorf("unlinks after close were renamed to hidden names: exit %d\n%s", code, out)
	}
}

// TestUnlinkWithDupOpen: a file whose descriptor was closed while a
// duplicate of it stays open is still readable through the duplicate
// after an unlink, and goes from the server after the last close.
func TestUnlinkWithDupOpen(t *testing.T) {
	needHost(t)
	s := startServer(t, "", 0, "no_root_squash")
	mnt := s.mount(t)
	p := filepath.Join(mnt, "dup")
	write(t, p, "shared")
	f, err := os.Open(p)
	if err != nil {
		t.Fatal(err)
	}
	fd, err := syscall.Dup(int(f.Fd()))
	if err != nil {
		t.Fatal(err)
	}
	g := os.NewFile(uintptr(fd), "dup")
	f.Close() // a FLUSH, but the file stays open through g
	if err := os.Remove(p); err != nil {
		t.Fatal(err)
	}
	e2etest.DropCaches(t)
	buf := make([]byte, 6)
	if _, err := g.ReadAt(buf, 0); err != nil || string(buf) != "shared" {
		t.Errorf("read through the duplicate after unlink: %q %v", buf, err)
	}
	g.Close()
	expectEmpty(t, s.dir)
}

// TestCloseToOpen: a change made on the server by someone else is seen at
// the next open, even though the client had the old data cached.
func TestCloseToOpen(t *testing.T) {
	needHost(t)
	s := startServer(t, "", 0, "no_root_squash")
	mnt := s.mount(t)
	p := filepath.Join(mnt, "f")
	write(t, p, "version one")
	if got := read(t, p); got != "version one" {
		t.Fatalf("read %q", got)
	}
	time.Sleep(10 * time.Millisecond) // a distinct mtime
	write(t, filepath.Join(s.dir, "f"), "version two, longer")
	if got := read(t, p); got != "version two, longer" {
		t.Errorf("after the server changed it: %q", got)
	}
}

// TestStatfs: df through the mount shows the server's file system.
func TestStatfs(t *testing.T) {
	needHost(t)
	s := startServer(t, "", 0)
	mnt := s.mount(t)
	var server, client unix.Statfs_t
	if err := unix.Statfs(s.dir, &server); err != nil {
		t.Fatal(err)
	}
	if err := unix.Statfs(mnt, &client); err != nil {
		t.Fatal(err)
	}
	total := func(st *unix.Statfs_t) uint64 { return st.Blocks * uint64(st.Frsize) }
	if a, b := total(&server), total(&client); a/(1<<20) != b/(1<<20) {
		t.Errorf("size %d MiB through the mount, %d MiB on the server", b>>20, a>>20)
	}
	if client.Files != server.Files {
		t.Errorf("files %d through the mount, %d on the server", client.Files, server.Files)
	}
}

// TestStats: rdmafs stats prints the mountstats block with the calls made.
func TestStats(t *testing.T) {
	needHost(t)
	s := startServer(t, "", 0, "no_root_squash")
	mnt := s.mount(t)
	write(t, filepath.Join(mnt, "f"), "data")
	code, out := rdmafs(t, 10*time.Second, "stats", mnt)
	if code != 0 {
		t.Fatalf("rdmafs stats: exit %d: %s", code, out)
	}
	for _, want := range []string{"mounted on " + mnt, "xprt:\ttcp ", "CREATE: 1 1 ", "WRITE: 1 1 "} {
		if !strings.Contains(out, want) {
			t.Errorf("stats lack %q:\n%s", want, out)
		}
	}
	if code, out := rdmafs(t, 10*time.Second, "stats", s.dir); code == 0 || !bytes.Contains([]byte(out), []byte("not an rdmafs mount")) {
		t.Errorf("stats of a plain directory: exit %d: %s", code, out)
	}
}
