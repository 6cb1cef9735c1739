package host

import (
	"fmt"
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

// The tests of this file hold POSIX ACLs through an rdmafs mount of
// `rdmafs serve` (NFSACL) to what they do on the server's file system:
// setfacl and getfacl through the mount, access that a named-user entry
// grants beyond the mode bits and that the mask takes back, and default
// ACLs inherited by files and directories created through the mount.

// aclExport serves a new tmpfs (which keeps POSIX ACLs) and mounts it;
// it returns the export's directory and the mount's.
func aclExport(t *testing.T, mountOpts ...string) (export, mnt string) {
	t.Helper()
	needHost(t)
	for _, tool := range []string{"setfacl", "getfacl"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Fatalf("%s is missing: install the acl package (make host-packages)", tool)
		}
	}
	export = tmpfsExport(t)
	s := startServer(t, export, 0, "no_root_squash")
	mnt = s.mount(t, mountOpts...)
	// The test users reach the mount through its parent.
	os.Chmod(filepath.Dir(mnt), 0o755)
	return export, mnt
}

// facl runs setfacl or getfacl and returns its output.
func facl(t *testing.T, tool string, args ...string) string {
	t.Helper()
	out, err := exec.Command(tool, args...).CombinedOutput()
	if err != nil {
		t.Fatalf("%s %s: %v: %s", tool, strings.Join(args, " "), err, out)
	}
	return string(out)
}

// entries is getfacl's output without its header (the file name).
func entries(t *testing.T, path string) string {
	t.Helper()
	return facl(t, "getfacl", "--omit-header", "--absolute-names", path)
}

// TestACLNamedUserThroughMount: setfacl through the mount puts the ACL on
// the server's file, getfacl through the mount shows what the server's
// file has, the named user (uid 2001) may then read and write a file whose
// mode bits refuse it, and a mask of r-- takes the write back.
func TestACLNamedUserThroughMount(t *testing.T) {
	export, mnt := aclExport(t)
	p, sp := filepath.Join(mnt, "f"), filepath.Join(export, "f")
	write(t, p, "data")
	if err := os.Chmod(p, 0o600); err != nil {
		t.Fatal(err)
	}
	if en := asUser(t, 2001, 2001, nil, "read", p); en != syscall.EACCES {
		t.Fatalf("before the ACL, uid 2001 read a 0600 root file: %v", en)
	}
	if en := asUser(t, 2001, 2001, nil, "access-r", mnt); en != 0 {
		t.Fatalf("uid 2001 cannot reach the mount: %v", en)
	}
	facl(t, "setfacl", "-m", "u:2001:rw", p)
	if got, want := entries(t, sp), "user::rw-\nuser:2001:rw-\ngroup::---\nmask::rw-\nother::---\n\n"; got != want {
		t.Fatalf("the server's file after setfacl through the mount:\n%s\nwant\n%s", got, want)
	}
	if got, want := entries(t, p), entries(t, sp); got != want {
		t.Fatalf("getfacl through the mount:\n%s\nthe server's file:\n%s", got, want)
	}
	if en := asUser(t, 2001, 2001, nil, "read", p); en != 0 {
		t.Fatalf("the named user's read: %v", en)
	}
	if en := asUser(t, 2001, 2001, nil, "write", p); en != 0 {
		t.Fatalf("the named user's write: %v", en)
	}
	if en := asUser(t, 2002, 2002, nil, "read", p); en != syscall.EACCES {
		t.Fatalf("another user's read: %v, want EACCES", en)
	}

	// The mask limits the named entry; the mode's group bits show it.
	facl(t, "setfacl", "-m", "m::r", p)
	if en := asUser(t, 2001, 2001, nil, "write", p); en != syscall.EACCES {
		t.Fatalf("the named user's write through a mask of r--: %v, want EACCES", en)
	}
	if en := asUser(t, 2001, 2001, nil, "read", p); en != 0 {
		t.Fatalf("the named user's read through a mask of r--: %v", en)
	}
	if st := statx(t, p); st.Mode&0o777 != 0o640 {
		t.Fatalf("mode through the mount after the mask: %#o, want 0640", st.Mode&0o777)
	}

	// Removing the ACL takes the access back.
	facl(t, "setfacl", "-b", p)
	if got, want := entries(t, p), "user::rw-\ngroup::---\nother::---\n\n"; got != want {
		t.Fatalf("getfacl after setfacl -b:\n%s\nwant\n%s", got, want)
	}
	if en := asUser(t, 2001, 2001, nil, "read", p); en != syscall.EACCES {
		t.Fatalf("uid 2001's read after setfacl -b: %v, want EACCES", en)
	}
}

// TestACLNamedGroupThroughMount: a named-group entry grants its members
// (uid 2002 in group 3000) what the mode bits refuse.
func TestACLNamedGroupThroughMount(t *testing.T) {
	_, mnt := aclExport(t)
	p := filepath.Join(mnt, "f")
	write(t, p, "data")
	os.Chmod(p, 0o600)
	facl(t, "setfacl", "-m", "g:3000:r", p)
	if en := asUser(t, 2002, 2002, []uint32{3000}, "read", p); en != 0 {
		t.Fatalf("a member of the named group: %v", en)
	}
	if en := asUser(t, 2002, 2002, nil, "read", p); en != syscall.EACCES {
		t.Fatalf("a non-member: %v, want EACCES", en)
	}
}

