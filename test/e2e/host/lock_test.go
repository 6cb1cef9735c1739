package host

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/rdmafs/rdmafs/nfs3"
	"github.com/rdmafs/rdmafs/nfs3/nlm"
)

// lockMounts starts a server and mounts it twice with lock: two clients
// of one lock manager, each its own rdmafs, in a network namespace of the
// test's own with an rpcbind of its own (inLockNamespace), where serve
// registers its lock manager. Outside, it runs the test there and returns
// ok false: the caller returns.
func lockMounts(t *testing.T) (a, b string, ok bool) {
	t.Helper()
	if !inLockNamespace(t) {
		return "", "", false
	}
	s := startServer(t, "", 0)
	// serve registers with rpcbind once it serves: wait for that.
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		_, err := nfs3.GetPort(ctx, nfs3.DialConfig{Host: "127.0.0.1", Timeout: 2 * time.Second}, nlm.Program, nlm.Version)
		cancel()
		if err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("rdmafs serve registered no NLM version 4 with rpcbind: %v", err)
		}
	}
	write(t, filepath.Join(s.dir, "locked"), "0")
	// serve squashes root: the file must be writable by anyone.
	if err := os.Chmod(filepath.Join(s.dir, "locked"), 0o666); err != nil {
		t.Fatal(err)
	}
	return s.mount(t, "lock"), s.mount(t, "lock"), true
}

func openRW(t *testing.T, path string) *os.File {
	t.Helper()
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	return f
}

func setlk(f *os.File, cmd int, typ int16, start, n int64) error {
	lk := syscall.Flock_t{Type: typ, Whence: 0, Start: start, Len: n}
	return syscall.FcntlFlock(f.Fd(), cmd, &lk)
}

// TestLockFcntlBetweenClients: a write lock taken through one mount keeps
// the other's F_SETLK out with EAGAIN, F_GETLK there reports its range and
// type, and an F_SETLKW there gets the lock within about a second of its
// release.
func TestLockFcntlBetweenClients(t *testing.T) {
	a, b, ok := lockMounts(t)
	if !ok {
		return
	}
	fa := openRW(t, filepath.Join(a, "locked"))
	fb := openRW(t, filepath.Join(b, "locked"))
	if err := setlk(fa, syscall.F_SETLK, syscall.F_WRLCK, 10, 20); err != nil {
		t.Fatalf("F_SETLK on the first mount: %v", err)
	}
	if err := setlk(fb, syscall.F_SETLK, syscall.F_RDLCK, 0, 0); !errors.Is(err, syscall.EAGAIN) && !errors.Is(err, syscall.EACCES) {
		t.Fatalf("F_SETLK on the second mount while the first holds a write lock: %v, want EAGAIN", err)
	}
	lk := syscall.Flock_t{Type: syscall.F_RDLCK, Start: 0, Len: 0}
	if err := syscall.FcntlFlock(fb.Fd(), syscall.F_GETLK, &lk); err != nil {
		t.Fatalf("F_GETLK: %v", err)
	}
	if lk.Type != syscall.F_WRLCK || lk.Start != 10 || lk.Len != 20 {
		t.Errorf("F_GETLK on the second mount = type %d, start %d, len %d; want the write lock (type %d) at 10, 20 bytes",
			lk.Type, lk.Start, lk.Len, syscall.F_WRLCK)
	}
	grantedAfterRelease(t, fa, fb, time.Second, 3*time.Second, 30*time.Second)
	// Closing the file releases the lock: the first mount can take it.
	fb.Close()
	if err := setlk(fa, syscall.F_SETLK, syscall.F_WRLCK, 0, 0); err != nil {
		t.Errorf("F_SETLK after the holder closed its file: %v", err)
	}
}

