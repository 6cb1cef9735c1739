package guest

import (
	"bufio"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/rdmafs/rdmafs/test/e2e/e2etest"
	"github.com/rdmafs/rdmafs/test/seed"
)

// More lock tests: a lock held across a knfsd restart, and a randomized
// check of three clients' fcntl locks against a model of POSIX lock
// semantics, both driven through lock script helpers (one lock owner
// each, in a process of its own).

// lockScriptEnv, when set to a path, makes the test binary a lock script
// helper (TestLockScriptHelperProcess): it opens the path and runs the
// commands it reads on stdin, one per line, answering each on stdout with
// a line that starts with lockReply:
//
//	set r|w|u START LEN  F_SETLK: "ok", "denied" (EAGAIN, EACCES) or "err MSG"
//	get r|w START LEN    F_GETLK: "none", "lock r|w START LEN PID" or "err MSG"
//
// It is one lock owner (a process) that keeps its locks until it exits.
const lockScriptEnv = "RDMAFS_LOCK_SCRIPT_HELPER"

// lockReply starts every answer of the helper, to tell it from what the
// test framework prints.
const lockReply = "lockreply "

// lockScript is a running lock script helper.
type lockScript struct {
	name    string // who it is, for messages
	cmd     *exec.Cmd
	in      io.WriteCloser
	replies chan string
	stderr  *e2etest.Output
}

// startLockScript starts a helper on path and waits until it has the file
// open; it ends when the test does.
func startLockScript(t *testing.T, name, path string) *lockScript {
	t.Helper()
	s := &lockScript{name: name, replies: make(chan string, 16), stderr: new(e2etest.Output)}
	s.cmd = exec.Command(os.Args[0], "-test.run=^TestLockScriptHelperProcess$")
	s.cmd.Env = append(os.Environ(), lockScriptEnv+"="+path)
	s.cmd.Stderr = s.stderr
	var err error
	if s.in, err = s.cmd.StdinPipe(); err != nil {
		t.Fatal(err)
	}
	out, err := s.cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := s.cmd.Start(); err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			if r, ok := strings.CutPrefix(sc.Text(), lockReply); ok {
				s.replies <- r
			}
		}
		close(s.replies)
	}()
	t.Cleanup(func() { s.stop(t) })
	if r := s.do(t, "hello", 30*time.Second); r != "ready" {
		t.Fatalf("%s on %s: %q, want ready; stderr:\n%s", name, path, r, s.stderr)
	}
	return s
}

// do sends one command and returns the helper's answer, failing the test
// if there is none within limit.
func (s *lockScript) do(t *testing.T, command string, limit time.Duration) string {
	t.Helper()
	if command != "hello" {
		if _, err := fmt.Fprintln(s.in, command); err != nil {
			t.Fatalf("%s: sending %q: %v; stderr:\n%s", s.name, command, err, s.stderr)
		}
	}
	select {
	case r, ok := <-s.replies:
		if !ok {
			t.Fatalf("%s: exited before answering %q; stderr:\n%s", s.name, command, s.stderr)
		}
		return r
	case <-time.After(limit):
		t.Fatalf("%s: no answer to %q within %v; stderr:\n%s", s.name, command, limit, s.stderr)
		return ""
	}
}

// stop closes the helper's stdin, which makes it exit (releasing its
// locks), and waits for it; it kills a helper still there after 30 s.
func (s *lockScript) stop(t *testing.T) {
	s.in.Close()
	done := make(chan error, 1)
	go func() { done <- s.cmd.Wait() }()
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		t.Logf("%s: still running 30 s after its stdin was closed: killed", s.name)
		s.cmd.Process.Kill()
		<-done
	}
}

// TestLockScriptHelperProcess is not a test: it is the helper process of
// the tests in this file, run with lockScriptEnv set.
func TestLockScriptHelperProcess(t *testing.T) {
	path := os.Getenv(lockScriptEnv)
	if path == "" {
		t.Skip("the lock tests' script helper process (" + lockScriptEnv + " unset)")
	}
	if err := lockScriptHelper(path, os.Stdin, os.Stdout); err != nil {
		t.Fatal(err)
	}
}

func lockScriptHelper(path string, in io.Reader, out io.Writer) error {
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		return err
	}
	defer f.Close()
	fmt.Fprintln(out, lockReply+"ready")
	sc := bufio.NewScanner(in)
	for sc.Scan() {
		fmt.Fprintln(out, lockReply+lockScriptStep(f, sc.Text()))
	}
	return sc.Err()
}

