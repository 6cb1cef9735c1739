package host

import (
	"bytes"
	"errors"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestInstallStaged: make install with DESTDIR and PREFIX, as a package
// build runs it, puts rdmafs and rdmafs(8) under the staging directory,
// warns when the program's directory is not one mount(8) looks for
// helpers in, and make uninstall removes both again. (The guest's
// TestInstallFstab installs for real and mounts through fstab.)
func TestInstallStaged(t *testing.T) {
	needHost(t)
	root, err := filepath.Abs("../../..")
	if err != nil {
		t.Fatal(err)
	}
	wantMan, err := os.ReadFile(filepath.Join(root, "docs/rdmafs.8"))
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		prefix string
		warn   bool
	}{
		{"/usr", false},
		{"/opt/rdmafs", true},
	} {
		t.Run(strings.TrimPrefix(c.prefix, "/"), func(t *testing.T) {
			stage := t.TempDir()
			makeTarget := func(target string) string {
				cmd := exec.Command("make", "-C", root, "--no-print-directory", target, "DESTDIR="+stage, "PREFIX="+c.prefix)
				var stderr bytes.Buffer
				cmd.Stderr = &stderr
				if err := cmd.Run(); err != nil {
					t.Fatalf("make %s: %v: %s", target, err, stderr.String())
				}
				return stderr.String()
			}
			stderr := makeTarget("install")
			bin := filepath.Join(stage, c.prefix, "sbin/rdmafs")
			man := filepath.Join(stage, c.prefix, "share/man/man8/rdmafs.8")
			if fi, err := os.Stat(bin); err != nil || fi.Mode().Perm() != 0o755 {
				t.Fatalf("installed program: %v, %v; want mode 0755", fi, err)
			}
			if out, _ := exec.Command(bin, "-h").CombinedOutput(); !strings.Contains(string(out), "Mount options") {
				t.Errorf("the installed rdmafs -h says %q", out)
			}
			if got, err := os.ReadFile(man); err != nil || !bytes.Equal(got, wantMan) {
				t.Errorf("installed man page: %v; want docs/rdmafs.8", err)
			}
			if warned := strings.Contains(stderr, "helper PATH"); warned != c.warn {
				t.Errorf("PREFIX=%s: warned %v, want %v; make said %q", c.prefix, warned, c.warn, stderr)
			}
			makeTarget("uninstall")
			for _, p := range []string{bin, man} {
				if _, err := os.Stat(p); !errors.Is(err, fs.ErrNotExist) {
					t.Errorf("%s after make uninstall: %v", p, err)
				}
			}
		})
	}
}
