package host

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/rdmafs/rdmafs/test/e2e/e2etest"
	"github.com/rdmafs/rdmafs/test/e2e/workload"
)

// FUSE over io_uring (Linux 6.14 and later, while the fuse module's
// enable_uring is Y): a mount with io_uring takes its requests through
// per-CPU io_uring queues, one with noio_uring (or where the kernel does
// not offer it) through /dev/fuse; both pass the workload, and the
// daemon, whose queues the kernel tears down at unmount, exits cleanly.

const enableURing = "/sys/module/fuse/parameters/enable_uring"

// setEnableURing sets the fuse module's enable_uring to on, and puts the
// value it had back when the test ends.
func setEnableURing(t *testing.T, on bool) {
	t.Helper()
	old, err := os.ReadFile(enableURing)
	if err != nil {
		t.Skipf("the kernel has no FUSE over io_uring: %v", err)
	}
	v := "N"
	if on {
		v = "Y"
	}
	if err := os.WriteFile(enableURing, []byte(v), 0); err != nil {
		t.Fatalf("setting %s: %v", enableURing, err)
	}
	t.Cleanup(func() {
		if err := os.WriteFile(enableURing, bytes.TrimSpace(old), 0); err != nil {
			t.Errorf("restoring %s: %v", enableURing, err)
		}
	})
}

// TestIOURing mounts with io_uring where the kernel offers it, with
// noio_uring, and with io_uring where it does not, and checks for each
// the channel that rdmafs stats reports, the workload, and a clean exit
// at unmount.
func TestIOURing(t *testing.T) {
	needHost(t)
	for _, c := range []struct {
		name    string
		offered bool
		opt     string
		want    string
	}{
		{"io_uring", true, "io_uring,io_uring_q_depth=3", "io_uring"},
		{"noio_uring", true, "noio_uring", "dev"},
		{"io_uring not offered", false, "io_uring", "dev"},
	} {
		t.Run(c.name, func(t *testing.T) {
			setEnableURing(t, c.offered)
			s := startServer(t, "", 0, "no_root_squash")
			mnt, daemon := mountForeground(t, s, c.opt)

			code, out := rdmafs(t, 10*time.Second, "stats", "-json", mnt)
			if code != 0 {
				t.Fatalf("rdmafs stats -json: exit %d: %s", code, out)
			}
			var j struct {
				Opts        string `json:"opts"`
				FUSEChannel string `json:"fuse_channel"`
			}
			if err := json.Unmarshal([]byte(out), &j); err != nil {
				t.Fatalf("rdmafs stats -json: %v: %s", err, out)
			}
			if j.FUSEChannel != c.want || !strings.Contains(j.Opts, "fuse_channel="+c.want) {
				t.Fatalf("rdmafs stats -json: fuse_channel %q, opts %q; want %q", j.FUSEChannel, j.Opts, c.want)
			}

			workload.Run(t, mnt, workload.DirChecker(s.dir))

			rings := countFDs(t, daemon.Process.Pid, "anon_inode:[io_uring]")
			if (c.want == "io_uring") != (rings > 0) {
				t.Errorf("the daemon has %d io_uring descriptors serving through %s", rings, c.want)
			}
			// A queue per possible CPU, as the kernel needs, of
			// io_uring_q_depth entries (one for a CPU not online),
			// each with its own ring.
			possible, online := countCPUs(t, "possible"), countCPUs(t, "online")
			if want := 3*online + possible - online; c.want == "io_uring" && rings != want {
				t.Errorf("the daemon has %d io_uring rings; want %d: 3 for each of %d CPUs online, 1 for each of the %d other possible ones",
					rings, want, online, possible-online)
			}
			// The ring entries' buffers are the daemon's own memory,
			// which the kernel copies to and from: nothing stays
			// pinned or locked.
			status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", daemon.Process.Pid))
			if err != nil {
				t.Fatal(err)
			}
			for _, field := range []string{"VmLck", "VmPin"} {
				m := regexp.MustCompile(field + `:\s+(\d+) kB`).FindSubmatch(status)
				if m == nil || string(m[1]) != "0" {
					t.Errorf("daemon's %s: %q; want 0 kB", field, m)
				}
			}

			// At unmount the kernel ends every ring entry; the daemon
			// must stop its queues and exit, as with /dev/fuse. It
			// waits for every worker thread of the queues (and unmaps
			// their buffers) before it exits: one that did not end
			// would keep it from exiting.
			e2etest.Unmount(t, mnt)
			done := make(chan error, 1)
			go func() { done <- daemon.Wait() }()
			select {
			case err := <-done:
				if err != nil {
					t.Errorf("daemon exited with %v after unmount: %s", err, daemon.Stderr)
				}
			case <-time.After(20 * time.Second):
				daemon.Process.Kill()
				<-done
				t.Errorf("daemon still running 20 s after unmount: %s", daemon.Stderr)
			}
		})
	}
}