// lockScriptStep runs one helper command and returns its answer.
func lockScriptStep(f *os.File, line string) string {
	w := strings.Fields(line)
	if len(w) != 4 {
		return "err bad command " + strconv.Quote(line)
	}
	typ, ok := map[string]int16{"r": syscall.F_RDLCK, "w": syscall.F_WRLCK, "u": syscall.F_UNLCK}[w[1]]
	start, err1 := strconv.ParseInt(w[2], 10, 64)
	n, err2 := strconv.ParseInt(w[3], 10, 64)
	if !ok || err1 != nil || err2 != nil {
		return "err bad command " + strconv.Quote(line)
	}
	switch w[0] {
	case "set":
		err := fcntlLock(f, syscall.F_SETLK, typ, start, n)
		switch {
		case err == nil:
			return "ok"
		case denied(err):
			return "denied"
		}
		return "err " + err.Error()
	case "get":
		lk := syscall.Flock_t{Type: typ, Whence: 0, Start: start, Len: n}
		if err := syscall.FcntlFlock(f.Fd(), syscall.F_GETLK, &lk); err != nil {
			return "err " + err.Error()
		}
		switch lk.Type {
		case syscall.F_UNLCK:
			return "none"
		case syscall.F_RDLCK:
			return fmt.Sprintf("lock r %d %d %d", lk.Start, lk.Len, lk.Pid)
		case syscall.F_WRLCK:
			return fmt.Sprintf("lock w %d %d %d", lk.Start, lk.Len, lk.Pid)
		}
		return fmt.Sprintf("err F_GETLK type %d", lk.Type)
	}
	return "err bad command " + strconv.Quote(line)
}