// TestACLDefaultInherited: a default ACL set through the mount is
// inherited by a file and a directory created through the mount, as on
// the server's own file system.
func TestACLDefaultInherited(t *testing.T) {
	export, mnt := aclExport(t)
	d, sd := filepath.Join(mnt, "d"), filepath.Join(export, "d")
	if err := os.Mkdir(d, 0o755); err != nil {
		t.Fatal(err)
	}
	// Without a default ACL the creator's umask applies, as locally.
	plain, localPlain := filepath.Join(d, "plain"), filepath.Join(t.TempDir(), "plain")
	for _, p := range []string{plain, localPlain} {
		if err := os.Mkdir(p, 0o777); err != nil {
			t.Fatal(err)
		}
	}
	if got, want := statx(t, plain).Mode&0o7777, statx(t, localPlain).Mode&0o7777; got != want {
		t.Fatalf("a directory made with 0777 without a default ACL has mode %#o, locally %#o", got, want)
	}
	facl(t, "setfacl", "-d", "-m", "u:2001:rwx", d)
	if got, want := entries(t, d), entries(t, sd); got != want || !strings.Contains(got, "default:user:2001:rwx") {
		t.Fatalf("getfacl of the directory through the mount:\n%s\nthe server's:\n%s", got, want)
	}
	// A program creates files with 0666 and directories with 0777.
	write(t, filepath.Join(d, "f"), "x")
	if err := os.Mkdir(filepath.Join(d, "sub"), 0o777); err != nil {
		t.Fatal(err)
	}
	// What the server's file system itself makes of the same creations.
	local := t.TempDir()
	exec.Command("mount", "-t", "tmpfs", "-o", "size=1m", "rdmafs-test-local", local).Run()
	t.Cleanup(func() { exec.Command("umount", "-l", local).Run() })
	ld := filepath.Join(local, "d")
	os.Mkdir(ld, 0o755)
	facl(t, "setfacl", "-d", "-m", "u:2001:rwx", ld)
	write(t, filepath.Join(ld, "f"), "x")
	os.Mkdir(filepath.Join(ld, "sub"), 0o777)
	for _, name := range []string{"f", "sub"} {
		want := entries(t, filepath.Join(ld, name))
		if got := entries(t, filepath.Join(sd, name)); got != want {
			t.Errorf("%s created through the mount has on the server\n%s\nwant, as created locally,\n%s", name, got, want)
		}
		if got := entries(t, filepath.Join(d, name)); got != want {
			t.Errorf("getfacl of %s through the mount\n%s\nwant\n%s", name, got, want)
		}
	}
	if en := asUser(t, 2001, 2001, nil, "create", filepath.Join(d, "sub", "g")); en != 0 {
		t.Fatalf("the inherited entry's user creating in sub: %v", en)
	}
}

// TestACLNoacl: with noacl the mount has no ACLs: getfacl shows the mode.
func TestACLNoacl(t *testing.T) {
	export, mnt := aclExport(t, "noacl")
	sp := filepath.Join(export, "f")
	write(t, sp, "data")
	os.Chmod(sp, 0o600)
	if en := asUser(t, 2001, 2001, nil, "read", filepath.Join(mnt, "f")); en != syscall.EACCES {
		t.Fatalf("before the ACL, uid 2001 read a 0600 root file: %v", en)
	}
	if en := asUser(t, 2001, 2001, nil, "access-r", mnt); en != 0 {
		t.Fatalf("uid 2001 cannot reach the mount: %v", en)
	}
	facl(t, "setfacl", "-m", "u:2001:r", sp)
	if en := asUser(t, 2001, 2001, nil, "read", filepath.Join(mnt, "f")); en != syscall.EACCES {
		t.Fatalf("with noacl, the named user's read: %v, want EACCES (the mode bits)", en)
	}
}

// TestACLChangedOnServer: an ACL changed on the server itself is seen
// through the mount once the file's attributes are revalidated (noac:
// at once), as the kernel client drops its cached ACLs when the ctime
// moves.
func TestACLChangedOnServer(t *testing.T) {
	export, mnt := aclExport(t, "noac")
	p, sp := filepath.Join(mnt, "f"), filepath.Join(export, "f")
	write(t, sp, "data")
	os.Chmod(sp, 0o600)
	if en := asUser(t, 2001, 2001, nil, "read", p); en != syscall.EACCES {
		t.Fatalf("before the ACL, uid 2001 read a 0600 root file: %v", en)
	}
	facl(t, "setfacl", "-m", "u:2001:r", sp)
	if en := asUser(t, 2001, 2001, nil, "read", p); en != 0 {
		t.Fatalf("after setfacl on the server, the named user's read through the mount: %v", en)
	}
	facl(t, "setfacl", "-x", "u:2001", sp)
	if en := asUser(t, 2001, 2001, nil, "read", p); en != syscall.EACCES {
		t.Fatalf("after the entry went on the server, the user's read through the mount: %v, want EACCES", en)
	}
}

