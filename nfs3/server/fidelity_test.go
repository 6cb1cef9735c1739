package server

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/rdmafs/rdmafs/nfs3"
	"golang.org/x/sys/unix"
)

// The tests of this file hold the server to what knfsd does with the same
// calls: the file's own times, objects at any depth, ".." at the root,
// setuid cleared by a write.

// setattrTimes sends SETATTR of atime and mtime only.
func (c *testClient) setattrTimes(cr *sysCred, fh []byte, atimeHow nfs3.SetTime, atime [2]uint32, mtimeHow nfs3.SetTime, mtime [2]uint32) nfs3.Status {
	c.t.Helper()
	a := fhArg(fh)
	a.Uint32(0) // mode
	a.Uint32(0) // uid
	a.Uint32(0) // gid
	a.Uint32(0) // size
	a.Uint32(uint32(atimeHow))
	if atimeHow == nfs3.ClientTime {
		a.Uint32(atime[0])
		a.Uint32(atime[1])
	}
	a.Uint32(uint32(mtimeHow))
	if mtimeHow == nfs3.ClientTime {
		a.Uint32(mtime[0])
		a.Uint32(mtime[1])
	}
	a.Uint32(0) // no guard
	return c.status(nfs3.ProcSetattr, cr, a)
}

// setattrSize sends SETATTR of the size with the mtime set to the server's
// time: what the kernel client sends for truncate(2) and open(O_TRUNC).
func (c *testClient) setattrSize(cr *sysCred, fh []byte, size uint64) nfs3.Status {
	c.t.Helper()
	a := fhArg(fh)
	a.Uint32(0) // mode
	a.Uint32(0) // uid
	a.Uint32(0) // gid
	a.Uint32(1) // size
	a.Uint64(size)
	a.Uint32(uint32(nfs3.DontChange))
	a.Uint32(uint32(nfs3.ServerTime))
	a.Uint32(0) // no guard
	return c.status(nfs3.ProcSetattr, cr, a)
}

func statxOf(t *testing.T, path string) unix.Statx_t {
	t.Helper()
	var st unix.Statx_t
	if err := unix.Statx(unix.AT_FDCWD, path, unix.AT_SYMLINK_NOFOLLOW, unix.STATX_BASIC_STATS, &st); err != nil {
		t.Fatal(err)
	}
	return st
}

func nfsTime(ts unix.StatxTimestamp) [2]uint32 { return [2]uint32{uint32(ts.Sec), ts.Nsec} }

