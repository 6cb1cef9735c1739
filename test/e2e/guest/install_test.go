package guest

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/rdmafs/rdmafs/test/e2e/e2etest"
)

// The checkout's Makefile and man page: run-tests.sh sets LAB_ROOT.
func checkoutRoot(t *testing.T) string {
	t.Helper()
	root := os.Getenv("LAB_ROOT")
	if root == "" {
		t.Fatal("LAB_ROOT unset: run the tests with test/e2e/run-tests.sh")
	}
	for _, f := range []string{"Makefile", "docs/rdmafs.8"} {
		if _, err := os.Stat(filepath.Join(root, f)); err != nil {
			t.Fatalf("the checkout at LAB_ROOT lacks %s: %v", f, err)
		}
	}
	return root
}

// TestInstallFstab: `make install` puts rdmafs where mount(8) finds it,
// and an fstab line with _netdev, as an admin writes it, is mounted by
// mount -a and by mount MOUNTPOINT and unmounted by umount. Over TCP and
// over RDMA.
func TestInstallFstab(t *testing.T) {
	e := lab(t)
	bin := rdmafsBin(t, e)
	root := checkoutRoot(t)

	// The binary is built already (build.sh): -o build skips the build and
	// its Debian packages, and runs the install recipe as it is.
	const sbin, man = "/usr/local/sbin/rdmafs", "/usr/local/share/man/man8/rdmafs.8"
	for _, f := range []string{sbin, man} {
		if _, err := os.Lstat(f); err == nil {
			t.Fatalf("%s exists before make install", f)
		}
	}
	run(t, time.Minute, "make", "-C", root, "-o", "build", "install")
	t.Cleanup(func() { run(t, time.Minute, "make", "-C", root, "uninstall") })
	for installed, built := range map[string]string{sbin: bin, man: filepath.Join(root, "docs/rdmafs.8")} {
		a, err1 := os.ReadFile(installed)
		b, err2 := os.ReadFile(built)
		if err1 != nil || err2 != nil || !bytes.Equal(a, b) {
			t.Fatalf("make install: %s is not %s (%v, %v)", installed, built, err1, err2)
		}
	}

	protos := []string{"tcp", "rdma"}
	mnts := make(map[string]string)
	var fstab strings.Builder
	fstab.WriteString("# rdmafs e2e: TestInstallFstab\n")
	for _, proto := range protos {
		mnt := mountPoint(t, "fstab-"+proto)
		mnts[proto] = mnt
		fmt.Fprintf(&fstab, "%s:%s %s fuse.rdmafs proto=%s,vers=3,_netdev 0 0\n", e.Addr, e.Export, mnt, proto)
	}
	old, err := os.ReadFile("/etc/fstab")
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	if err := os.WriteFile("/etc/fstab", []byte(fstab.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		for _, mnt := range mnts {
			exec.Command("umount", mnt).Run()
		}
		if old == nil {
			os.Remove("/etc/fstab")
		} else {
			os.WriteFile("/etc/fstab", old, 0o644)
		}
	})
	t.Logf("/etc/fstab:\n%s", fstab.String())

	run(t, 2*time.Minute, "mount", "-a")
	for proto, mnt := range mnts {
		checkFstabMount(t, e, proto, mnt, "mount -a")
		run(t, time.Minute, "umount", mnt)
		if !e2etest.Unmounted(mnt, 30*time.Second) {
			t.Fatalf("%s is still mounted 30 s after umount", mnt)
		}
	}
	for proto, mnt := range mnts {
		run(t, 2*time.Minute, "mount", mnt)
		checkFstabMount(t, e, proto, mnt, "mount "+mnt)
		run(t, time.Minute, "umount", mnt)
		if !e2etest.Unmounted(mnt, 30*time.Second) {
			t.Fatalf("%s is still mounted 30 s after umount", mnt)
		}
	}
}

// checkFstabMount checks that mnt is an rdmafs mount of the export over
// proto, and that a file written through it reaches the server.
func checkFstabMount(t *testing.T, e labEnv, proto, mnt, how string) {
	t.Helper()
	fstype, source, ok := e2etest.MountInfo(mnt)
	if !ok || fstype != "fuse.rdmafs" || source != e.Addr+":"+e.Export {
		t.Fatalf("%s: %s is %q of %q (mounted %v), want fuse.rdmafs of %s:%s", how, mnt, fstype, source, ok, e.Addr, e.Export)
	}
	stats := run(t, 10*time.Second, "/usr/local/sbin/rdmafs", "stats", mnt)
	if !strings.Contains(stats, "\txprt:\t"+proto+" ") {
		t.Errorf("%s: rdmafs stats shows no %s transport:\n%s", how, proto, stats)
	}
	name := fmt.Sprintf("fstab-%s-%d", proto, time.Now().UnixNano())
	data := "written through an fstab mount over " + proto
	if err := os.WriteFile(filepath.Join(mnt, name), []byte(data), 0o644); err != nil {
		t.Fatalf("%s: write: %v", how, err)
	}
	got, err := os.ReadFile(filepath.Join(e.Export, name))
	if err != nil || string(got) != data {
		t.Fatalf("%s: the server has %q (%v), want %q", how, got, err, data)
	}
	os.Remove(filepath.Join(e.Export, name))
}