// TestLockReclaimAfterKnfsdRestart: a write lock an rdmafs mount of knfsd
// holds survives a knfsd restart, in which knfsd's lockd forgets every
// lock and starts a grace period (90 s: no setting of the guest shortens
// it): rdmafs reclaims it in the grace period, so that after it the kernel
// client cannot take the lock (EAGAIN) until the holder releases it.
//
// One thing the test arranges that a real restart might not:
//   - knfsd's statd does not restart, so its state number does not change:
//     rdmafs learns of the restart from an NLM call answered
//     NLM4_DENIED_GRACE_PERIOD, and the test makes one (F_GETLK on another
//     file) right after the restart;
//
// lockd comes back on another TCP port (its portmapper's choice, as the
// port is not pinned): rdmafs finds it again through the server's
// portmapper when the old one refuses.
//
// No kernel client mount of knfsd may exist across the restart: it would
// keep lockd up (no lost locks, no grace period).
func TestLockReclaimAfterKnfsdRestart(t *testing.T) {
	e := lockLab(t)
	name := lockFile(t, e, "lock-reclaim", "data")
	trigger := lockFile(t, e, "lock-reclaim-trigger", "data")
	rfs := mountRdmafs(t, e, "proto=tcp,vers=3,hard,lock")
	holder := startLockScript(t, "rdmafs holder", filepath.Join(rfs, name))
	if r := holder.do(t, "set w 0 0", time.Minute); r != "ok" {
		t.Fatalf("rdmafs holder F_SETLK of a write lock on the whole file: %s", r)
	}
	t.Log("rdmafs holds a write lock on the whole file")

	port := nlmTCPPort(t, "127.0.0.1")
	if port == "" {
		t.Fatal("no NLM version 4 over TCP registered with rpcbind")
	}
	stopped := false
	t.Cleanup(func() {
		if stopped {
			exec.Command("rpc.nfsd", "8").Run()
			os.WriteFile("/proc/fs/nfsd/portlist", []byte("rdma 20049\n"), 0)
		}
	})
	run(t, time.Minute, "rpc.nfsd", "0")
	stopped = true
	t.Log("knfsd stopped")
	time.Sleep(3 * time.Second)
	run(t, time.Minute, "rpc.nfsd", "8")
	if err := os.WriteFile("/proc/fs/nfsd/portlist", []byte("rdma 20049\n"), 0); err != nil {
		t.Fatalf("adding the RDMA listener back: %v", err)
	}
	stopped = false
	restarted := time.Now()
	t.Log("knfsd started again")
	t.Logf("lockd on TCP port %s before the restart, %s after", port, nlmTCPPort(t, "127.0.0.1"))

	// An NLM call of the mount, answered NLM4_DENIED_GRACE_PERIOD: rdmafs
	// reclaims, and the call itself is answered once the grace period ends.
	tf := openLocked(t, rfs, trigger)
	tested := make(chan error, 1)
	go func() {
		lk := syscall.Flock_t{Type: syscall.F_WRLCK}
		err := syscall.FcntlFlock(tf.Fd(), syscall.F_GETLK, &lk)
		if err == nil && lk.Type != syscall.F_UNLCK {
			err = fmt.Errorf("F_GETLK reports a lock of type %d on a file nobody locked", lk.Type)
		}
		tested <- err
	}()
	select {
	case err := <-tested:
		if err != nil {
			t.Fatalf("rdmafs F_GETLK on another file after the restart: %v", err)
		}
	case <-time.After(150 * time.Second):
		t.Fatal("rdmafs F_GETLK on another file still unanswered 150 s after the restart")
	}
	waited := time.Since(restarted)
	t.Logf("rdmafs F_GETLK on another file answered %v after the restart (the grace period)", waited.Round(time.Millisecond))
	if waited < 5*time.Second {
		t.Logf("that is too soon for a grace period: knfsd's lockd did not restart (another user of lockd?), so it may still hold the lock it never lost")
	}

	knfs := mountKernel(t, e, "tcp")
	k := openLocked(t, knfs, name)
	if err := fcntlLock(k, syscall.F_SETLK, syscall.F_WRLCK, 0, 0); !denied(err) {
		t.Fatalf("kernel client F_SETLK after the grace period, while rdmafs holds the lock: %v, want EAGAIN: rdmafs did not reclaim its lock", err)
	}
	lk := syscall.Flock_t{Type: syscall.F_WRLCK}
	if err := syscall.FcntlFlock(k.Fd(), syscall.F_GETLK, &lk); err != nil {
		t.Fatalf("kernel client F_GETLK: %v", err)
	}
	if lk.Type != syscall.F_WRLCK {
		t.Errorf("kernel client F_GETLK = type %d at %d, %d bytes; want the reclaimed write lock (type %d)", lk.Type, lk.Start, lk.Len, syscall.F_WRLCK)
	}
	t.Log("the kernel client is denied the lock rdmafs reclaimed")

	if r := holder.do(t, "set u 0 0", time.Minute); r != "ok" {
		t.Fatalf("rdmafs holder unlock: %s", r)
	}
	var last error
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(200 * time.Millisecond) {
		if last = fcntlLock(k, syscall.F_SETLK, syscall.F_WRLCK, 0, 0); last == nil {
			break
		}
	}
	if last != nil {
		t.Fatalf("kernel client F_SETLK still failing 10 s after rdmafs released the lock: %v", last)
	}
	t.Log("the kernel client takes the lock once rdmafs releases it")
	fcntlLock(k, syscall.F_SETLK, syscall.F_UNLCK, 0, 0)
}

// lockModelSeedEnv names the seed of TestLockModelThreeClients: a number
// replays one, "random" draws a new one; unset, the test uses
// lockModelSeed.
const lockModelSeedEnv = "RDMAFS_LOCK_MODEL_SEED"

// lockModelSeed is the seed of `make e2e`.
const lockModelSeed = 1796071234567890123

// lockCells is how the model sees a file: bytes 0..63 one by one, and
// cell 64 for every byte from 64 on (the requests never split those).
const lockCells = 65

// lockModel is POSIX record locking as seen by separate owners: per owner
// (client) the type it holds on each cell, 0 for none.
type lockModel [][lockCells]byte

// cells returns the cells a range (START, LEN; LEN 0: to the end of the
// file) covers.
func cells(start, n int64) (lo, hi int) {
	lo = int(min(start, lockCells-1))
	hi = lockCells - 1
	if n > 0 {
		hi = int(min(start+n-1, lockCells-1))
	}
	return lo, hi
}

// conflict reports whether another owner than c holds a lock of type
// ('r' or 'w') on cells lo..hi that excludes a lock of type typ by c;
// with of != 0, only its locks of that type count.
func (m lockModel) conflict(c int, typ byte, lo, hi int, of byte) bool {
	for d := range m {
		if d == c {
			continue
		}
		for x := lo; x <= hi; x++ {
			if h := m[d][x]; h != 0 && (typ == 'w' || h == 'w') && (of == 0 || h == of) {
				return true
			}
		}
	}
	return false
}