// mountForeground mounts the server's export with rdmafs -f and the
// given options, and returns the mount point and the daemon.
func mountForeground(t *testing.T, s *server, opts ...string) (string, *exec.Cmd) {
	t.Helper()
	mnt := t.TempDir()
	all := append([]string{s.mountOpts()}, opts...)
	cmd := exec.Command(rdmafsBin, "-f", "-o", strings.Join(all, ","), "127.0.0.1:/", mnt)
	cmd.Stderr = new(bytes.Buffer)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		e2etest.Unmount(t, mnt)
		if cmd.ProcessState == nil {
			cmd.Process.Kill()
			cmd.Wait()
		}
	})
	for deadline := time.Now().Add(10 * time.Second); !e2etest.Mounted(mnt); time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("not mounted after 10 s: %s", cmd.Stderr)
		}
	}
	// The mount is in the table before INIT is answered: wait for the
	// root to answer.
	if _, err := os.Stat(mnt); err != nil {
		t.Fatal(err)
	}
	return mnt, cmd
}

// countFDs counts the descriptors of process pid that link to target.
func countFDs(t *testing.T, pid int, target string) int {
	t.Helper()
	dir := fmt.Sprintf("/proc/%d/fd", pid)
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, e := range ents {
		if l, err := os.Readlink(dir + "/" + e.Name()); err == nil && l == target {
			n++
		}
	}
	return n
}

// countCPUs is the number of CPUs in /sys/devices/system/cpu/<list>
// ("possible", "online").
func countCPUs(t *testing.T, list string) int {
	t.Helper()
	b, err := os.ReadFile("/sys/devices/system/cpu/" + list)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, r := range strings.Split(strings.TrimSpace(string(b)), ",") {
		var lo, hi int
		if k, _ := fmt.Sscanf(r, "%d-%d", &lo, &hi); k == 2 {
			n += hi - lo + 1
		} else {
			n++
		}
	}
	return n
}

// TestIOURingSignalledLockWaiter: the kernel sends an INTERRUPT on
// /dev/fuse even for a request that came through an io_uring queue, and
// it must reach that request: TestLockFUSESignalledWaiter, with the
// mounts (in the lock tests' namespace) serving through io_uring.
func TestIOURingSignalledLockWaiter(t *testing.T) {
	needHost(t)
	if os.Getenv(lockNetnsEnv) == "" {
		setEnableURing(t, true)
		t.Setenv(mountOptsEnv, "io_uring") // inherited by the namespace's run
	} else if b, err := os.ReadFile(enableURing); err != nil || strings.TrimSpace(string(b)) != "Y" {
		t.Fatalf("%s: %q, %v; want Y", enableURing, b, err)
	}
	TestLockFUSESignalledWaiter(t)
}

// TestIOURingChannelReportedAtOnce: `rdmafs stats` run the moment an
// `rdmafs -f` mount appears says io_uring. The queues answer requests as
// soon as they are registered, a stats request among them, and before
// the fix half of such mounts said "dev" (10 of 20 on this host).
func TestIOURingChannelReportedAtOnce(t *testing.T) {
	needHost(t)
	setEnableURing(t, true)
	s := startServer(t, "", 0, "no_root_squash")
	for i := range 10 {
		mnt := t.TempDir()
		cmd := exec.Command(rdmafsBin, "-f", "-o", s.mountOpts()+",io_uring", "127.0.0.1:/", mnt)
		cmd.Stderr = new(bytes.Buffer)
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		// The daemon may still be registering queue entries when the
		// mount goes: it then fails the mount (exit 32), which is not
		// what this test looks at.
		stop := func() {
			e2etest.Unmount(t, mnt)
			if cmd.ProcessState == nil {
				cmd.Process.Kill()
				cmd.Wait()
			}
		}
		t.Cleanup(stop)
		for deadline := time.Now().Add(10 * time.Second); !e2etest.Mounted(mnt); time.Sleep(time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("mount %d: not mounted after 10 s: %s", i, cmd.Stderr)
			}
		}
		got := e2etest.Stats(t, rdmafsBin, mnt).FUSEChannel
		stop()
		if got != "io_uring" {
			t.Fatalf("mount %d: fuse_channel %q right after mounting, want io_uring", i, got)
		}
	}
}