// TestLockGetlkNamesHolderOfThisMount: a process holds a write lock; a
// child on the same mount asks F_GETLK and gets the lock with its
// holder's pid, as through the kernel's client, which looks in its own
// lock table before it asks the server. The holder on the other mount is
// another host's to the server: its pid is not known (0).
func TestLockGetlkNamesHolderOfThisMount(t *testing.T) {
	a, b, ok := lockMounts(t)
	if !ok {
		return
	}
	testGetlkNamesHolder(t, a, b, "locked")
}

// testGetlkNamesHolder takes a write lock on bytes 10-29 of name through
// mount a and checks what F_GETLK answers through a and b.
func testGetlkNamesHolder(t *testing.T, a, b, name string) {
	f := openRW(t, filepath.Join(a, name))
	if err := setlk(f, syscall.F_SETLK, syscall.F_WRLCK, 10, 20); err != nil {
		t.Fatalf("F_SETLK: %v", err)
	}
	getlk := func(mnt string) string {
		t.Helper()
		cmd := exec.Command(testBin, "-test.run=^$", "getlk", filepath.Join(mnt, name))
		cmd.Env = append(os.Environ(), asUserEnv+"=1")
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("F_GETLK in a child: %v", err)
		}
		return strings.TrimSpace(string(out))
	}
	if got, want := getlk(a), fmt.Sprintf("%d 10 20 %d", syscall.F_WRLCK, os.Getpid()); got != want {
		t.Errorf("F_GETLK by a child on the same mount = %q (type start len pid), want %q: the holder's pid", got, want)
	}
	if got, want := getlk(b), fmt.Sprintf("%d 10 20 0", syscall.F_WRLCK); got != want {
		t.Errorf("F_GETLK on the other mount = %q (type start len pid), want %q", got, want)
	}
}

// TestLockFlockBetweenClients: flock(2) is a whole-file lock on the
// server, as with the kernel's NFS client.
func TestLockFlockBetweenClients(t *testing.T) {
	a, b, ok := lockMounts(t)
	if !ok {
		return
	}
	fa := openRW(t, filepath.Join(a, "locked"))
	fb := openRW(t, filepath.Join(b, "locked"))
	if err := syscall.Flock(int(fa.Fd()), syscall.LOCK_EX); err != nil {
		t.Fatalf("flock LOCK_EX on the first mount: %v", err)
	}
	if err := syscall.Flock(int(fb.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); !errors.Is(err, syscall.EWOULDBLOCK) {
		t.Fatalf("flock LOCK_EX|LOCK_NB on the second mount: %v, want EWOULDBLOCK", err)
	}
	if err := syscall.Flock(int(fa.Fd()), syscall.LOCK_UN); err != nil {
		t.Fatalf("flock LOCK_UN: %v", err)
	}
	if err := syscall.Flock(int(fb.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		t.Errorf("flock on the second mount after the release: %v", err)
	}
}

// grantedAfterRelease starts an F_SETLKW of the whole file through waiter
// while holder holds a lock on it, checks that it still waits after
// blocked, releases holder's lock, and checks that the waiter is granted
// within grant of the release (and fails after giveUp).
func grantedAfterRelease(t *testing.T, holder, waiter *os.File, blocked, grant, giveUp time.Duration) {
	t.Helper()
	done := make(chan error, 1)
	go func() { done <- setlk(waiter, syscall.F_SETLKW, syscall.F_WRLCK, 0, 0) }()
	select {
	case err := <-done:
		t.Fatalf("F_SETLKW returned (%v) while the other mount held the lock", err)
	case <-time.After(blocked):
	}
	released := time.Now()
	if err := setlk(holder, syscall.F_SETLK, syscall.F_UNLCK, 0, 0); err != nil {
		t.Fatalf("unlock: %v", err)
	}
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("F_SETLKW: %v", err)
		}
		if d := time.Since(released); d > grant {
			t.Errorf("F_SETLKW got the lock %v after its release, want about a second at most", d)
		}
	case <-time.After(giveUp):
		t.Fatalf("F_SETLKW still blocked %v after the release", giveUp)
	}
}
