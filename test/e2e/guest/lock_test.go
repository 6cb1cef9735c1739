package guest

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/rdmafs/rdmafs/test/e2e/e2etest"
)

// Locks between rdmafs and the kernel's NFS client, both against knfsd's
// lockd. knfsd's lockd is registered with this guest's rpcbind as NLM
// version 4, so the server's GRANTED calls go to the kernel, never to
// rdmafs: rdmafs polls a blocked lock (first after 100 ms, then at most
// every second), and a waiter must get the lock within a few seconds of
// its release.

// lockHelperEnv, when set, makes the test binary a helper process (see
// TestLockHelperProcess): "wait PATH" takes a write lock with F_SETLKW and
// holds it; "count PATH N" adds one to the number in PATH N times, each
// under a write lock.
const lockHelperEnv = "RDMAFS_LOCK_HELPER"

// grantWithin is how long a blocked rdmafs F_SETLKW may take after the
// release: rdmafs's poll (at most a second) and the calls.
const grantWithin = 5 * time.Second

// lockLab is lab for a test of locks against knfsd's lockd. knfsd grants
// no new lock in its grace period, the 90 s after it starts, which is
// when the guest boots: the first lock test to run waits it out here,
// once, instead of in its first lock call (the kernel client retries
// a lock denied for the grace period until it ends).
func lockLab(t *testing.T) labEnv {
	t.Helper()
	e := lab(t)
	graceOver.Do(func() {
		// A subtest, so that its kernel mount is gone when it ends.
		t.Run("knfsd grace period", func(t *testing.T) {
			name := lockFile(t, e, "lock-grace", "data")
			f := openLocked(t, mountKernel(t, e, "tcp"), name)
			start := time.Now()
			done := make(chan error, 1)
			go func() { done <- fcntlLock(f, syscall.F_SETLK, syscall.F_WRLCK, 0, 0) }()
			select {
			case err := <-done:
				if err != nil {
					t.Fatalf("kernel client F_SETLK of a file nobody locks: %v", err)
				}
			case <-time.After(150 * time.Second):
				t.Fatal("kernel client F_SETLK of a file nobody locks: still waiting after 150 s (knfsd's grace period is 90 s)")
			}
			t.Logf("knfsd's lockd grants locks (waited %v for its grace period to end)", time.Since(start).Round(time.Millisecond))
			fcntlLock(f, syscall.F_SETLK, syscall.F_UNLCK, 0, 0)
		})
	})
	return e
}

var graceOver sync.Once

func lockFile(t *testing.T, e labEnv, name, content string) string {
	t.Helper()
	p := filepath.Join(e.Export, name)
	if err := os.WriteFile(p, []byte(content), 0o666); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.Remove(p) })
	return name
}

func openLocked(t *testing.T, dir, name string) *os.File {
	t.Helper()
	f, err := os.OpenFile(filepath.Join(dir, name), os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	return f
}

func fcntlLock(f *os.File, cmd int, typ int16, start, n int64) error {
	lk := syscall.Flock_t{Type: typ, Start: start, Len: n}
	return syscall.FcntlFlock(f.Fd(), cmd, &lk)
}

func denied(err error) bool { return errors.Is(err, syscall.EAGAIN) || errors.Is(err, syscall.EACCES) }

// contend checks, for a holder on one mount and a contender on the other:
// F_SETLK fails with EAGAIN, F_GETLK reports the holder's range and type,
// F_SETLKW blocks until the release and gets the lock within within.
func contend(t *testing.T, holder, contender *os.File, within time.Duration) {
	t.Helper()
	if err := fcntlLock(holder, syscall.F_SETLK, syscall.F_WRLCK, 100, 50); err != nil {
		t.Fatalf("holder F_SETLK: %v", err)
	}
	if err := fcntlLock(contender, syscall.F_SETLK, syscall.F_WRLCK, 0, 0); !denied(err) {
		t.Fatalf("contender F_SETLK while the holder holds a write lock: %v, want EAGAIN", err)
	}
	lk := syscall.Flock_t{Type: syscall.F_RDLCK}
	if err := syscall.FcntlFlock(contender.Fd(), syscall.F_GETLK, &lk); err != nil {
		t.Fatalf("contender F_GETLK: %v", err)
	}
	if lk.Type != syscall.F_WRLCK || lk.Start != 100 || lk.Len != 50 {
		t.Errorf("contender F_GETLK = type %d at %d, %d bytes; want the write lock (type %d) at 100, 50 bytes",
			lk.Type, lk.Start, lk.Len, syscall.F_WRLCK)
	}
	done := make(chan error, 1)
	go func() { done <- fcntlLock(contender, syscall.F_SETLKW, syscall.F_WRLCK, 0, 0) }()
	select {
	case err := <-done:
		t.Fatalf("contender F_SETLKW returned (%v) while the holder held the lock", err)
	case <-time.After(2 * time.Second):
	}
	released := time.Now()
	if err := fcntlLock(holder, syscall.F_SETLK, syscall.F_UNLCK, 0, 0); err != nil {
		t.Fatalf("holder unlock: %v", err)
	}
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("contender F_SETLKW: %v", err)
		}
		t.Logf("F_SETLKW granted %v after the release", time.Since(released).Round(time.Millisecond))
	case <-time.After(within):
		t.Fatalf("contender F_SETLKW still blocked %v after the release", within)
	}
	if err := fcntlLock(contender, syscall.F_SETLK, syscall.F_UNLCK, 0, 0); err != nil {
		t.Fatalf("contender unlock: %v", err)
	}
}

