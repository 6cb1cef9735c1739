package host

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/rdmafs/rdmafs/nfs3"
	"github.com/rdmafs/rdmafs/nfs3/nlm"
	"github.com/rdmafs/rdmafs/sunrpc"
	"github.com/rdmafs/rdmafs/test/e2e/e2etest"
	"github.com/rdmafs/rdmafs/test/netns"
)

// The FUSE side of locks, end to end on this machine: two rdmafs mounts of
// `rdmafs serve`, and a small NLM version 4 server of the test's own
// (whole-file and byte-range write and read locks per svid, no queueing,
// so the mounts poll, as they do next to the kernel's lockd) registered
// with an rpcbind of the test's own, in a network and mount namespace of
// the test's own: the host's rpcbind is never told anything. What serve's
// own lock manager does is the test of TestLock*BetweenClients.

// lockNetnsEnv marks the copy of the test binary that runs inside the
// namespace.
const lockNetnsEnv = "RDMAFS_HOST_LOCK_NETNS"

// inLockNamespace runs the calling test again inside a namespace of its
// own with rpcbind (and a private /run and /var/lib, where rdmafs keeps
// its lock journals), and returns false; inside, it returns true.
func inLockNamespace(t *testing.T) bool {
	t.Helper()
	needHost(t)
	return netns.Rerun(t, lockNetnsEnv, "", "/var/lib")
}

// nlmLock is a lock the test's NLM server holds for a svid.
type nlmLock struct {
	svid      int32
	off, n    uint64
	exclusive bool
}

func (l nlmLock) overlaps(off, n uint64) bool {
	end := func(o, n uint64) uint64 {
		if n == 0 {
			return ^uint64(0)
		}
		return o + n - 1
	}
	return l.off <= end(off, n) && off <= end(l.off, l.n)
}

// nlmRefusedOffset is where the test's NLM server refuses every LOCK with
// NLM4_DENIED_NOLOCKS, as a server out of lock memory does.
const nlmRefusedOffset = 1 << 40

// testNLM is the test's NLM version 4 server.
type testNLM struct {
	mu    sync.Mutex
	locks map[string][]nlmLock // by file handle
	calls map[string]int
}

func (s *testNLM) count(proc string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.calls[proc]
}

// held returns the locks held on all files.
func (s *testNLM) held() []nlmLock {
	s.mu.Lock()
	defer s.mu.Unlock()
	var all []nlmLock
	for _, ls := range s.locks {
		all = append(all, ls...)
	}
	return all
}

// conflict returns the lock of another svid in the way, if any. The
// caller holds s.mu.
func (s *testNLM) conflict(fh []byte, svid int32, off, n uint64, exclusive bool) (nlmLock, bool) {
	for _, l := range s.locks[string(fh)] {
		if l.svid != svid && l.overlaps(off, n) && (l.exclusive || exclusive) {
			return l, true
		}
	}
	return nlmLock{}, false
}

// serve decodes the arguments into args, counts the call, and answers
// what answer returns.
func (s *testNLM) proc(name string, args func() nlm.Message, answer func(nlm.Message) nlm.Message) sunrpc.Proc {
	return sunrpc.Proc{Serve: func(r *sunrpc.Request) []byte {
		a := args()
		if err := nlm.Unmarshal(r.Args, a); err != nil {
			return sunrpc.AcceptedReply(r.Xid, sunrpc.GarbageArgs)
		}
		s.mu.Lock()
		s.calls[name]++
		res := answer(a)
		s.mu.Unlock()
		e := sunrpc.SuccessHeader(r.Xid)
		res.Encode(e)
		return e.Buf
	}}
}