// TestAttributesAreTheFilesOwn: atime, mtime and ctime are the file's,
// with nanoseconds, and ctime moves with chmod, link and rename.
func TestAttributesAreTheFilesOwn(t *testing.T) {
	root := exportDir(t)
	path := filepath.Join(root, "f")
	os.WriteFile(path, []byte("data"), 0o644)
	os.Chtimes(path, time.Unix(1_000_000_000, 111), time.Unix(1_200_000_000, 222))
	_, addr := startServer(t, Options{Root: root, Export: trusted})
	c := dialServer(t, addr)
	rootFH := c.root()
	fh := c.mustLookup(rootFH, "f")

	want := statxOf(t, path)
	_, a := c.getattr(asRoot, fh)
	if a.atime != [2]uint32{1_000_000_000, 111} || a.mtime != [2]uint32{1_200_000_000, 222} || a.ctime != nfsTime(want.Ctime) {
		t.Fatalf("GETATTR times: atime %v mtime %v ctime %v; the file has atime %v mtime %v ctime %v",
			a.atime, a.mtime, a.ctime, want.Atime, want.Mtime, want.Ctime)
	}
	// ctime moves with a change of mode made on the server, mtime does not.
	time.Sleep(10 * time.Millisecond)
	os.Chmod(path, 0o600)
	_, b := c.getattr(asRoot, fh)
	if b.ctime == a.ctime || b.mtime != a.mtime || b.ctime != nfsTime(statxOf(t, path).Ctime) {
		t.Errorf("after chmod: ctime %v (was %v), mtime %v (was %v)", b.ctime, a.ctime, b.mtime, a.mtime)
	}
	// ... and with LINK, through the server.
	time.Sleep(10 * time.Millisecond)
	l := fhArg(fh)
	l.Opaque(rootFH)
	l.Opaque([]byte("g"))
	if st := c.status(nfs3.ProcLink, asRoot, l); st != nfs3.OK {
		t.Fatalf("LINK: %d", st)
	}
	_, d := c.getattr(asRoot, fh)
	if d.ctime == b.ctime || d.nlink != 2 {
		t.Errorf("after LINK: ctime %v (was %v), nlink %d", d.ctime, b.ctime, d.nlink)
	}

	// SETATTR of atime alone (touch -a) keeps mtime; of mtime alone keeps
	// atime.
	if st := c.setattrTimes(asRoot, fh, nfs3.ClientTime, [2]uint32{1_300_000_000, 7}, nfs3.DontChange, [2]uint32{}); st != nfs3.OK {
		t.Fatalf("SETATTR atime: %d", st)
	}
	got := statxOf(t, path)
	if nfsTime(got.Atime) != [2]uint32{1_300_000_000, 7} || nfsTime(got.Mtime) != [2]uint32{1_200_000_000, 222} {
		t.Errorf("after SETATTR atime: atime %v mtime %v", got.Atime, got.Mtime)
	}
	if _, e := c.getattr(asRoot, fh); e.atime != [2]uint32{1_300_000_000, 7} {
		t.Errorf("GETATTR after SETATTR atime: %v", e.atime)
	}
	// SET_TO_SERVER_TIME is now, for both.
	before := time.Now().Add(-time.Second).Unix()
	if st := c.setattrTimes(asRoot, fh, nfs3.ServerTime, [2]uint32{}, nfs3.ServerTime, [2]uint32{}); st != nfs3.OK {
		t.Fatalf("SETATTR to server time: %d", st)
	}
	got = statxOf(t, path)
	if got.Atime.Sec < before || got.Mtime.Sec < before {
		t.Errorf("SET_TO_SERVER_TIME: atime %v mtime %v", got.Atime, got.Mtime)
	}
	// As in knfsd, "now" needs write permission, a client time ownership.
	os.Chmod(path, 0o666)
	if st := c.setattrTimes(asUser(2000), fh, nfs3.ServerTime, [2]uint32{}, nfs3.ServerTime, [2]uint32{}); st != nfs3.OK {
		t.Errorf("SETATTR to server time by a writer: %d", st)
	}
	if st := c.setattrTimes(asUser(2000), fh, nfs3.ClientTime, [2]uint32{5, 0}, nfs3.ClientTime, [2]uint32{5, 0}); st != nfs3.ErrPerm {
		t.Errorf("SETATTR to a client time by a writer who is not the owner: %d, want PERM", st)
	}
	// A symlink's own times.
	os.Symlink("f", filepath.Join(root, "s"))
	sfh := c.mustLookup(rootFH, "s")
	if st := c.setattrTimes(asRoot, sfh, nfs3.ClientTime, [2]uint32{1_100_000_000, 0}, nfs3.ClientTime, [2]uint32{1_100_000_000, 9}); st != nfs3.OK {
		t.Fatalf("SETATTR times of a symlink: %d", st)
	}
	if ls := statxOf(t, filepath.Join(root, "s")); nfsTime(ls.Mtime) != [2]uint32{1_100_000_000, 9} {
		t.Errorf("symlink mtime %v", ls.Mtime)
	}
	if nfsTime(statxOf(t, path).Mtime) == [2]uint32{1_100_000_000, 9} {
		t.Errorf("SETATTR of a symlink changed its target")
	}
}