// TestLockFcntlKernelAndRdmafs: fcntl locks of the kernel client and of
// rdmafs exclude each other, both ways.
func TestLockFcntlKernelAndRdmafs(t *testing.T) {
	e := lockLab(t)
	name := lockFile(t, e, "lock-fcntl", "data")
	knfs := mountKernel(t, e, "tcp")
	rfs := mountRdmafs(t, e, "lock")
	k, r := openLocked(t, knfs, name), openLocked(t, rfs, name)
	t.Run("kernel holds", func(t *testing.T) { contend(t, k, r, grantWithin) })
	// The kernel's waiter is woken by knfsd's GRANTED callback.
	t.Run("rdmafs holds", func(t *testing.T) { contend(t, r, k, grantWithin) })
}

// TestLockFlockKernelAndRdmafs: flock(2) locks of the kernel client and
// of rdmafs exclude each other (both send them as whole-file NLM locks).
func TestLockFlockKernelAndRdmafs(t *testing.T) {
	e := lockLab(t)
	name := lockFile(t, e, "lock-flock", "data")
	knfs := mountKernel(t, e, "tcp")
	rfs := mountRdmafs(t, e, "lock")
	for _, c := range []struct {
		who              string
		holder, excluded *os.File
	}{
		{"kernel holds", openLocked(t, knfs, name), openLocked(t, rfs, name)},
		{"rdmafs holds", openLocked(t, rfs, name), openLocked(t, knfs, name)},
	} {
		flockContend(t, c.who, c.holder, c.excluded)
	}
}

