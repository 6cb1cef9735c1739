package host

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/rdmafs/rdmafs/test/e2e/e2etest"
)

// Listing a directory that never ends, from a hostile server, runs in
// bounded memory (README, "Memory"): rdmafs streams the entries to the
// kernel a page at a time, remembers the cookies of the last few thousand
// only, and makes inodes of READDIRPLUS entries only while the mount holds
// fewer than a bounded number of files.

// endlessRSSBound is the most the rdmafs process may hold while listing
// the endless directory: the bound README gives for listings and the
// inodes they make, with the runtime's own memory on top.
const endlessRSSBound = 96 << 20

// vmKB returns the field (VmRSS, VmHWM) of /proc/PID/status in bytes.
func vmKB(t *testing.T, pid int, field string) int64 {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Fatalf("status of rdmafs (pid %d): %v", pid, err)
	}
	for line := range strings.SplitSeq(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, field+":"); ok {
			kb, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
			return kb << 10
		}
	}
	t.Fatalf("no %s in /proc/%d/status", field, pid)
	return 0
}

func TestReaddirEndlessDirectoryBoundedMemory(t *testing.T) {
	needHost(t)
	for _, c := range []struct {
		kind endlessKind
		opt  string
	}{
		{newFiles, "rdirplus"},
		{newFiles, "nordirplus"},
		// READDIRPLUS of many names of one file: one inode, and a name
		// for it in the kernel and in go-fuse per entry.
		{oneFile, "rdirplus"},
		// One name for every new file: each replaces the last.
		{oneName, "rdirplus"},
	} {
		opt := c.opt
		t.Run(strings.ReplaceAll(c.kind.String(), " ", "_")+"/"+opt, func(t *testing.T) {
			s := startEndlessDirServer(t, c.kind)
			mnt := t.TempDir()
			opts := fmt.Sprintf("port=%d,mountport=%d,soft,timeo=50,%s", s.port(), s.port(), opt)
			if out, err := exec.Command(rdmafsBin, "-o", opts, "127.0.0.1:/", mnt).CombinedOutput(); err != nil {
				t.Fatalf("mount: %v: %s", err, out)
			}
			t.Cleanup(func() { e2etest.Unmount(t, mnt) })
			pid := daemonOf(t, mnt)
			before := vmKB(t, pid, "VmRSS")

			// Two listings, one after the other: what the first leaves
			// (the inodes the kernel keeps) does not let the second grow
			// the client further.
			const listFor = 10 * time.Second
			var names int
			var peak int64
			for pass := range 2 {
				n, p := listEndless(t, mnt, pid, listFor)
				names += n
				peak = max(peak, p)
				t.Logf("%s, listing %d: %d names in %v, rdmafs RSS peak %d MiB", opt, pass+1, n, listFor, p>>20)
				if n < 10000 {
					t.Fatalf("only %d names of the endless directory in %v: the listing did not go on", n, listFor)
				}
			}
			hwm := vmKB(t, pid, "VmHWM")
			t.Logf("%s: %d names (server sent %d entries); rdmafs RSS %d MiB before, peak %d MiB (VmHWM %d MiB)",
				opt, names, s.entries.Load(), before>>20, peak>>20, hwm>>20)
			if hwm > endlessRSSBound {
				t.Errorf("rdmafs grew to %d MiB (VmHWM) listing an endless directory twice for %v; want at most %d MiB", hwm>>20, listFor, endlessRSSBound>>20)
			}
			// Closed, the listings hold nothing more; the inodes the
			// kernel keeps stay within the bound.
			time.Sleep(2 * time.Second)
			after := vmKB(t, pid, "VmRSS")
			t.Logf("rdmafs RSS after the directory was closed: %d MiB", after>>20)
			if after > endlessRSSBound {
				t.Errorf("rdmafs holds %d MiB after the endless directory was closed; want at most %d MiB", after>>20, endlessRSSBound>>20)
			}
		})
	}
}

// listEndless reads the directory for d, discarding the names, and returns
// how many it read and the highest RSS of rdmafs (pid) it saw meanwhile.
func listEndless(t *testing.T, mnt string, pid int, d time.Duration) (names int, peak int64) {
	t.Helper()
	dir, err := os.Open(mnt)
	if err != nil {
		t.Fatal(err)
	}
	defer dir.Close()
	buf := make([]byte, 64<<10)
	marker := []byte(strings.Repeat("n", endlessNameLen-20)) // each name's
	start := time.Now()
	lastLook := start
	for time.Since(start) < d {
		n, err := syscall.ReadDirent(int(dir.Fd()), buf)
		if err != nil {
			t.Fatalf("reading the endless directory after %d names: %v", names, err)
		}
		if n == 0 {
			t.Fatalf("the endless directory ended after %d names", names)
		}
		names += bytes.Count(buf[:n], marker)
		if time.Since(lastLook) > 200*time.Millisecond {
			lastLook = time.Now()
			peak = max(peak, vmKB(t, pid, "VmRSS"))
		}
	}
	return names, max(peak, vmKB(t, pid, "VmRSS"))
}
