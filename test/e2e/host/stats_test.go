package host

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// mountstatsScript is nfs-utils' mountstats (Debian package nfs-common,
// which make deps installs): the tool an NFS admin reads
// /proc/self/mountstats with.
const mountstatsScript = "/usr/sbin/mountstats"

// needMountstats fails the test (it does not skip: make test installs the
// package) when nfs-common's mountstats is missing.
func needMountstats(t *testing.T) {
	t.Helper()
	if _, err := os.Stat(mountstatsScript); err != nil {
		t.Fatalf("%s is missing: install nfs-common (make deps does): %v", mountstatsScript, err)
	}
}

// statsFile writes the output of `rdmafs stats MNT` to a file and returns
// its name, as an admin would before running mountstats -f on it.
func statsFile(t *testing.T, mnt, name string) string {
	t.Helper()
	code, out := rdmafs(t, 10*time.Second, "stats", mnt)
	if code != 0 {
		t.Fatalf("rdmafs stats %s: exit %d: %s", mnt, code, out)
	}
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, []byte(out), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// mountstats runs nfs-utils' mountstats and fails the test if it fails or
// prints a Python traceback.
func mountstats(t *testing.T, args ...string) string {
	t.Helper()
	out, err := exec.Command(mountstatsScript, args...).CombinedOutput()
	if err != nil || bytes.Contains(out, []byte("Traceback")) {
		t.Fatalf("mountstats %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return string(out)
}

// writeDirect writes n bytes (a multiple of 4096) to path with O_DIRECT.
func writeDirect(t *testing.T, path string, n int) {
	t.Helper()
	buf, err := unix.Mmap(-1, 0, n, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_ANON|unix.MAP_PRIVATE)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Munmap(buf)
	fd, err := unix.Open(path, unix.O_WRONLY|unix.O_CREAT|unix.O_DIRECT, 0o644)
	if err != nil {
		t.Fatalf("open %s O_DIRECT: %v", path, err)
	}
	defer unix.Close(fd)
	if w, err := unix.Write(fd, buf); err != nil || w != n {
		t.Fatalf("O_DIRECT write: %d, %v", w, err)
	}
}

// wantLine fails unless out has a line matching the regular expression.
func wantLine(t *testing.T, what, out, re string) {
	t.Helper()
	if !regexp.MustCompile(`(?m)` + re).MatchString(out) {
		t.Errorf("%s: no line matching %q in:\n%s", what, re, out)
	}
}

// TestStatsMountstats: nfs-utils' mountstats reads `rdmafs stats` as it
// reads /proc/self/mountstats, in each of its forms, and prints the bytes
// the test moved through the mount.
func TestStatsMountstats(t *testing.T) {
	needHost(t)
	needMountstats(t)
	testStatsMountstats(t, startServer(t, "", 0, "no_root_squash")) // the test writes as root
}

// testStatsMountstats is TestStatsMountstats on export e.
func testStatsMountstats(t *testing.T, e export) {
	const served = 300_000 // read through the mount
	if err := os.WriteFile(filepath.Join(e.exportDir(), "served"), bytes.Repeat([]byte("r"), served), 0o644); err != nil {
		t.Fatal(err)
	}
	mnt := e.mount(t)
	source := regexp.QuoteMeta(e.source())
	const before, buffered, direct = 5_000, 3<<20 + 5, 1 << 20
	write(t, filepath.Join(mnt, "before"), strings.Repeat("b", before))
	old := statsFile(t, mnt, "old")

	write(t, filepath.Join(mnt, "buffered"), strings.Repeat("w", buffered))
	writeDirect(t, filepath.Join(mnt, "direct"), direct)
	if got := read(t, filepath.Join(mnt, "served")); len(got) != served {
		t.Fatalf("read %d bytes of served, want %d", len(got), served)
	}
	cur := statsFile(t, mnt, "cur")

	out := mountstats(t, "-f", cur)
	wantLine(t, "mountstats -f", out, `^Stats for `+source+` mounted on `+regexp.QuoteMeta(mnt)+`:$`)
	wantLine(t, "mountstats -f", out, `NFS server capabilities: caps=0x7,wtmult=0,dtsize=\d+,bsize=0,namlen=255$`)
	wantLine(t, "mountstats -f", out, fmt.Sprintf(`applications wrote %d bytes via write\(2\)$`, before+buffered))
	wantLine(t, "mountstats -f", out, fmt.Sprintf(`applications wrote %d bytes via O_DIRECT write\(2\)$`, direct))
	wantLine(t, "mountstats -f", out, fmt.Sprintf(`applications read %d bytes via read\(2\)$`, served))
	wantLine(t, "mountstats -f", out, fmt.Sprintf(`client read %d bytes via NFS READ$`, served))
	wantLine(t, "mountstats -f", out, fmt.Sprintf(`client wrote %d bytes via NFS WRITE$`, before+buffered+direct))
	wantLine(t, "mountstats -f", out, `^WRITE:$`)

	// -S: only what happened between the two snapshots.
	out = mountstats(t, "-S", old, "-f", cur)
	wantLine(t, "mountstats -S", out, fmt.Sprintf(`applications wrote %d bytes via write\(2\)$`, buffered))
	wantLine(t, "mountstats -S", out, fmt.Sprintf(`client wrote %d bytes via NFS WRITE$`, buffered+direct))

	out = mountstats(t, "-n", "-f", cur)
	// buffered, direct and served: three opens of files, one directory
	// open at most (the kernel may have listed none).
	wantLine(t, "mountstats -n", out, `VFS called nfs_file_open\(\) [3-9] times$`)
	wantLine(t, "mountstats -n", out, `VFS called nfs_lookup\(\) [1-9]\d* times$`)
	wantLine(t, "mountstats -n", out, `VFS called nfs_file_release\(\) [3-9] times$`)

	out = mountstats(t, "iostat", "-f", cur)
	wantLine(t, "mountstats iostat", out, `^`+source+` mounted on `+regexp.QuoteMeta(mnt)+`:$`)
	wantLine(t, "mountstats iostat", out, `^write:\s+ops/s\s+kB/s`)
	out = mountstats(t, "iostat", "-S", old, "-f", cur)
	wantLine(t, "mountstats iostat -S", out, `^read:\s+ops/s`)

	out = mountstats(t, "-R", "-f", cur)
	wantLine(t, "mountstats -R", out, `^\tcaps:\tcaps=0x7,`)
	wantLine(t, "mountstats -R", out, `^\tsec:\tflavor=1,`) // mountstats keeps pseudoflavor for flavor 6 only
	out = mountstats(t, "-x", "-f", cur)
	wantLine(t, "mountstats -x", out, `Transport protocol: tcp$`)
	out = mountstats(t, "-r", "-f", cur)
	wantLine(t, "mountstats -r", out, `RPC requests sent`)
	out = mountstats(t, "nfsstat", "-f", cur)
	wantLine(t, "mountstats nfsstat", out, `^Client nfs v3$`)
}

// TestStatsJSON: rdmafs stats -json gives every counter by name, as a
// monitoring system reads it.
func TestStatsJSON(t *testing.T) {
	needHost(t)
	testStatsJSON(t, startServer(t, "", 0, "no_root_squash")) // the test writes as root
}

// testStatsJSON is TestStatsJSON on export e.
func testStatsJSON(t *testing.T, e export) {
	mnt := e.mount(t)
	const n = 70_000
	write(t, filepath.Join(mnt, "f"), strings.Repeat("j", n))
	code, out := rdmafs(t, 10*time.Second, "stats", "-json", mnt)
	if code != 0 {
		t.Fatalf("rdmafs stats -json: exit %d: %s", code, out)
	}
	var j struct {
		Mountpoint string                       `json:"mountpoint"`
		Events     map[string]uint64            `json:"events"`
		Bytes      map[string]uint64            `json:"bytes"`
		Xprt       []struct{ Proto string }     `json:"xprt"`
		Ops        map[string]map[string]uint64 `json:"ops"`
	}
	if err := json.Unmarshal([]byte(out), &j); err != nil {
		t.Fatalf("rdmafs stats -json: %v:\n%s", err, out)
	}
	if j.Mountpoint != mnt || j.Bytes["normalwritebytes"] != n || j.Bytes["serverwritebytes"] != n ||
		j.Events["vfsopen"] == 0 || len(j.Xprt) != 1 || j.Xprt[0].Proto != "tcp" ||
		j.Ops["WRITE"]["ops"] == 0 || j.Ops["CREATE"]["ops"] != 1 {
		t.Errorf("rdmafs stats -json after writing %d bytes to one new file:\n%s", n, out)
	}
	if len(j.Events) != 27 || len(j.Bytes) != 8 || len(j.Ops) != 22 {
		t.Errorf("%d events, %d bytes counters, %d procedures: want 27, 8 and 22", len(j.Events), len(j.Bytes), len(j.Ops))
	}
}

// TestStatsInterval: rdmafs stats -i 1 2 prints two reports, the second
// with the rate of what was written between them.
func TestStatsInterval(t *testing.T) {
	needHost(t)
	s := startServer(t, "", 0, "no_root_squash") // the test writes as root
	mnt := s.mount(t)
	cmd := exec.Command(rdmafsBin, "stats", "-i", "1", "2", mnt)
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var lines []string
	sc := bufio.NewScanner(stdout)
	// The first report ends with the values of write:.
	for sc.Scan() {
		lines = append(lines, sc.Text())
		if len(lines) >= 2 && strings.HasPrefix(lines[len(lines)-2], "write:") {
			break
		}
	}
	const n = 4 << 20
	write(t, filepath.Join(mnt, "f"), strings.Repeat("i", n))
	for sc.Scan() {
		lines = append(lines, sc.Text())
	}
	if err := cmd.Wait(); err != nil {
		t.Fatalf("rdmafs stats -i 1 2: %v\n%s", err, strings.Join(lines, "\n"))
	}
	out := strings.Join(lines, "\n")
	if c := strings.Count(out, " mounted on "+mnt+":"); c != 2 {
		t.Fatalf("%d reports, want 2:\n%s", c, out)
	}
	// The second report's write line: ops/s, kB/s, ... The interval is
	// about a second, so 4 MiB written make at least 2000 kB/s.
	var vals []string
	for i, l := range lines {
		if strings.HasPrefix(l, "write:") && i+1 < len(lines) {
			vals = strings.Fields(lines[i+1])
		}
	}
	if len(vals) < 2 {
		t.Fatalf("no write rates:\n%s", out)
	}
	kbs, err := strconv.ParseFloat(vals[1], 64)
	if err != nil || kbs < 2000 || kbs > 8192 {
		t.Errorf("write kB/s in the second interval %q, want 2000 to 8192 after writing 4 MiB:\n%s", vals[1], out)
	}
}
