package host

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/rdmafs/rdmafs/test/e2e/e2etest"
)

// helperPath is where mount(8), through mount.fuse3, finds rdmafs: it runs
// helpers with a fixed PATH, so the binary must be in a system directory.
const helperPath = "/usr/local/sbin/rdmafs"

// installHelper makes the binary under test reachable for mount(8) for the
// test's duration.
func installHelper(t *testing.T) {
	t.Helper()
	if _, err := exec.LookPath("mount.fuse3"); err != nil {
		t.Skip("mount.fuse3 (package fuse3) is not installed")
	}
	if target, err := os.Readlink(helperPath); err == nil && target == rdmafsBin {
		return
	}
	if _, err := os.Lstat(helperPath); err == nil {
		t.Skipf("%s exists and is not the binary under test: not replacing it", helperPath)
	}
	if err := os.Symlink(rdmafsBin, helperPath); err != nil {
		t.Skipf("cannot install %s: %v", helperPath, err)
	}
	t.Cleanup(func() { os.Remove(helperPath) })
}

// TestMountHelperAndFstab mounts with mount -t fuse.rdmafs and from an
// fstab line, as a user would from mount(8) and at boot.
func TestMountHelperAndFstab(t *testing.T) {
	needHost(t)
	installHelper(t)
	s := startServer(t, "", 0)
	write(t, filepath.Join(s.dir, "hello"), "from the server")

	mnt := t.TempDir()
	if out, err := exec.Command("mount", "-t", "fuse.rdmafs", "127.0.0.1:/", mnt, "-o", s.mountOpts()+",_netdev").CombinedOutput(); err != nil {
		t.Fatalf("mount -t fuse.rdmafs: %v: %s", err, out)
	}
	if got := read(t, filepath.Join(mnt, "hello")); got != "from the server" {
		t.Errorf("through mount -t fuse.rdmafs: %q", got)
	}
	if out, err := exec.Command("umount", mnt).CombinedOutput(); err != nil {
		t.Fatalf("umount: %v: %s", err, out)
	}

	fstab := filepath.Join(t.TempDir(), "fstab")
	line := "127.0.0.1:/ " + mnt + " fuse.rdmafs " + s.mountOpts() + ",_netdev,nofail 0 0\n"
	os.WriteFile(fstab, []byte(line), 0o644)
	if out, err := exec.Command("mount", "--fstab", fstab, mnt).CombinedOutput(); err != nil {
		t.Fatalf("mount from fstab line %q: %v: %s", line, err, out)
	}
	defer e2etest.Unmount(t, mnt)
	if got := read(t, filepath.Join(mnt, "hello")); got != "from the server" {
		t.Errorf("through the fstab mount: %q", got)
	}

	// A bad option through mount(8) is refused the same way.
	out, err := exec.Command("mount", "-t", "fuse.rdmafs", "127.0.0.1:/", t.TempDir(), "-o", s.mountOpts()+",rsize=abc").CombinedOutput()
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() == 0 {
		t.Errorf("mount with rsize=abc: %v: %s", err, out)
	}
}