// set records c's F_SETLK of typ ('r', 'w', or 'u' to unlock) on lo..hi.
func (m lockModel) set(c int, typ byte, lo, hi int) {
	if typ == 'u' {
		typ = 0
	}
	for x := lo; x <= hi; x++ {
		m[c][x] = typ
	}
}

// String shows each owner's locks as a row of cells: . r w.
func (m lockModel) String() string {
	var b strings.Builder
	for c := range m {
		fmt.Fprintf(&b, "  client %d: ", c)
		for _, h := range m[c] {
			if h == 0 {
				h = '.'
			}
			b.WriteByte(h)
		}
		b.WriteByte('\n')
	}
	return b.String()
}

// TestLockModelThreeClients: three clients of knfsd (rdmafs over TCP,
// rdmafs over RDMA, the kernel client over TCP), each one process (one
// lock owner) on the same file, run random non-blocking fcntl steps:
// F_SETLK of a read or write lock, F_UNLCK, F_GETLK, on small ranges of
// bytes 0..63, some to the end of the file or the whole file. Each answer
// is checked against a model of POSIX locks: F_SETLK fails with EAGAIN
// exactly when another client holds an overlapping lock that excludes it;
// F_GETLK reports a lock exactly then, of a type and range such a lock
// has.
//
// But for one quirk of knfsd's lockd (Debian 12's Linux 6.1): it tests an
// NLM TEST for a write lock as if for a read lock (the lock it tests with
// is made afresh and not given the request's type), so where only other
// owners' read locks are in the way it answers that none is. The kernel
// client's F_GETLK gets the same answer from it (the test logs how often
// each client met it); test/e2e/README.md lists it.
func TestLockModelThreeClients(t *testing.T) {
	e := lockLab(t)
	s := seed.Fixed(t, lockModelSeedEnv, lockModelSeed)
	ops := 250
	if n, err := strconv.Atoi(os.Getenv("RDMAFS_LOCK_MODEL_OPS")); err == nil && n > 0 {
		ops = n
	}
	name := lockFile(t, e, "lock-model", "data")
	mounts := []struct{ who, dir string }{
		{"rdmafs over tcp", mountRdmafs(t, e, "proto=tcp,vers=3,lock")},
		{"rdmafs over rdma", mountRdmafs(t, e, "proto=rdma,vers=3,lock")},
		{"kernel client over tcp", mountKernel(t, e, "tcp")},
	}
	runLockModel(t, mounts, name, s, ops, true)
}

// TestLockModelLocalFile checks the model of TestLockModelThreeClients
// itself against the local locks of three processes on a file of the
// guest's own file system, with the same seed and more steps: a failure
// there is the model's, not an NFS client's.
func TestLockModelLocalFile(t *testing.T) {
	lab(t)
	s := seed.Fixed(t, lockModelSeedEnv, lockModelSeed)
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "lock-model"), []byte("data"), 0o666); err != nil {
		t.Fatal(err)
	}
	local := []struct{ who, dir string }{{"process 0", dir}, {"process 1", dir}, {"process 2", dir}}
	runLockModel(t, local, "lock-model", s, 2000, false)
}

