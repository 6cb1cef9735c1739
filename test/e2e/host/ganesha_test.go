package host

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/rdmafs/rdmafs/test/e2e/e2etest"
	"github.com/rdmafs/rdmafs/test/e2e/workload"
	"github.com/rdmafs/rdmafs/test/ganesha"
)

// The host tests that do not depend on the server's kind, against
// NFS-Ganesha (VFS back end, NFSv3 over TCP, its own NLM) as a second real
// server beside rdmafs serve: data and metadata, two rdmafs mounts locking
// against each other, ACLs and statistics. Each test runs in a network
// namespace of its own where package ganesha starts the server.

// ganeshaEnv marks the copy of the test binary that runs inside the
// namespace.
const ganeshaEnv = "RDMAFS_HOST_GANESHA"

// inGanesha runs the calling test again in a namespace where Ganesha
// serves as c says, and returns false; inside, it returns true.
func inGanesha(t *testing.T, c ganesha.Config) bool {
	t.Helper()
	needHost(t)
	if !ganesha.Rerun(t, ganeshaEnv, c) {
		return false
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("ganesha.nfsd's log:\n%s", ganesha.Log())
		}
	})
	return true
}

// ganeshaExport is the export of the Ganesha of the test's namespace.
type ganeshaExport struct{}

var _ export = ganeshaExport{}

func (ganeshaExport) exportDir() string { return ganesha.Export }
func (ganeshaExport) source() string    { return ganesha.Source }

func (g ganeshaExport) mount(t *testing.T, opts ...string) string {
	t.Helper()
	mnt := t.TempDir()
	args := []string{g.source(), mnt}
	if len(opts) > 0 {
		args = append([]string{"-o", strings.Join(opts, ",")}, args...)
	}
	if code, out := rdmafs(t, time.Minute, args...); code != 0 {
		t.Fatalf("mount %s: status %d: %s", g.source(), code, out)
	}
	t.Cleanup(func() { e2etest.Unmount(t, mnt) })
	return mnt
}

// TestGaneshaWorkload: the workload, checked in Ganesha's export, and
// close-to-open consistency between two mounts.
func TestGaneshaWorkload(t *testing.T) {
	if !inGanesha(t, ganesha.Config{}) {
		return
	}
	g := ganeshaExport{}
	a, b := g.mount(t), g.mount(t)
	workload.Run(t, a, workload.DirChecker(g.exportDir()))
	workload.CrossCheck(t, a, b, workload.DirChecker(g.exportDir()))
}

