package host

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/rdmafs/rdmafs/test/e2e/difftest"
	"golang.org/x/sys/unix"
)

// sharedMount mounts s's export where every user can reach it.
func sharedMount(t *testing.T, s *server, opts ...string) string {
	t.Helper()
	os.Chmod(s.dir, 0o777)
	mnt := s.mount(t, opts...)
	os.Chmod(filepath.Dir(mnt), 0o755)
	return mnt
}

// script runs ops as difftest's users in a new directory under mnt.
func script(t *testing.T, mnt, name string, ops []difftest.Op) []difftest.Result {
	t.Helper()
	dir := filepath.Join(mnt, name)
	if err := os.Mkdir(dir, 0o777); err != nil {
		t.Fatal(err)
	}
	os.Chmod(dir, 0o777)
	run, err := difftest.NewRun(dir, difftest.Users)
	if err != nil {
		t.Fatal(err)
	}
	defer run.Close()
	return run.Script(ops)
}

// TestRootMountOpenToAll: a mount made by root serves every local user
// with their own credentials, as an NFS mount does, unless noallow_other
// says otherwise.
func TestRootMountOpenToAll(t *testing.T) {
	needHost(t)
	s := startServer(t, "", 0)
	mnt := sharedMount(t, s)
	if en := asUser(t, 2001, 2001, nil, "create", filepath.Join(mnt, "alices")); en != 0 {
		t.Fatalf("alice creates a file in a 0777 directory of root's mount: %v", en)
	}
	var st syscall.Stat_t
	if err := syscall.Stat(filepath.Join(s.dir, "alices"), &st); err != nil || st.Uid != 2001 {
		t.Errorf("alice's file on the server: uid %d (%v)", st.Uid, err)
	}
	if en := asUser(t, 2002, 2002, nil, "read", filepath.Join(mnt, "alices")); en != 0 {
		t.Errorf("bob reads alice's 0644 file: %v", en)
	}
	mountinfo, _ := os.ReadFile("/proc/self/mountinfo")
	for line := range strings.SplitSeq(string(mountinfo), "\n") {
		if strings.Contains(line, " "+mnt+" ") && !strings.Contains(line, "allow_other") {
			t.Errorf("mountinfo of root's mount lacks allow_other: %s", line)
		}
	}

	private := s.mount(t, "noallow_other")
	os.Chmod(filepath.Dir(private), 0o755)
	if en := asUser(t, 2001, 2001, nil, "read", filepath.Join(private, "alices")); en != syscall.EACCES {
		t.Errorf("alice reads through a noallow_other mount: %v, want EACCES", en)
	}
}

// TestSearchPermissionOnCachedNames: once a directory's owner takes away
// its search permission, every system call that walks a path through it
// fails for her and for others, although the kernel has the names under it
// cached; root's capabilities still pass.
func TestSearchPermissionOnCachedNames(t *testing.T) {
	needHost(t)
	s := startServer(t, "", 0)
	mnt := sharedMount(t, s)
	ops := difftest.SearchPermission()
	res := script(t, mnt, "search", ops)
	taken := false
	for i, op := range ops {
		if op.Call == difftest.Chmod && op.Path == "d" {
			taken = op.Mode&0o100 == 0
			continue
		}
		if op.Call == difftest.Close || op.Call == difftest.Readdir {
			continue // closes of what did not open; listing needs read permission only
		}
		if !taken || op.User == "root" {
			if res[i].Errno != "" {
				t.Errorf("step %d (%v): %v", i, op, res[i])
			}
			continue
		}
		if res[i].Errno != "EACCES" {
			t.Errorf("step %d (%v) with search permission on d taken away: %v, want EACCES", i, op, res[i])
		}
	}
	if data, err := os.ReadFile(filepath.Join(s.dir, "search/d/f")); err != nil || len(data) != 100 {
		t.Errorf("the server's d/f: %d bytes (%v), want its 100", len(data), err)
	}
}

// TestSpecialFilePermissions: opening a FIFO checks its permissions,
// although the open never reaches rdmafs.
func TestSpecialFilePermissions(t *testing.T) {
	needHost(t)
	s := startServer(t, "", 0)
	mnt := sharedMount(t, s)
	alice, bob := difftest.Alice.Name, difftest.Bob.Name
	op := func(u string, c difftest.Call, path string, flags int, mode uint32) difftest.Op {
		return difftest.Op{User: u, Call: c, Path: path, Flags: flags, Mode: mode, FD: u, UID: -1, GID: -1}
	}
	ops := []difftest.Op{
		op(alice, difftest.Mkfifo, "p", 0, 0o600),
		op(bob, difftest.Open, "p", unix.O_RDWR, 0),
		op(bob, difftest.Open, "p", unix.O_RDONLY|unix.O_NONBLOCK, 0),
		op(alice, difftest.Open, "p", unix.O_RDWR, 0),
		op(alice, difftest.Close, "", 0, 0),
	}
	res := script(t, mnt, "fifo", ops)
	for i, want := range []string{"", "EACCES", "EACCES", "", ""} {
		if res[i].Errno != want {
			t.Errorf("step %d (%v): %v, want %q", i, ops[i], res[i], want)
		}
	}
}

// TestWriteToSetuidFile: another user with write permission may write to
// a setuid and setgid file (the server clears the bits, as knfsd does).
func TestWriteToSetuidFile(t *testing.T) {
	needHost(t)
	s := startServer(t, "", 0)
	mnt := sharedMount(t, s)
	p := filepath.Join(mnt, "suid")
	write(t, p, "")
	if err := syscall.Chmod(p, 0o6777); err != nil {
		t.Fatal(err)
	}
	if en := asUser(t, 2001, 2001, nil, "write", p); en != 0 {
		t.Fatalf("alice writes to root's 06777 file: %v", en)
	}
	if data, err := os.ReadFile(filepath.Join(s.dir, "suid")); err != nil || string(data) != "x" {
		t.Errorf("the server's copy: %q (%v)", data, err)
	}
}