// TestLookupDots: "." is the directory, ".." its parent, and ".." of the
// export's root the root itself (knfsd), not something above it.
func TestLookupDots(t *testing.T) {
	root := exportDir(t)
	os.MkdirAll(filepath.Join(root, "d", "e"), 0o755)
	_, addr := startServer(t, Options{Root: root, Export: trusted})
	c := dialServer(t, addr)
	rootFH := c.root()
	d := c.mustLookup(rootFH, "d")
	e := c.mustLookup(d, "e")
	for _, tc := range []struct {
		what      string
		dir       []byte
		name      string
		want      []byte
		wantInode string
	}{
		{"root/..", rootFH, "..", rootFH, root},
		{"root/.", rootFH, ".", rootFH, root},
		{"d/..", d, "..", rootFH, root},
		{"e/..", e, "..", d, filepath.Join(root, "d")},
		{"e/.", e, ".", e, filepath.Join(root, "d", "e")},
	} {
		r := c.nfs(nfs3.ProcLookup, asUser(1000), dirop(tc.dir, tc.name))
		if st := getStatus(r); st != nfs3.OK {
			t.Errorf("LOOKUP %s: %d", tc.what, st)
			continue
		}
		fh := r.Opaque(nfs3.FHSize)
		obj := readPostOpAttr(r)
		if !bytes.Equal(fh, tc.want) || obj == nil || obj.fileid != statxOf(t, tc.wantInode).Ino {
			t.Errorf("LOOKUP %s: handle %x attrs %+v, want %x (inode of %s)", tc.what, fh, obj, tc.want, tc.wantInode)
		}
	}
}

// TestDeepPath: handles keep working below PATH_MAX, whether the server
// reaches an object through /proc, by walking up (directories), by the
// name it gave the handle out under, or, after a restart, by a search.
func TestDeepPath(t *testing.T) {
	root := exportDir(t)
	name := strings.Repeat("d", 250)
	const depth = 20 // 20 × 251 bytes: beyond PATH_MAX (4096)
	_, addr := startServer(t, Options{Root: root, Export: trusted})
	c := dialServer(t, addr)
	dir := c.root()
	for i := 0; i < depth; i++ {
		st, fh := c.mkdir(asRoot, dir, name, 0o755)
		if st != nfs3.OK {
			t.Fatalf("MKDIR at depth %d: %d", i, st)
		}
		dir = fh
	}
	st, fh := c.create(asRoot, dir, "file", 0, 0o644)
	if st != nfs3.OK {
		t.Fatalf("CREATE at depth %d: %d", depth, st)
	}
	if w := c.write(asRoot, fh, 0, []byte("deep"), nfs3.FileSync); w.status != nfs3.OK {
		t.Fatalf("WRITE: %d", w.status)
	}
	if st, data, _ := c.read(asRoot, fh, 0, 10); st != nfs3.OK || string(data) != "deep" {
		t.Fatalf("READ: %d %q", st, data)
	}
	if st, a := c.getattr(asRoot, dir); st != nfs3.OK || a.typ != nfs3.TypeDir {
		t.Fatalf("GETATTR of the deepest directory: %d", st)
	}
	if st, _, _, _ := c.readdirplus(asRoot, dir, 0, make([]byte, 8), 4096, 8192); st != nfs3.OK {
		t.Fatalf("READDIRPLUS of the deepest directory: %d", st)
	}
	// On the server: the data is where the path says.
	fd, err := unix.Open(root, unix.O_PATH|unix.O_DIRECTORY, 0)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < depth; i++ {
		next, err := unix.Openat(fd, name, unix.O_PATH|unix.O_DIRECTORY, 0)
		unix.Close(fd)
		if err != nil {
			t.Fatal(err)
		}
		fd = next
	}
	ffd, err := unix.Openat(fd, "file", unix.O_RDONLY, 0)
	unix.Close(fd)
	if err != nil {
		t.Fatalf("the file is not at depth %d on the server: %v", depth, err)
	}
	buf := make([]byte, 10)
	n, _ := unix.Read(ffd, buf)
	unix.Close(ffd)
	if string(buf[:n]) != "deep" {
		t.Fatalf("server copy: %q", buf[:n])
	}

	// A restart forgets the names handles were given out under: the
	// directory is found by walking up, the file by a search.
	_, addr2 := startServer(t, Options{Root: root, Export: trusted})
	c2 := dialServer(t, addr2)
	if st, data, _ := c2.read(asRoot, fh, 0, 10); st != nfs3.OK || string(data) != "deep" {
		t.Fatalf("READ after a restart: %d %q", st, data)
	}
	if st, _ := c2.getattr(asRoot, dir); st != nfs3.OK {
		t.Fatalf("GETATTR of the deepest directory after a restart: %d", st)
	}
	// REMOVE and RMDIR at depth.
	if st := c2.status(nfs3.ProcRemove, asRoot, dirop(dir, "file")); st != nfs3.OK {
		t.Fatalf("REMOVE at depth: %d", st)
	}
	if st, _ := c2.getattr(asRoot, fh); st != nfs3.ErrStale {
		t.Fatalf("GETATTR of the removed file: %d, want STALE", st)
	}
}

