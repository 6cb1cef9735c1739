package host

import (
	"bufio"
	"bytes"
	"fmt"
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

	"github.com/rdmafs/rdmafs/test/e2e/e2etest"
)

// Unmounting a hard mount whose server is dead (README, "When the server
// is gone"): fusermount3 -u succeeds once no process holds the mount;
// calls under way for nobody (readahead, statfs of a killed program) are
// abandoned; the daemon whose mount is gone tries to write back what it
// holds for one major timeout (timeo × (retrans+1)), then exits, logging
// to syslog how many bytes of which files it could not write back.

// holdWriterEnv makes the test binary a program that writes and keeps
// the file open (see init).
const holdWriterEnv = "RDMAFS_TEST_HOLD_WRITER"

func init() {
	p := os.Getenv(holdWriterEnv)
	if p == "" {
		return
	}
	// Write RDMAFS_TEST_SIZE bytes to the file and keep it open: the data
	// stays in rdmafs's write-behind (a close would flush it).
	n, _ := strconv.Atoi(os.Getenv("RDMAFS_TEST_SIZE"))
	f, err := os.Create(p)
	if err == nil {
		_, err = f.Write(make([]byte, n))
	}
	if err != nil {
		fmt.Println("error", err)
		os.Exit(1)
	}
	fmt.Println("written")
	time.Sleep(time.Hour)
	os.Exit(0)
}

// syslogCapture receives what rdmafs daemons log to syslog: the test
// listens on /dev/log when the machine has no syslog daemon (CI has
// none), so the messages are seen where they go.
type syslogCapture struct {
	mu   sync.Mutex
	msgs []string
}

func captureSyslog(t *testing.T) *syslogCapture {
	t.Helper()
	if _, err := os.Stat("/dev/log"); err == nil {
		t.Skip("/dev/log exists (a syslog daemon runs): the test listens there itself and will not take it over")
	}
	c, err := net.ListenUnixgram("unixgram", &net.UnixAddr{Name: "/dev/log", Net: "unixgram"})
	if err != nil {
		t.Fatalf("listen on /dev/log: %v", err)
	}
	s := &syslogCapture{}
	go func() {
		buf := make([]byte, 8192)
		for {
			n, err := c.Read(buf)
			if err != nil {
				return
			}
			s.mu.Lock()
			s.msgs = append(s.msgs, string(buf[:n]))
			s.mu.Unlock()
		}
	}()
	t.Cleanup(func() {
		c.Close()
		os.Remove("/dev/log")
	})
	return s
}

// find returns the messages that contain sub.
func (s *syslogCapture) find(sub string) []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []string
	for _, m := range s.msgs {
		if strings.Contains(m, sub) {
			out = append(out, m)
		}
	}
	return out
}

// waitExit waits up to d for process pid to be gone.
func waitExit(pid int, d time.Duration) bool {
	for deadline := time.Now().Add(d); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		if err := syscall.Kill(pid, 0); err != nil {
			return true
		}
		if st, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid)); err == nil && strings.Contains(string(st), ") Z ") {
			return true // a zombie: its parent (init) will reap it
		}
	}
	return false
}

// unmountWithin runs fusermount3 -u until it succeeds, for up to d.
func unmountWithin(t *testing.T, mnt string, d time.Duration) {
	t.Helper()
	var out []byte
	var err error
	for deadline := time.Now().Add(d); time.Now().Before(deadline); time.Sleep(200 * time.Millisecond) {
		if out, err = exec.Command("fusermount3", "-u", mnt).CombinedOutput(); err == nil {
			return
		}
	}
	t.Fatalf("fusermount3 -u %s with no process using it: %v: %s", mnt, err, out)
}