// flockContend checks, for a holder on one mount and another client on
// the other: while the holder has flock LOCK_EX, the other's LOCK_EX|
// LOCK_NB fails with EWOULDBLOCK; after LOCK_UN it succeeds.
func flockContend(t *testing.T, who string, holder, excluded *os.File) {
	t.Helper()
	if err := syscall.Flock(int(holder.Fd()), syscall.LOCK_EX); err != nil {
		t.Fatalf("%s: flock LOCK_EX: %v", who, err)
	}
	if err := syscall.Flock(int(excluded.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); !errors.Is(err, syscall.EWOULDBLOCK) {
		t.Errorf("%s: the other's flock LOCK_EX|LOCK_NB: %v, want EWOULDBLOCK", who, err)
	}
	if err := syscall.Flock(int(holder.Fd()), syscall.LOCK_UN); err != nil {
		t.Fatalf("%s: flock LOCK_UN: %v", who, err)
	}
	if err := syscall.Flock(int(excluded.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		t.Errorf("%s: the other's flock after the release: %v", who, err)
	}
	syscall.Flock(int(excluded.Fd()), syscall.LOCK_UN)
}

// helper starts the test binary as a lock helper process.
func helper(t *testing.T, args ...string) *exec.Cmd {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^TestLockHelperProcess$")
	cmd.Env = append(os.Environ(), lockHelperEnv+"="+strings.Join(args, " "))
	return cmd
}

// TestLockKilledWaiterLeavesNoLock: an rdmafs F_SETLKW blocked behind the
// kernel client's lock, whose process is killed, leaves no lock behind
// (rdmafs sends CANCEL): once the kernel client lets go, it can lock again.
func TestLockKilledWaiterLeavesNoLock(t *testing.T) {
	e := lockLab(t)
	name := lockFile(t, e, "lock-killed", "data")
	knfs := mountKernel(t, e, "tcp")
	rfs := mountRdmafs(t, e, "lock")
	k := openLocked(t, knfs, name)
	if err := fcntlLock(k, syscall.F_SETLK, syscall.F_WRLCK, 0, 0); err != nil {
		t.Fatalf("kernel client F_SETLK: %v", err)
	}
	cmd := helper(t, "wait", filepath.Join(rfs, name))
	out := new(e2etest.Output)
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	time.Sleep(2 * time.Second) // blocked in F_SETLKW, polling
	cmd.Process.Signal(syscall.SIGTERM)
	// A FUSE request that reached rdmafs holds its caller, even a killed
	// one, until rdmafs answers it.
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	var err error
	select {
	case err = <-exited:
	case <-time.After(10 * time.Second):
		cmd.Process.Kill()
		t.Fatal("the waiter still there 10 s after SIGTERM: rdmafs did not answer its interrupted lock request")
	}
	if ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus); !ok || !ws.Signaled() {
		t.Fatalf("the waiter ended with %v, not by its signal; output:\n%s", err, out)
	}
	if err := fcntlLock(k, syscall.F_SETLK, syscall.F_UNLCK, 0, 0); err != nil {
		t.Fatalf("kernel client unlock: %v", err)
	}
	// Were the cancelled lock granted and left, it would show now, and
	// stay: look for a while.
	for deadline := time.Now().Add(3 * time.Second); time.Now().Before(deadline); time.Sleep(500 * time.Millisecond) {
		if err := fcntlLock(k, syscall.F_SETLK, syscall.F_WRLCK, 0, 0); err != nil {
			t.Fatalf("kernel client F_SETLK after the killed waiter: %v: the waiter's lock was left behind", err)
		}
		fcntlLock(k, syscall.F_SETLK, syscall.F_UNLCK, 0, 0)
	}
}

// TestLockCounterTwoMounts: two processes, each on a mount of its own, add
// one to a counter in a file 500 times each under fcntl write locks: the
// total is exactly 1000, for rdmafs with rdmafs and rdmafs with the kernel
// client.
func TestLockCounterTwoMounts(t *testing.T) {
	e := lockLab(t)
	for _, pair := range []string{"rdmafs+rdmafs", "rdmafs+kernel"} {
		t.Run(pair, func(t *testing.T) {
			name := lockFile(t, e, "lock-counter-"+strings.ReplaceAll(pair, "+", "-"), "0")
			first := mountRdmafs(t, e, "lock")
			var second string
			if pair == "rdmafs+rdmafs" {
				second = mountRdmafs(t, e, "lock")
			} else {
				second = mountKernel(t, e, "tcp")
			}
			start := time.Now()
			var cmds []*exec.Cmd
			for _, dir := range []string{first, second} {
				cmds = append(cmds, helper(t, "count", filepath.Join(dir, name), "500"))
			}
			runTogether(t, 15*time.Minute, cmds...)
			b, err := os.ReadFile(filepath.Join(e.Export, name))
			if err != nil {
				t.Fatal(err)
			}
			if got := strings.TrimSpace(string(b)); got != "1000" {
				t.Errorf("counter = %s after 2 × 500 locked increments, want 1000", got)
			}
			t.Logf("%s: 1000 locked increments in %v", pair, time.Since(start).Round(time.Millisecond))
		})
	}
}

// TestLockHelperProcess is not a test: it is the helper process of the
// tests above, run with lockHelperEnv set.
func TestLockHelperProcess(t *testing.T) {
	args := strings.Fields(os.Getenv(lockHelperEnv))
	if len(args) == 0 {
		t.Skip("the lock tests' helper process (" + lockHelperEnv + " unset)")
	}
	if err := lockHelper(args); err != nil {
		t.Fatal(err)
	}
}

func lockHelper(args []string) error {
	f, err := os.OpenFile(args[1], os.O_RDWR, 0)
	if err != nil {
		return err
	}
	defer f.Close()
	switch args[0] {
	case "wait":
		if err := fcntlLock(f, syscall.F_SETLKW, syscall.F_WRLCK, 0, 0); err != nil {
			return fmt.Errorf("F_SETLKW: %w", err)
		}
		time.Sleep(time.Hour)
	case "count":
		n, _ := strconv.Atoi(args[2])
		buf := make([]byte, 32)
		for i := range n {
			if err := fcntlLock(f, syscall.F_SETLKW, syscall.F_WRLCK, 0, 0); err != nil {
				return fmt.Errorf("increment %d: F_SETLKW: %w", i, err)
			}
			m, err := f.ReadAt(buf, 0)
			if err != nil && m == 0 {
				return fmt.Errorf("increment %d: read: %w", i, err)
			}
			v, err := strconv.Atoi(strings.TrimSpace(string(buf[:m])))
			if err != nil {
				return fmt.Errorf("increment %d: counter %q: %w", i, buf[:m], err)
			}
			s := strconv.Itoa(v + 1)
			if _, err := f.WriteAt([]byte(s), 0); err != nil {
				return fmt.Errorf("increment %d: write: %w", i, err)
			}
			if err := f.Truncate(int64(len(s))); err != nil {
				return fmt.Errorf("increment %d: truncate: %w", i, err)
			}
			if err := fcntlLock(f, syscall.F_SETLK, syscall.F_UNLCK, 0, 0); err != nil {
				return fmt.Errorf("increment %d: unlock: %w", i, err)
			}
		}
	default:
		return fmt.Errorf("unknown helper %q", args[0])
	}
	return nil
}

// TestLockGetlkWriteOverReadLock: where a third client (a second rdmafs
// mount) holds a read lock, F_GETLK of a write lock over it gives rdmafs
// the answer it gives the kernel client (the oracle). Debian 12's knfsd
// answers that no lock is in the way (TestLockModelThreeClients explains
// why); a server that looks at read locks reports the read lock, to both.
func TestLockGetlkWriteOverReadLock(t *testing.T) {
	e := lockLab(t)
	name := lockFile(t, e, "lock-getlk-read", "data")
	holder := openLocked(t, mountRdmafs(t, e, "lock"), name)
	k := openLocked(t, mountKernel(t, e, "tcp"), name)
	r := openLocked(t, mountRdmafs(t, e, "lock"), name)
	if err := fcntlLock(holder, syscall.F_SETLK, syscall.F_RDLCK, 2, 4); err != nil {
		t.Fatalf("holder F_SETLK of a read lock: %v", err)
	}
	getlk := func(who string, f *os.File) string {
		lk := syscall.Flock_t{Type: syscall.F_WRLCK, Start: 0, Len: 10}
		if err := syscall.FcntlFlock(f.Fd(), syscall.F_GETLK, &lk); err != nil {
			t.Fatalf("%s F_GETLK: %v", who, err)
		}
		if lk.Type == syscall.F_UNLCK {
			return "none"
		}
		return fmt.Sprintf("type %d at %d, %d bytes", lk.Type, lk.Start, lk.Len)
	}
	kernel, rdmafs := getlk("kernel client", k), getlk("rdmafs", r)
	t.Logf("a read lock on 2..5; F_GETLK of a write lock on 0..9: kernel client %s, rdmafs %s", kernel, rdmafs)
	if kernel != rdmafs {
		t.Errorf("F_GETLK of a write lock over another client's read lock: rdmafs %s, the kernel client %s", rdmafs, kernel)
	}
	// Both must still be refused the write lock itself.
	for _, c := range []struct {
		who string
		f   *os.File
	}{{"kernel client", k}, {"rdmafs", r}} {
		if err := fcntlLock(c.f, syscall.F_SETLK, syscall.F_WRLCK, 0, 10); !denied(err) {
			t.Errorf("%s F_SETLK of a write lock over another client's read lock: %v, want EAGAIN", c.who, err)
			fcntlLock(c.f, syscall.F_SETLK, syscall.F_UNLCK, 0, 0)
		}
	}
}