// TestWriteClearsSetuid: a WRITE by someone without CAP_FSETID clears
// setuid and setgid (with group execute), as the kernel does under knfsd;
// root (not squashed) keeps them.
func TestWriteClearsSetuid(t *testing.T) {
	root := exportDir(t)
	path := filepath.Join(root, "prog")
	os.WriteFile(path, []byte("#!/bin/sh\n"), 0o755)
	os.Chown(path, 1000, 1000)
	_, addr := startServer(t, Options{Root: root, Export: trusted})
	c := dialServer(t, addr)
	fh := c.mustLookup(c.root(), "prog")
	mode := func() os.FileMode {
		fi, err := os.Stat(path)
		if err != nil {
			t.Fatal(err)
		}
		return fi.Mode()
	}
	for _, tc := range []struct {
		who  *sysCred
		keep bool
	}{
		{asRoot, true},
		{asUser(2000), false}, // a stranger with write permission
		{asUser(1000), false}, // the owner too: no CAP_FSETID
	} {
		if err := syscall.Chmod(path, 0o6777); err != nil {
			t.Fatal(err)
		}
		if w := c.write(tc.who, fh, 0, []byte("#"), nfs3.Unstable); w.status != nfs3.OK {
			t.Fatalf("WRITE as %+v: %d", tc.who, w.status)
		}
		m := mode()
		if kept := m&(os.ModeSetuid|os.ModeSetgid) == os.ModeSetuid|os.ModeSetgid; kept != tc.keep {
			t.Errorf("after a WRITE as uid %d to a 06777 file: mode %v, want setuid/setgid kept=%v", tc.who.uid, m, tc.keep)
		}
		if m.Perm() != 0o777 {
			t.Errorf("after a WRITE as uid %d: permissions %v, want 0777", tc.who.uid, m.Perm())
		}
	}
}

// openFDsOf counts this process's descriptors open on path's inode.
func openFDsOf(t *testing.T, path string) int {
	t.Helper()
	want := statxOf(t, path)
	ents, _ := os.ReadDir("/proc/self/fd")
	n := 0
	for _, e := range ents {
		var st unix.Stat_t
		if unix.Stat(filepath.Join("/proc/self/fd", e.Name()), &st) == nil && st.Ino == want.Ino &&
			unix.Major(st.Dev) == want.Dev_major && unix.Minor(st.Dev) == want.Dev_minor {
			n++
		}
	}
	return n
}

