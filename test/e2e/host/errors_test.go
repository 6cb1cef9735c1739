package host

import (
	"errors"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/rdmafs/rdmafs/test/e2e/e2etest"
	"github.com/rdmafs/rdmafs/test/netns"
)

// TestBadOptions: every bad option is one clear line naming it, exit
// status 2, and nothing mounted.
func TestBadOptions(t *testing.T) {
	needHost(t)
	mnt := t.TempDir()
	for _, c := range []struct{ opts, want string }{
		{"rsize=abc", "rsize=abc"},
		{"vers=4", "only NFS version 3"},
		{"frobnicate", `unknown option "frobnicate"`},
		{"timeo=0", "timeo=0"},
		{"proto=udp", "proto=udp"},
		{"soft=1", "soft=1"},
		{"acregmin=100,acregmax=10", "acregmin"},
	} {
		code, out := rdmafs(t, 10*time.Second, "-o", c.opts, "127.0.0.1:/", mnt)
		lines := strings.Split(strings.TrimSpace(out), "\n")
		if code != 2 || len(lines) != 1 || !strings.Contains(out, c.want) {
			t.Errorf("-o %s: exit %d, output %q; want exit 2 and one line naming %q", c.opts, code, out, c.want)
		}
		if e2etest.Mounted(mnt) {
			t.Fatalf("-o %s left %s mounted", c.opts, mnt)
		}
	}
	if code, out := rdmafs(t, 10*time.Second, "127.0.0.1/nocolon", mnt); code != 2 || !strings.Contains(out, "SERVER:/EXPORT") {
		t.Errorf("bad source: exit %d: %s", code, out)
	}
	if code, out := rdmafs(t, 10*time.Second, "-h"); code != 0 || !strings.Contains(out, "slot_table_entries") || !strings.Contains(out, "acregmin") {
		t.Errorf("-h: exit %d, does not document every option:\n%s", code, out)
	}
}

// TestBadServer: an unreachable server, a missing export and a bad mount
// point each give one clear error, a non-zero exit and no mount.
func TestBadServer(t *testing.T) {
	needHost(t)
	s := startServer(t, "", 0)
	// A port nothing listens on.
	l, _ := net.Listen("tcp", "127.0.0.1:0")
	dead := l.Addr().(*net.TCPAddr).Port
	l.Close()

	notEmpty := t.TempDir()
	os.WriteFile(filepath.Join(notEmpty, "x"), nil, 0o644)
	file := filepath.Join(t.TempDir(), "file")
	os.WriteFile(file, nil, 0o644)

	for _, c := range []struct {
		name, source, opts, mnt, want string
	}{
		{"unreachable", "127.0.0.1:/", "port=1,mountport=" + itoa(dead), "", "connection refused"},
		{"missing export", "127.0.0.1:/nope", s.mountOpts(), "", "no such export"},
		{"mount point not empty", "127.0.0.1:/", s.mountOpts(), notEmpty, "not empty"},
		{"mount point a file", "127.0.0.1:/", s.mountOpts(), file, "not a directory"},
		{"mount point missing", "127.0.0.1:/", s.mountOpts(), "/nonexistent/mnt", "no such file or directory"},
	} {
		mnt := c.mnt
		if mnt == "" {
			mnt = t.TempDir()
		}
		start := time.Now()
		code, out := rdmafs(t, time.Minute, "-o", c.opts, c.source, mnt)
		if code == 0 || !strings.Contains(out, c.want) || strings.Count(strings.TrimSpace(out), "\n") > 0 {
			t.Errorf("%s: exit %d, output %q; want a non-zero exit and one line with %q", c.name, code, out, c.want)
		}
		if e2etest.Mounted(mnt) {
			t.Errorf("%s: left %s mounted", c.name, mnt)
			e2etest.Unmount(t, mnt)
		}
		t.Logf("%s: exit %d after %v: %s", c.name, code, time.Since(start).Round(time.Millisecond), strings.TrimSpace(out))
	}
}

func itoa(n int) string { return strconv.Itoa(n) }

// TestMountNoPortmapper: without mountport=, a server whose portmapper
// does not answer (here, in a network namespace where nothing listens)
// gets the hint that names mountport=; one with a portmapper that lists
// no mountd is taken for an NFSv4-only server only when its NFS port says
// so (TestGaneshaNFSv4Only).
func TestMountNoPortmapper(t *testing.T) {
	needHost(t)
	netns.Need(t)
	mnt := t.TempDir()
	out, err := exec.Command("unshare", "-n", "sh", "-c", `ip link set lo up && exec "$0" 127.0.0.1:/ "$1"`, rdmafsBin, mnt).CombinedOutput()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 32 || !strings.Contains(string(out), "give mountport=N if the server has no portmapper") {
		t.Errorf("mount of a server without a portmapper: %v, %q; want status 32 and the mountport hint", err, out)
	}
}