// TestACLServerWithoutNFSACL: a server without NFSACL (go-nfs) is mounted
// without ACLs even when acl is asked for, as the kernel client does; the
// ACL attributes are then not supported, and getfacl shows the mode.
func TestACLServerWithoutNFSACL(t *testing.T) {
	needHost(t)
	dir := t.TempDir()
	port := startGoNFS(t, dir)
	mnt := t.TempDir()
	opts := fmt.Sprintf("proto=tcp,port=%d,mountport=%d,sec=none,acl", port, port)
	start := time.Now()
	if out, err := exec.Command(rdmafsBin, "-o", opts, "127.0.0.1:/", mnt).CombinedOutput(); err != nil {
		t.Fatalf("mount with acl of a server without NFSACL: %v: %s", err, out)
	}
	t.Cleanup(func() { e2etest.Unmount(t, mnt) })
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("the mount took %v", d)
	}
	p := filepath.Join(mnt, "f")
	write(t, p, "x")
	os.Chmod(p, 0o640)
	if got, want := entries(t, p), "user::rw-\ngroup::r--\nother::---\n\n"; got != want {
		t.Fatalf("getfacl:\n%s\nwant\n%s", got, want)
	}
	if _, err := unix.Getxattr(p, "system.posix_acl_access", make([]byte, 64)); err != unix.EOPNOTSUPP {
		t.Fatalf("getxattr of the access ACL: %v, want EOPNOTSUPP", err)
	}
	if out, err := exec.Command("setfacl", "-m", "u:2001:r", p).CombinedOutput(); err == nil {
		t.Fatalf("setfacl succeeded without NFSACL: %s", out)
	}
}

// TestACLLargeOverRDMA: an ACL larger than an inline RPC-over-RDMA message
// (480 named users: SETACL's call and GETACL's reply of almost 6 KB) goes
// through an RDMA mount both ways. FUSE takes no ACL larger than a page
// (fuse_set_acl: E2BIG), 511 entries.
func TestACLLargeOverRDMA(t *testing.T) {
	needHost(t)
	export := tmpfsExport(t)
	s := startServer(t, export, 0, append([]string{"no_root_squash"}, rdmaServe...)...)
	mnt := s.mount(t)
	p, sp := filepath.Join(mnt, "f"), filepath.Join(export, "f")
	write(t, p, "x")
	var spec strings.Builder
	for uid := 10000; uid < 10480; uid++ {
		fmt.Fprintf(&spec, "u:%d:r\n", uid)
	}
	specFile := filepath.Join(t.TempDir(), "acl")
	os.WriteFile(specFile, []byte(spec.String()), 0o644)
	facl(t, "setfacl", "-M", specFile, p)
	want := entries(t, sp)
	if strings.Count(want, "\nuser:") != 480 {
		t.Fatalf("the server's file has %d named users, want 480", strings.Count(want, "\nuser:"))
	}
	e2etest.DropCaches(t)
	if got := entries(t, p); got != want {
		t.Fatalf("getfacl through the mount differs from the server's file (%d and %d bytes)", len(got), len(want))
	}
}

// TestUmaskOfCallerOutsideDaemonsPIDNamespace: with ACLs rdmafs applies
// the caller's umask itself (outside a directory with a default ACL), and
// takes it from the request, as the kernel sends it: a caller the daemon
// cannot see, here because the daemon runs in a PID namespace of its own
// (as in a container), gets its own umask, 077, not a default.
func TestUmaskOfCallerOutsideDaemonsPIDNamespace(t *testing.T) {
	needHost(t)
	export := tmpfsExport(t)
	s := startServer(t, export, 0, "no_root_squash")
	mnt := t.TempDir()
	cmd := exec.Command("unshare", "--pid", "--fork", rdmafsBin, "-f", "-o", s.mountOpts(), "127.0.0.1:/", mnt)
	stderr := new(strings.Builder)
	cmd.Stderr = stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		e2etest.Unmount(t, mnt)
		cmd.Process.Kill()
		cmd.Wait()
	})
	for deadline := time.Now().Add(10 * time.Second); !e2etest.Mounted(mnt); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("not mounted after 10 s: %s", stderr)
		}
	}
	sh := exec.Command("sh", "-c", "umask 077 && echo x > f && mkdir d && mkfifo p")
	sh.Dir = mnt
	if out, err := sh.CombinedOutput(); err != nil {
		t.Fatalf("creating with umask 077: %v: %s", err, out)
	}
	for name, want := range map[string]os.FileMode{"f": 0o600, "d": 0o700, "p": 0o600} {
		for _, p := range []string{filepath.Join(mnt, name), filepath.Join(export, name)} {
			fi, err := os.Stat(p)
			if err != nil {
				t.Fatal(err)
			}
			if fi.Mode().Perm() != want {
				t.Errorf("%s made with umask 077 has mode %#o, want %#o", p, fi.Mode().Perm(), want)
			}
		}
	}
}