// TestGaneshaLocks: two rdmafs mounts lock against each other through
// Ganesha's lock manager: fcntl locks exclude each other, F_GETLK names
// the holder, a waiter gets a released lock, flock(2) is a whole-file
// lock, and 2 × 100 increments of a counter under fcntl locks add up.
func TestGaneshaLocks(t *testing.T) {
	if !inGanesha(t, ganesha.Config{}) {
		return
	}
	g := ganeshaExport{}
	write(t, filepath.Join(g.exportDir(), "locked"), "0")
	a, b := g.mount(t, "lock"), g.mount(t, "lock")
	t.Run("fcntl", func(t *testing.T) {
		fa := openRW(t, filepath.Join(a, "locked"))
		fb := openRW(t, filepath.Join(b, "locked"))
		if err := setlk(fa, syscall.F_SETLK, syscall.F_WRLCK, 10, 20); err != nil {
			t.Fatalf("F_SETLK on the first mount: %v", err)
		}
		if err := setlk(fb, syscall.F_SETLK, syscall.F_RDLCK, 0, 0); !errors.Is(err, syscall.EAGAIN) {
			t.Fatalf("F_SETLK on the second mount while the first holds a write lock: %v, want EAGAIN", err)
		}
		grantedAfterRelease(t, fa, fb, time.Second, 3*time.Second, 30*time.Second)
	})
	t.Run("getlk", func(t *testing.T) { testGetlkNamesHolder(t, a, b, "locked") })
	t.Run("flock", func(t *testing.T) {
		fa := openRW(t, filepath.Join(a, "locked"))
		fb := openRW(t, filepath.Join(b, "locked"))
		if err := syscall.Flock(int(fa.Fd()), syscall.LOCK_EX); err != nil {
			t.Fatalf("flock LOCK_EX: %v", err)
		}
		if err := setlk(fb, syscall.F_SETLK, syscall.F_RDLCK, 100, 1); !errors.Is(err, syscall.EAGAIN) {
			t.Errorf("F_SETLK on the other mount under the flock: %v, want EAGAIN (flock is a whole-file lock)", err)
		}
		if err := syscall.Flock(int(fa.Fd()), syscall.LOCK_UN); err != nil {
			t.Fatalf("flock LOCK_UN: %v", err)
		}
		if err := syscall.Flock(int(fb.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
			t.Errorf("flock on the other mount after the release: %v", err)
		}
	})
	t.Run("counter", func(t *testing.T) { countTogether(t, a, b, filepath.Join(g.exportDir(), "locked"), 100) })
}

// TestGaneshaACL: Ganesha 4.3 as Debian builds it keeps no POSIX ACLs,
// and refuses every client's SETACL of a file (test/e2e/README.md, where
// the guest's TestGaneshaACLKernelAndRdmafs shows the kernel client does
// the same): getfacl of a file with an ACL on the server shows the mode,
// and setfacl fails with EIO; the mount still asks for ACLs afterwards
// (a refusal is not a server without NFSACL).
func TestGaneshaACL(t *testing.T) {
	if !inGanesha(t, ganesha.Config{}) {
		return
	}
	g := ganeshaExport{}
	write(t, filepath.Join(g.exportDir(), "has-acl"), "")
	facl(t, "setfacl", "-m", "u:65534:rw", filepath.Join(g.exportDir(), "has-acl"))
	mnt := g.mount(t)
	// The mode is 0664: the group bits are the ACL's mask.
	const minimal = "user::rw-\ngroup::rw-\nother::r--\n\n"
	if got := entries(t, filepath.Join(mnt, "has-acl")); got != minimal {
		t.Errorf("getfacl of a file with an ACL on the server: %q; want the mode's three entries, as through the kernel client", got)
	}
	write(t, filepath.Join(mnt, "f"), "")
	out, err := exec.Command("setfacl", "-m", "u:65534:rw", filepath.Join(mnt, "f")).CombinedOutput()
	if err == nil || !strings.Contains(string(out), "Input/output error") {
		t.Errorf("setfacl of a file: %v, %s; want EIO, as through the kernel client", err, out)
	}
	if _, err := unix.Getxattr(filepath.Join(mnt, "f"), "system.posix_acl_access", make([]byte, 64)); !errors.Is(err, syscall.ENODATA) {
		t.Errorf("getxattr of the ACL after the refused SETACL: %v, want ENODATA (the mount still speaks NFSACL)", err)
	}
}

// TestGaneshaStats: rdmafs stats of a mount of Ganesha, as mountstats and
// as JSON.
func TestGaneshaStats(t *testing.T) {
	if !inGanesha(t, ganesha.Config{}) {
		return
	}
	t.Run("mountstats", func(t *testing.T) {
		needMountstats(t)
		testStatsMountstats(t, ganeshaExport{})
	})
	t.Run("json", func(t *testing.T) { testStatsJSON(t, ganeshaExport{}) })
}

// TestGaneshaNFSv4Only: a server that offers NFS version 4 alone is named
// as such, not taken for one without a portmapper.
func TestGaneshaNFSv4Only(t *testing.T) {
	if !inGanesha(t, ganesha.Config{NFSv4Only: true}) {
		return
	}
	mnt := t.TempDir()
	code, out := rdmafs(t, time.Minute, ganesha.Source, mnt)
	if code != 32 || !strings.Contains(out, "offers NFS version 4 only") || strings.Contains(out, "mountport") {
		t.Errorf("mount of an NFSv4-only server: status %d, %q; want 32 and that it offers NFS version 4 only", code, out)
	}
	if entries, _ := os.ReadDir(mnt); len(entries) != 0 {
		t.Errorf("the mount point holds %d entries after the failed mount", len(entries))
	}
}