// startTestNLM serves the test's NLM server on loopback and registers it
// with the namespace's rpcbind.
func startTestNLM(t *testing.T) *testNLM {
	s := &testNLM{locks: make(map[string][]nlmLock), calls: make(map[string]int)}
	procs := make([]sunrpc.Proc, nlm.ProcUnlock+1)
	procs[nlm.ProcNull] = sunrpc.NullProc
	procs[nlm.ProcTest] = s.proc("TEST", func() nlm.Message { return new(nlm.TestArgs) }, func(m nlm.Message) nlm.Message {
		a := m.(*nlm.TestArgs)
		res := &nlm.TestRes{Cookie: a.Cookie}
		if l, ok := s.conflict(a.Lock.FH, a.Lock.Svid, a.Lock.Offset, a.Lock.Length, a.Exclusive); ok {
			res.Stat = nlm.StatDenied
			res.Holder = nlm.Holder{Exclusive: l.exclusive, Svid: l.svid, Offset: l.off, Length: l.n}
		}
		return res
	})
	procs[nlm.ProcLock] = s.proc("LOCK", func() nlm.Message { return new(nlm.LockArgs) }, func(m nlm.Message) nlm.Message {
		a := m.(*nlm.LockArgs)
		res := &nlm.Res{Cookie: a.Cookie}
		if a.Lock.Offset == nlmRefusedOffset {
			res.Stat = nlm.StatDeniedNoLocks
			return res
		}
		if _, ok := s.conflict(a.Lock.FH, a.Lock.Svid, a.Lock.Offset, a.Lock.Length, a.Exclusive); ok {
			res.Stat = nlm.StatDenied // no queueing: the client polls
			return res
		}
		fh := string(a.Lock.FH)
		kept := s.locks[fh][:0]
		for _, l := range s.locks[fh] {
			if l.svid != a.Lock.Svid || !l.overlaps(a.Lock.Offset, a.Lock.Length) {
				kept = append(kept, l)
			}
		}
		s.locks[fh] = append(kept, nlmLock{a.Lock.Svid, a.Lock.Offset, a.Lock.Length, a.Exclusive})
		return res
	})
	procs[nlm.ProcCancel] = s.proc("CANCEL", func() nlm.Message { return new(nlm.CancelArgs) }, func(m nlm.Message) nlm.Message {
		return &nlm.Res{Cookie: m.(*nlm.CancelArgs).Cookie, Stat: nlm.StatDenied}
	})
	procs[nlm.ProcUnlock] = s.proc("UNLOCK", func() nlm.Message { return new(nlm.UnlockArgs) }, func(m nlm.Message) nlm.Message {
		a := m.(*nlm.UnlockArgs)
		fh := string(a.Lock.FH)
		kept := s.locks[fh][:0]
		for _, l := range s.locks[fh] {
			if l.svid != a.Lock.Svid || !l.overlaps(a.Lock.Offset, a.Lock.Length) {
				kept = append(kept, l)
			}
		}
		s.locks[fh] = kept
		return &nlm.Res{Cookie: a.Cookie}
	})
	srv := sunrpc.NewServer(sunrpc.ServerConfig{})
	srv.Register(nlm.Program, nlm.Version, procs)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go srv.Serve(ln)
	port := ln.Addr().(*net.TCPAddr).Port
	t.Cleanup(func() { srv.Close() })
	if err := portmapSet(nlm.Program, nlm.Version, port); err != nil {
		t.Fatalf("registering the test's NLM server with rpcbind: %v", err)
	}
	return s
}

// portmapSet registers prog and vers on port with rpcbind on loopback.
func portmapSet(prog, vers uint32, port int) error {
	t := sunrpc.NewTCP(sunrpc.TCPConfig{Addr: "127.0.0.1:111", ReservedPort: true, MaxRecord: 4096})
	c := sunrpc.NewClient(t, sunrpc.Config{Prog: nfs3.PortmapProgram, Vers: nfs3.PortmapVersion,
		Timeout: 5 * time.Second, Retrans: 1, Soft: true, ProcNames: nfs3.PortmapProcNames})
	defer c.Close()
	call := c.NewCall(nfs3.PortmapProcSet, nil)
	defer call.Release()
	e := call.Args()
	e.Uint32(prog)
	e.Uint32(vers)
	e.Uint32(nfs3.IPProtoTCP)
	e.Uint32(uint32(port))
	call.SetArgs(e)
	if err := c.Do(context.Background(), call); err != nil {
		return err
	}
	if b := call.Reply.Body; len(b) < 4 || b[3] != 1 {
		return errors.New("rpcbind refused SET")
	}
	return nil
}