func TestUnmountDeadHardMount(t *testing.T) {
	needHost(t)
	logs := captureSyslog(t)
	// timeo=10 (1 s), retrans=2: the daemon gives write-back 3 s.
	const grace = 3 * time.Second

	t.Run("calls-in-flight", func(t *testing.T) {
		s := startServer(t, "", 0, append(rdmaServe, "no_root_squash")...)
		mnt := s.mount(t, "hard,timeo=10,retrans=2")
		writeRandom(t, filepath.Join(mnt, "big"), 1, 16<<20)
		e2etest.DropCaches(t)
		pid := daemonOf(t, mnt)
		s.kill()
		// A read (with readahead behind it) and a statfs wait for the
		// dead server; then their programs are killed.
		var progs []*exec.Cmd
		for _, args := range [][]string{{"cat", filepath.Join(mnt, "big")}, {"stat", "-f", mnt}, {"ls", "-l", mnt}} {
			c := exec.Command(args[0], args[1:]...)
			if err := c.Start(); err != nil {
				t.Fatal(err)
			}
			progs = append(progs, c)
		}
		time.Sleep(time.Second)
		for _, c := range progs {
			c.Process.Kill()
		}
		for _, c := range progs {
			done := make(chan struct{})
			go func() { c.Wait(); close(done) }()
			select {
			case <-done:
			case <-time.After(10 * time.Second):
				t.Fatalf("%v still running 10 s after SIGKILL: its call on the dead mount was not abandoned", c.Args)
			}
		}
		unmountWithin(t, mnt, 10*time.Second)
		if !waitExit(pid, grace+10*time.Second) {
			t.Fatalf("rdmafs (pid %d) still runs %v after its mount is gone", pid, grace+10*time.Second)
		}
	})

	t.Run("writer-killed", func(t *testing.T) {
		// A shell opens a file while the server is there, and head writes
		// to it once the server is gone; then both are killed, the shell
		// first. head's close waits for the dead server and the shell's
		// close at exit waits behind it: SIGKILL must end each.
		s := startServer(t, "", 0, append(rdmaServe, "no_root_squash")...)
		mnt := s.mount(t, "hard,timeo=10,retrans=2")
		pid := daemonOf(t, mnt)
		w := exec.Command("sh", "-c", "exec 3>"+filepath.Join(mnt, "late")+"; sleep 2; head -c 3000000 /dev/urandom >&3")
		w.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
		if err := w.Start(); err != nil {
			t.Fatal(err)
		}
		defer syscall.Kill(-w.Process.Pid, syscall.SIGKILL)
		time.Sleep(500 * time.Millisecond)
		// Stopped, not killed: like a server that is gone from a network
		// that does not refuse, calls time out.
		s.cmd.Process.Signal(syscall.SIGSTOP)
		defer s.kill()
		time.Sleep(4 * time.Second)
		// The shell first: its close at exit waits behind head's.
		w.Process.Kill()
		done := make(chan struct{})
		go func() { w.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			t.Fatalf("a shell whose close waits behind another's on the dead mount still runs 10 s after SIGKILL:\n%s", taskStacks(w.Process.Pid))
		}
		syscall.Kill(-w.Process.Pid, syscall.SIGKILL)
		if left := groupAlive(w.Process.Pid, 10*time.Second); left != "" {
			t.Fatalf("a writer waiting on the dead mount still runs 10 s after SIGKILL:\n%s", left)
		}
		unmountWithin(t, mnt, 10*time.Second)
		if !waitExit(pid, grace+10*time.Second) {
			t.Fatalf("rdmafs (pid %d) still runs %v after its mount is gone", pid, grace+10*time.Second)
		}
	})

	t.Run("unwritten-data", func(t *testing.T) {
		s := startServer(t, "", 0, append(rdmaServe, "no_root_squash")...)
		mnt := s.mount(t, "hard,timeo=10,retrans=2")
		pid := daemonOf(t, mnt)
		const size = 5 << 20
		w := exec.Command(testBin, "-test.run=^$")
		w.Env = append(os.Environ(), holdWriterEnv+"="+filepath.Join(mnt, "held"), "RDMAFS_TEST_SIZE="+strconv.Itoa(size))
		stdout, _ := w.StdoutPipe()
		if err := w.Start(); err != nil {
			t.Fatal(err)
		}
		defer w.Process.Kill()
		if line, _ := bufio.NewReader(stdout).ReadString('\n'); line != "written\n" {
			t.Fatalf("writer: %q", line)
		}
		s.kill()
		w.Process.Kill()
		w.Wait()
		start := time.Now()
		unmountWithin(t, mnt, 10*time.Second)
		if !waitExit(pid, grace+10*time.Second) {
			t.Fatalf("rdmafs (pid %d) still runs %v after its mount is gone, holding unwritten data", pid, grace+10*time.Second)
		}
		t.Logf("the daemon exited %v after the unmount", time.Since(start).Round(time.Millisecond))
		re := regexp.MustCompile(`unmounted ` + regexp.QuoteMeta(mnt) + `: (\d+) bytes of /held \(file id \d+\) not written back`)
		var got []string
		for _, m := range logs.find(mnt) {
			if sm := re.FindStringSubmatch(m); sm != nil {
				got = append(got, sm[1])
			}
		}
		if len(got) != 1 || got[0] != strconv.Itoa(size) {
			t.Errorf("syslog about %s: %q; want one message that %d bytes of /held were not written back", mnt, logs.find(mnt), size)
		}
	})
}

// groupAlive waits up to d for every process of process group pgid to
// be gone (or a zombie) and returns the state and kernel stacks of those
// left, "" if none.
func groupAlive(pgid int, d time.Duration) string {
	for deadline := time.Now().Add(d); ; time.Sleep(100 * time.Millisecond) {
		var left strings.Builder
		stats, _ := filepath.Glob("/proc/[0-9]*/stat")
		for _, p := range stats {
			b, err := os.ReadFile(p)
			i := bytes.LastIndexByte(b, ')')
			if err != nil || i < 0 {
				continue
			}
			f := strings.Fields(string(b[i+1:])) // state, ppid, pgrp, ...
			if len(f) > 2 && f[2] == strconv.Itoa(pgid) && f[0] != "Z" {
				pid, _ := strconv.Atoi(filepath.Base(filepath.Dir(p)))
				left.WriteString(taskStacks(pid))
			}
		}
		if left.Len() == 0 || time.Now().After(deadline) {
			return left.String()
		}
	}
}

// taskStacks returns the state, flags and kernel stack of each thread of
// process pid, to show where a process that does not die waits.
func taskStacks(pid int) string {
	var b strings.Builder
	tasks, _ := filepath.Glob(fmt.Sprintf("/proc/%d/task/*", pid))
	for _, task := range tasks {
		stat, _ := os.ReadFile(filepath.Join(task, "stat"))
		stack, _ := os.ReadFile(filepath.Join(task, "stack"))
		fmt.Fprintf(&b, "%s\n%s\n", stat, stack)
	}
	return b.String()
}