// TestFileCacheLetsGo: the file cache closes a file when its name is
// removed (its space comes back at once), renamed over, and after two idle
// seconds (no ETXTBSY for a local exec of a file written through NFS).
func TestFileCacheLetsGo(t *testing.T) {
	root := exportDir(t)
	_, addr := startServer(t, Options{Root: root, Export: trusted})
	c := dialServer(t, addr)
	rootFH := c.root()
	written := func(name string) []byte {
		t.Helper()
		_, fh := c.create(asRoot, rootFH, name, 0, 0o755)
		if w := c.write(asRoot, fh, 0, bytes.Repeat([]byte("x"), 1<<20), nfs3.Unstable); w.status != nfs3.OK {
			t.Fatalf("WRITE %s: %d", name, w.status)
		}
		if n := openFDsOf(t, filepath.Join(root, name)); n != 1 {
			t.Fatalf("%s: %d descriptors open after a WRITE as root, want 1 (the file cache)", name, n)
		}
		return fh
	}

	// REMOVE: the blocks are freed at once.
	written("removed")
	keep, _ := os.Open(filepath.Join(root, "removed")) // to see the inode go
	var before unix.Stat_t
	unix.Fstat(int(keep.Fd()), &before)
	if st := c.status(nfs3.ProcRemove, asRoot, dirop(rootFH, "removed")); st != nfs3.OK {
		t.Fatalf("REMOVE: %d", st)
	}
	keep.Close()
	if n := countOpen(t, before.Ino); n != 0 {
		t.Errorf("after REMOVE the server still holds %d descriptors of the file", n)
	}

	// RENAME over a cached file.
	written("target")
	os.WriteFile(filepath.Join(root, "new"), []byte("n"), 0o644)
	var tst unix.Stat_t
	unix.Stat(filepath.Join(root, "target"), &tst)
	r := dirop(rootFH, "new")
	r.Opaque(rootFH)
	r.Opaque([]byte("target"))
	if st := c.status(nfs3.ProcRename, asRoot, r); st != nfs3.OK {
		t.Fatalf("RENAME: %d", st)
	}
	if n := countOpen(t, tst.Ino); n != 0 {
		t.Errorf("after RENAME over it the server still holds %d descriptors of the old file", n)
	}

	// Idle: closed within a few seconds, then the file runs.
	written("idle")
	deadline := time.Now().Add(5 * time.Second)
	for openFDsOf(t, filepath.Join(root, "idle")) != 0 {
		if time.Now().After(deadline) {
			t.Fatalf("the file cache kept an idle file open for 5 s")
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// countOpen counts this process's descriptors open on inode ino.
func countOpen(t *testing.T, ino uint64) int {
	ents, _ := os.ReadDir("/proc/self/fd")
	n := 0
	for _, e := range ents {
		var st unix.Stat_t
		if unix.Stat(filepath.Join("/proc/self/fd", e.Name()), &st) == nil && st.Ino == ino {
			n++
		}
	}
	return n
}

// TestReaddirCookiesAreOffsets: a listing resumes from any cookie it gave,
// with no state on the server, and the cookie verifier comes back as sent.
func TestReaddirCookiesAreOffsets(t *testing.T) {
	root := exportDir(t)
	for i := range 100 {
		os.WriteFile(filepath.Join(root, fmt.Sprintf("f%03d", i)), nil, 0o644)
	}
	_, addr := startServer(t, Options{Root: root, Export: trusted})
	c := dialServer(t, addr)
	rootFH := c.root()
	verf := []byte{1, 2, 3, 4, 5, 6, 7, 8}
	st, all, gotVerf, eof := c.readdirplus(asRoot, rootFH, 0, verf, 1<<16, 1<<20)
	if st != nfs3.OK || !eof || len(all) != 102 || !bytes.Equal(gotVerf, verf) {
		t.Fatalf("READDIRPLUS of 100 files: %d, %d entries, eof %v, verifier %x", st, len(all), eof, gotVerf)
	}
	// From the middle, on a new server: the same entries follow.
	_, addr2 := startServer(t, Options{Root: root, Export: trusted})
	c2 := dialServer(t, addr2)
	st, rest, _, eof := c2.readdirplus(asRoot, rootFH, all[49].cookie, verf, 1<<16, 1<<20)
	if st != nfs3.OK || !eof || len(rest) != len(all)-50 {
		t.Fatalf("READDIRPLUS from cookie %d: %d, %d entries", all[49].cookie, st, len(rest))
	}
	for i, e := range rest {
		if e.name != all[50+i].name {
			t.Fatalf("entry %d from the cookie: %q, want %q", i, e.name, all[50+i].name)
		}
	}
	// A page too small for one entry.
	a := fhArg(rootFH)
	a.Uint64(0)
	a.Fixed(verf)
	a.Uint32(10)
	a.Uint32(readdirHead + 8)
	if st := c.status(nfs3.ProcReaddirplus, asRoot, a); st != nfs3.ErrTooSmall {
		t.Errorf("READDIRPLUS with room for no entry: %d, want TOOSMALL", st)
	}
}

// TestStrangerSetsMtimeToNow: a caller who may write a file but does not
// own it may set its mtime to the server's time without its atime, as
// knfsd lets it (the kernel client's open with O_TRUNC sends that, with
// the new size). utimensat lets such a caller set both times to now only.
func TestStrangerSetsMtimeToNow(t *testing.T) {
	root := exportDir(t)
	path := filepath.Join(root, "shared")
	os.WriteFile(path, []byte("data"), 0o666)
	os.Chown(path, 1000, 1000)
	os.Chmod(path, 0o666)
	old := time.Unix(1_000_000_000, 0)
	os.Chtimes(path, old, old)
	_, addr := startServer(t, Options{Root: root, Export: trusted})
	c := dialServer(t, addr)
	fh := c.mustLookup(c.root(), "shared")
	if st := c.setattrTimes(asUser(2000), fh, nfs3.DontChange, [2]uint32{}, nfs3.ServerTime, [2]uint32{}); st != nfs3.OK {
		t.Fatalf("SETATTR mtime=server time by a stranger who may write: status %d, want NFS3_OK", st)
	}
	if mt := statxOf(t, path).Mtime; mt.Sec == old.Unix() {
		t.Errorf("mtime still %d after SETATTR mtime=server time", mt.Sec)
	}
	// What the kernel client sends for open(O_TRUNC): size 0 and mtime
	// set to the server's time.
	os.Chtimes(path, old, old)
	if st := c.setattrSize(asUser(2000), fh, 0); st != nfs3.OK {
		t.Fatalf("SETATTR size 0, mtime=server time by a stranger who may write: status %d, want NFS3_OK", st)
	}
	if st := statxOf(t, path); st.Size != 0 || st.Mtime.Sec == old.Unix() {
		t.Errorf("after SETATTR size 0, mtime=server time: size %d, mtime %d", st.Size, st.Mtime.Sec)
	}
}

// TestTruncateKeepsSetuid: a SETATTR of the size keeps setuid and setgid,
// whoever sends it, as knfsd's does (its notify_change asks for no
// ATTR_KILL_SUID), where ftruncate(2) by an unprivileged caller clears them.
func TestTruncateKeepsSetuid(t *testing.T) {
	root := exportDir(t)
	path := filepath.Join(root, "prog")
	os.WriteFile(path, []byte("#!/bin/sh\n"), 0o755)
	os.Chown(path, 1000, 1000)
	_, addr := startServer(t, Options{Root: root, Export: trusted})
	c := dialServer(t, addr)
	fh := c.mustLookup(c.root(), "prog")
	for _, who := range []*sysCred{asRoot, asUser(2000), asUser(1000)} {
		if err := syscall.Chmod(path, 0o6777); err != nil {
			t.Fatal(err)
		}
		if st := c.setattrSize(who, fh, 3); st != nfs3.OK {
			t.Fatalf("SETATTR size 3 as uid %d: status %d", who.uid, st)
		}
		fi, err := os.Stat(path)
		if err != nil {
			t.Fatal(err)
		}
		if m := fi.Mode(); fi.Size() != 3 || m&(os.ModeSetuid|os.ModeSetgid) != os.ModeSetuid|os.ModeSetgid || m.Perm() != 0o777 {
			t.Errorf("after SETATTR size 3 as uid %d of a 06777 file: size %d, mode %v; want 3, ugrwxrwxrwx", who.uid, fi.Size(), m)
		}
	}
	// The thread that truncated has dropped CAP_FSETID again: a WRITE by
	// a stranger on any credential thread still clears setuid.
	for range 2 * credThreads {
		syscall.Chmod(path, 0o6777)
		if w := c.write(asUser(2000), fh, 0, []byte("#"), nfs3.Unstable); w.status != nfs3.OK {
			t.Fatalf("WRITE: %d", w.status)
		}
		if fi, _ := os.Stat(path); fi.Mode()&os.ModeSetuid != 0 {
			t.Fatalf("a WRITE by uid 2000 after truncates kept setuid: mode %v", fi.Mode())
		}
	}
}