// fuseLockMounts mounts serve twice with lock, against the test's NLM
// server.
func fuseLockMounts(t *testing.T) (nlmSrv *testNLM, dir, a, b string) {
	t.Helper()
	nlmSrv = startTestNLM(t)
	s := startServer(t, "", 0)
	write(t, filepath.Join(s.dir, "locked"), "0")
	// serve squashes root: the file must be writable by anyone.
	if err := os.Chmod(filepath.Join(s.dir, "locked"), 0o666); err != nil {
		t.Fatal(err)
	}
	return nlmSrv, s.dir, s.mount(t, "lock"), s.mount(t, "lock")
}

// TestLockFUSEFcntl: fcntl locks through two mounts exclude each other;
// F_GETLK reports the holder; a waiting F_SETLKW gets the lock within
// about a second of its release (polling); closing a descriptor releases
// the process's locks on the file.
func TestLockFUSEFcntl(t *testing.T) {
	if !inLockNamespace(t) {
		return
	}
	srv, _, a, b := fuseLockMounts(t)
	fa := openRW(t, filepath.Join(a, "locked"))
	fb := openRW(t, filepath.Join(b, "locked"))
	if err := setlk(fa, syscall.F_SETLK, syscall.F_WRLCK, 10, 20); err != nil {
		t.Fatalf("F_SETLK on the first mount: %v", err)
	}
	if err := setlk(fb, syscall.F_SETLK, syscall.F_RDLCK, 0, 0); !errors.Is(err, syscall.EAGAIN) {
		t.Fatalf("F_SETLK on the second mount while the first holds a write lock: %v, want EAGAIN", err)
	}
	if err := setlk(fb, syscall.F_SETLK, syscall.F_WRLCK, 30, 10); err != nil {
		t.Errorf("F_SETLK of bytes 30-39 beside the held 10-29: %v", err)
	}
	lk := syscall.Flock_t{Type: syscall.F_RDLCK}
	if err := syscall.FcntlFlock(fb.Fd(), syscall.F_GETLK, &lk); err != nil {
		t.Fatalf("F_GETLK: %v", err)
	}
	if lk.Type != syscall.F_WRLCK || lk.Start != 10 || lk.Len != 20 {
		t.Errorf("F_GETLK = type %d at %d, %d bytes; want the write lock (type %d) at 10, 20 bytes", lk.Type, lk.Start, lk.Len, syscall.F_WRLCK)
	}
	grantedAfterRelease(t, fa, fb, 1500*time.Millisecond, 1500*time.Millisecond, 10*time.Second)
	fb.Close()
	if held := srv.held(); len(held) != 0 {
		t.Errorf("after close(2) the server still holds %+v", held)
	}
	// rdmafs stats counts the NLM calls, after the NFS ones.
	if code, out := rdmafs(t, 10*time.Second, "stats", b); code != 0 || !regexp.MustCompile(`(?m)^per-op NLM statistics p/v: 100021/4 \(nlockmgr\)$`).MatchString(out) ||
		!regexp.MustCompile(`(?m)^\s+NLM_LOCK: [1-9]`).MatchString(out) || !regexp.MustCompile(`(?m)^\s+NLM_UNLOCK: [1-9]`).MatchString(out) {
		t.Errorf("rdmafs stats %s (status %d) shows no NLM block with LOCK and UNLOCK calls:\n%s", b, code, out)
	}
	if err := setlk(fa, syscall.F_SETLK, syscall.F_WRLCK, 0, 0); err != nil {
		t.Errorf("F_SETLK after the holder closed its file: %v", err)
	}
}