// runLockModel runs ops random steps, one client (a lock script helper)
// on name in each of mounts, and checks them against lockModel. With
// allowReadBlind, an F_GETLK of a write lock may answer none where only
// read locks are in the way (knfsd's quirk).
func runLockModel(t *testing.T, mounts []struct{ who, dir string }, name string, s uint64, ops int, allowReadBlind bool) {
	var clients []*lockScript
	for _, m := range mounts {
		clients = append(clients, startLockScript(t, m.who, filepath.Join(m.dir, name)))
	}
	model := make(lockModel, len(clients))
	rng := rand.New(rand.NewPCG(s, s^0x9e3779b97f4a7c15))
	var history []string // the steps so far, for a failure's report
	fail := func(format string, args ...any) {
		t.Helper()
		from := max(0, len(history)-30)
		locks, _ := os.ReadFile("/proc/locks") // knfsd's lockd holds its clients' locks here
		t.Fatalf("%s\nlast steps:\n  %s\nmodel before this step (cells 0..63, then 64 = the rest of the file):\n%s/proc/locks:\n%s",
			fmt.Sprintf(format, args...), strings.Join(history[from:], "\n  "), model, locks)
	}
	start := time.Now()
	budget := time.Duration(ops) * 320 * time.Millisecond // 80 s for 250 steps
	counts := map[string]int{}
	readBlind := map[string]int{} // F_GETLK w that saw no read lock, per client
	done := 0
	for ; done < ops; done++ {
		if time.Since(start) > budget {
			t.Logf("stopping after %d of %d steps: the %v budget is spent", done, ops, budget)
			break
		}
		c := rng.IntN(len(clients))
		var st, n int64
		switch r := rng.IntN(100); {
		case r < 12:
			st, n = 0, 0 // the whole file
		case r < 20:
			st, n = int64(rng.IntN(64)), 0 // to the end of the file
		default:
			st = int64(rng.IntN(64))
			n = 1 + int64(rng.IntN(int(min(16, 64-st))))
		}
		lo, hi := cells(st, n)
		typ := byte('r')
		if rng.IntN(2) == 0 {
			typ = 'w'
		}
		op := "set"
		switch r := rng.IntN(100); {
		case r < 25:
			typ = 'u'
		case r < 55:
			op = "get"
		}
		step := fmt.Sprintf("%s %c %d %d", op, typ, st, n)
		got := clients[c].do(t, step, time.Minute)
		history = append(history, fmt.Sprintf("%d: %s: %s -> %s", done, mounts[c].who, step, got))
		if f := strings.Fields(got); len(f) == 4 {
			counts[op+" "+f[0]+" "+f[1]]++ // "get lock r", "get lock w"
		} else {
			counts[op+" "+got]++
		}
		if strings.HasPrefix(got, "err") {
			fail("step %d: %s: %s: %s", done, mounts[c].who, step, got)
		}
		switch {
		case op == "set" && typ == 'u':
			if got != "ok" {
				fail("step %d: %s: unlock: %s, want ok", done, mounts[c].who, got)
			}
			model.set(c, typ, lo, hi)
		case op == "set":
			want := "ok"
			if model.conflict(c, typ, lo, hi, 0) {
				want = "denied"
			}
			if got != want {
				fail("step %d: %s: F_SETLK %s: %s, the model says %s", done, mounts[c].who, step, got, want)
			}
			if got == "ok" {
				model.set(c, typ, lo, hi)
			}
		default: // get
			conflict := model.conflict(c, typ, lo, hi, 0)
			if typ == 'w' && conflict && !model.conflict(c, 'r', lo, hi, 0) && got == "none" {
				// Only read locks of others are in the way, and the
				// answer is none: knfsd's quirk (see the test), which
				// the kernel client meets as well.
				readBlind[mounts[c].who]++
				break
			}
			if !conflict {
				if got != "none" {
					fail("step %d: %s: F_GETLK %s: %s, the model says no lock conflicts", done, mounts[c].who, step, got)
				}
				break
			}
			f := strings.Fields(got)
			if len(f) != 5 || f[0] != "lock" {
				fail("step %d: %s: F_GETLK %s: %s, the model says a lock conflicts", done, mounts[c].who, step, got)
			}
			rs, err1 := strconv.ParseInt(f[2], 10, 64)
			rn, err2 := strconv.ParseInt(f[3], 10, 64)
			if err1 != nil || err2 != nil || rs < 0 || rn < 0 {
				fail("step %d: %s: F_GETLK %s: %s: not a range", done, mounts[c].who, step, got)
			}
			rlo, rhi := cells(rs, rn)
			lo2, hi2 := max(lo, rlo), min(hi, rhi)
			if lo2 > hi2 || !model.conflict(c, typ, lo2, hi2, f[1][0]) {
				fail("step %d: %s: F_GETLK %s: %s: no lock of another client of that type overlaps the request there",
					done, mounts[c].who, step, got)
			}
		}
	}
	if len(readBlind) > 0 {
		t.Logf("F_GETLK of a write lock answered none where only read locks of others were in the way (knfsd's quirk), per client: %v", readBlind)
		if !allowReadBlind {
			t.Errorf("F_GETLK of a write lock did not see read locks: %v", readBlind)
		}
	}
	t.Logf("%d steps in %v: %v", done, time.Since(start).Round(time.Millisecond), counts)
	if counts["set denied"] == 0 || counts["get none"] == 0 || counts["set ok"] == 0 {
		t.Errorf("the steps never met a denial, a free F_GETLK or a granted lock: %v (choose another seed)", counts)
	}
}