// TestLockFUSEFlockAndOFD: flock(2) is a whole-file lock on the server,
// and conflicts with fcntl locks of the other mount; flock and OFD locks
// go when the last descriptor of their open file closes.
func TestLockFUSEFlockAndOFD(t *testing.T) {
	if !inLockNamespace(t) {
		return
	}
	srv, _, a, b := fuseLockMounts(t)
	fa := openRW(t, filepath.Join(a, "locked"))
	fb := openRW(t, filepath.Join(b, "locked"))
	if err := syscall.Flock(int(fa.Fd()), syscall.LOCK_EX); err != nil {
		t.Fatalf("flock LOCK_EX: %v", err)
	}
	if err := syscall.Flock(int(fb.Fd()), syscall.LOCK_SH|syscall.LOCK_NB); !errors.Is(err, syscall.EWOULDBLOCK) {
		t.Errorf("flock LOCK_SH|LOCK_NB on the other mount: %v, want EWOULDBLOCK", err)
	}
	if err := setlk(fb, syscall.F_SETLK, syscall.F_RDLCK, 100, 1); !errors.Is(err, syscall.EAGAIN) {
		t.Errorf("F_SETLK on the other mount under the flock: %v, want EAGAIN (flock is a whole-file lock)", err)
	}
	fa.Close() // the last descriptor of the open file: its flock goes
	deadline := time.Now().Add(5 * time.Second)
	for len(srv.held()) != 0 && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond) // RELEASE is asynchronous
	}
	if held := srv.held(); len(held) != 0 {
		t.Fatalf("after the last close the server still holds %+v", held)
	}
	lk := syscall.Flock_t{Type: syscall.F_WRLCK}
	if err := syscall.FcntlFlock(fb.Fd(), unix.F_OFD_SETLK, &lk); err != nil {
		t.Fatalf("F_OFD_SETLK: %v", err)
	}
	fc := openRW(t, filepath.Join(a, "locked"))
	if err := setlk(fc, syscall.F_SETLK, syscall.F_WRLCK, 0, 0); !errors.Is(err, syscall.EAGAIN) {
		t.Errorf("F_SETLK on the other mount under the OFD lock: %v, want EAGAIN", err)
	}
	fb.Close()
	deadline = time.Now().Add(5 * time.Second)
	for len(srv.held()) != 0 && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
	}
	if held := srv.held(); len(held) != 0 {
		t.Errorf("after the OFD lock's last close the server still holds %+v", held)
	}
}

// TestLockFUSESignalledWaiter: an F_SETLKW that gets a signal ends, and
// leaves no lock on the server once the holder lets go; one whose process
// is a Go program is not ended by the runtime's own signals (this test's
// waiter in TestLockFUSEFcntl is one).
func TestLockFUSESignalledWaiter(t *testing.T) {
	if !inLockNamespace(t) {
		return
	}
	srv, _, a, b := fuseLockMounts(t)
	fa := openRW(t, filepath.Join(a, "locked"))
	if err := setlk(fa, syscall.F_SETLK, syscall.F_WRLCK, 0, 0); err != nil {
		t.Fatal(err)
	}
	// A shell's flock(1) waits in flock(2) until it is killed.
	cmd := exec.Command("flock", "-x", filepath.Join(b, "locked"), "-c", "sleep 1000")
	if err := cmd.Start(); err != nil {
		t.Skipf("flock(1): %v", err)
	}
	time.Sleep(time.Second)
	locks := srv.count("LOCK")
	cmd.Process.Signal(syscall.SIGTERM)
	// A FUSE request that reached rdmafs holds its caller, even a killed
	// one, until rdmafs answers it.
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	var err error
	select {
	case err = <-exited:
	case <-time.After(10 * time.Second):
		t.Fatal("the waiter still there 10 s after SIGTERM: rdmafs did not answer its interrupted lock request")
	}
	if ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus); !ok || !ws.Signaled() {
		t.Fatalf("the waiter ended with %v, not by its signal", err)
	}
	if err := setlk(fa, syscall.F_SETLK, syscall.F_UNLCK, 0, 0); err != nil {
		t.Fatal(err)
	}
	time.Sleep(2 * time.Second) // a waiter still polling would get the lock now
	if held := srv.held(); len(held) != 0 {
		t.Errorf("after the waiter was killed and the holder let go, the server holds %+v", held)
	}
	if n := srv.count("LOCK") - locks; n > 1 {
		t.Errorf("%d LOCK calls after the waiter was killed, want at most the one in flight", n)
	}
}

// TestLockFUSECounter: two mounts each add one to a counter in a file 200
// times, each time under a write lock: the total is exactly 400, so what
// one wrote under the lock reached the server before its unlock, and the
// other read it, not its cached copy, once it held the lock.
func TestLockFUSECounter(t *testing.T) {
	if !inLockNamespace(t) {
		return
	}
	_, dir, a, b := fuseLockMounts(t)
	countTogether(t, a, b, filepath.Join(dir, "locked"), 200)
}

// countTogether has a process on each of the mounts a and b add one to
// the counter in the file locked each times, under a write lock each
// time, and checks on the server (serverFile) that it ends at 2 × each.
func countTogether(t *testing.T, a, b, serverFile string, each int) {
	t.Helper()
	errs := make(chan error, 2)
	for _, mnt := range []string{a, b} {
		f := openRW(t, filepath.Join(mnt, "locked"))
		// Read it once first, so that its page cache holds a copy.
		if _, err := f.ReadAt(make([]byte, 16), 0); err != nil && !errors.Is(err, io.EOF) {
			t.Fatal(err)
		}
		go func() { errs <- increment(f, each) }()
	}
	for range 2 {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	got, err := os.ReadFile(serverFile)
	if err != nil {
		t.Fatal(err)
	}
	if string(got) != strconv.Itoa(2*each) {
		t.Errorf("counter %q after 2 × %d locked increments, want %d", got, each, 2*each)
	}
}

// increment adds one to the number in f n times, each under a write lock.
func increment(f *os.File, n int) error {
	buf := make([]byte, 32)
	for i := range n {
		if err := setlk(f, syscall.F_SETLKW, syscall.F_WRLCK, 0, 0); err != nil {
			return fmt.Errorf("increment %d: F_SETLKW: %w", i, err)
		}
		m, err := f.ReadAt(buf, 0)
		if err != nil && !errors.Is(err, io.EOF) {
			return fmt.Errorf("increment %d: read: %w", i, err)
		}
		v, err := strconv.Atoi(string(buf[:m]))
		if err != nil {
			return fmt.Errorf("increment %d: counter %q: %w", i, buf[:m], err)
		}
		s := strconv.Itoa(v + 1)
		if _, err := f.WriteAt([]byte(s), 0); err != nil {
			return fmt.Errorf("increment %d: write: %w", i, err)
		}
		if err := setlk(f, syscall.F_SETLK, syscall.F_UNLCK, 0, 0); err != nil {
			return fmt.Errorf("increment %d: unlock: %w", i, err)
		}
	}
	return nil
}

// TestLockMountWithoutNLM: given lock, a mount of a server whose
// portmapper has no NLM fails at mount time and names nolock; given
// neither lock nor nolock, it mounts with local locks.
func TestLockMountWithoutNLM(t *testing.T) {
	if !inLockNamespace(t) {
		return
	}
	s := startServer(t, "", 0, "nolock") // serve without its lock manager
	mnt := t.TempDir()
	code, out := rdmafs(t, time.Minute, "-o", s.mountOpts()+",lock", "127.0.0.1:/", mnt)
	if code != 32 || !strings.Contains(out, "offers no lock manager") || !strings.Contains(out, "nolock") {
		t.Errorf("mount with lock of a server without NLM: status %d, %q; want status 32 and a message naming nolock", code, out)
	}
	if code == 0 {
		e2etest.Unmount(t, mnt)
	}
	write(t, filepath.Join(s.dir, "f"), "data")
	if err := os.Chmod(filepath.Join(s.dir, "f"), 0o666); err != nil {
		t.Fatal(err)
	}
	local := s.mount(t)
	f := openRW(t, filepath.Join(local, "f"))
	if err := setlk(f, syscall.F_SETLK, syscall.F_WRLCK, 0, 0); err != nil {
		t.Errorf("F_SETLK on a mount with local locks: %v", err)
	}
}

// TestLockFUSELocalFlock: with local_lock=flock, flock(2) locks stay in
// this client's kernel (the server hears nothing of them, and two open
// files of one mount still exclude each other), while fcntl locks still
// go to the server.
func TestLockFUSELocalFlock(t *testing.T) {
	if !inLockNamespace(t) {
		return
	}
	srv := startTestNLM(t)
	s := startServer(t, "", 0)
	write(t, filepath.Join(s.dir, "locked"), "0")
	if err := os.Chmod(filepath.Join(s.dir, "locked"), 0o666); err != nil {
		t.Fatal(err)
	}
	a, b := s.mount(t, "lock,local_lock=flock"), s.mount(t, "lock,local_lock=flock")
	f1, f2 := openRW(t, filepath.Join(a, "locked")), openRW(t, filepath.Join(a, "locked"))
	if err := syscall.Flock(int(f1.Fd()), syscall.LOCK_EX); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Flock(int(f2.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); !errors.Is(err, syscall.EWOULDBLOCK) {
		t.Errorf("a second open file's flock on the same mount: %v, want EWOULDBLOCK (local)", err)
	}
	if n := srv.count("LOCK"); n != 0 {
		t.Errorf("the server got %d LOCKs for flock(2) with local_lock=flock, want 0", n)
	}
	fb := openRW(t, filepath.Join(b, "locked"))
	if err := setlk(fb, syscall.F_SETLK, syscall.F_WRLCK, 0, 0); err != nil {
		t.Fatal(err)
	}
	if err := setlk(f2, syscall.F_SETLK, syscall.F_WRLCK, 0, 0); !errors.Is(err, syscall.EAGAIN) {
		t.Errorf("F_SETLK through the first mount under the second's: %v, want EAGAIN (fcntl locks still go to the server)", err)
	}
}

// TestLockFailureLogged: a lock call the server refuses for a reason other
// than a conflict fails (ENOLCK) and is logged with the server's answer
// and how long it took, which a program that takes such an errno for an
// I/O error (SQLite) does not say; a conflict (EAGAIN) is not logged.
func TestLockFailureLogged(t *testing.T) {
	if !inLockNamespace(t) {
		return
	}
	startTestNLM(t)
	s := startServer(t, "", 0)
	write(t, filepath.Join(s.dir, "locked"), "0")
	os.Chmod(filepath.Join(s.dir, "locked"), 0o666)
	mnt := t.TempDir()
	var log e2etest.Output
	cmd := exec.Command(rdmafsBin, "-f", "-o", s.mountOpts()+",lock", "127.0.0.1:/", mnt)
	cmd.Stdout, cmd.Stderr = &log, &log
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		e2etest.Unmount(t, mnt)
		cmd.Wait()
	})
	for deadline := time.Now().Add(10 * time.Second); !e2etest.Mounted(mnt); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("not mounted after 10 s: %s", log.String())
		}
	}
	a := openRW(t, filepath.Join(mnt, "locked"))
	if err := setlk(a, syscall.F_SETLK, syscall.F_WRLCK, nlmRefusedOffset, 1); !errors.Is(err, syscall.ENOLCK) {
		t.Errorf("F_SETLK the server refuses: %v, want ENOLCK", err)
	}
	want := fmt.Sprintf("lock: F_SETLK write lock of bytes %d-%d of file ", nlmRefusedOffset, nlmRefusedOffset)
	// The log reaches the test through a pipe, after the call returned.
	for deadline := time.Now().Add(5 * time.Second); !strings.Contains(log.String(), want) && time.Now().Before(deadline); {
		time.Sleep(10 * time.Millisecond)
	}
	if !strings.Contains(log.String(), want) || !strings.Contains(log.String(), "failed with no locks available after ") ||
		!strings.Contains(log.String(), "NLM4_DENIED_NOLOCKS") {
		t.Errorf("rdmafs's log after a refused lock:\n%s\nwant a line with %q, the errno, the time and NLM4_DENIED_NOLOCKS", log.String(), want)
	}
	// A conflict, through a second mount, is the program's to handle.
	b := openRW(t, filepath.Join(s.mount(t, "lock"), "locked"))
	if err := setlk(b, syscall.F_SETLK, syscall.F_WRLCK, 0, 0); err != nil {
		t.Fatal(err)
	}
	if err := setlk(a, syscall.F_SETLK, syscall.F_WRLCK, 0, 1); !errors.Is(err, syscall.EAGAIN) {
		t.Errorf("F_SETLK of a lock held through the other mount: %v, want EAGAIN", err)
	}
	if n := strings.Count(log.String(), "lock: F_SETLK"); n != 1 {
		t.Errorf("%d lock failures logged, want only the refused one:\n%s", n, log.String())
	}
}
