package procstat

import (
	"os"
	"testing"
	"time"
)

func TestParseStatCPU(t *testing.T) {
	// a command name with a space and a parenthesis; utime 150, stime 50
	line := []byte("4242 (rdm fs)) S 1 4242 4242 0 -1 4194560 1000 0 0 0 150 50 0 0 20 0 9 0 100 100000 200 18446744073709551615")
	got, err := parseStatCPU(line)
	if err != nil || got != 2*time.Second {
		t.Errorf("parseStatCPU = %v, %v; want 2s", got, err)
	}
	if _, err := parseStatCPU([]byte("4242 (x) S 1 2")); err == nil {
		t.Errorf("a short line: no error")
	}
}

func TestParseIOSyscalls(t *testing.T) {
	io := []byte("rchar: 6976\nwchar: 10\nsyscr: 10\nsyscw: 32\nread_bytes: 0\n")
	if n, err := parseIOSyscalls(io); err != nil || n != 42 {
		t.Errorf("parseIOSyscalls = %d, %v; want 42", n, err)
	}
	if _, err := parseIOSyscalls([]byte("rchar: 1\nsyscr: 3\n")); err == nil {
		t.Errorf("no syscw: no error")
	}
}

func TestParseMachineCPU(t *testing.T) {
	// user 100, nice 1, system 50, idle 9999, iowait 77, irq 2, softirq 3, steal 4
	st := []byte("cpu  100 1 50 9999 77 2 3 4 0 0\ncpu0 1 2 3 4 5 6 7 8 0 0\n")
	if got, err := parseMachineCPU(st); err != nil || got != 1600*time.Millisecond {
		t.Errorf("parseMachineCPU = %v, %v; want 1.6s", got, err)
	}
	if _, err := parseMachineCPU([]byte("intr 1 2 3\n")); err == nil {
		t.Errorf("no cpu line: no error")
	}
}

// TestSelf reads this test process, which has surely used CPU, made
// system calls and holds memory.
func TestSelf(t *testing.T) {
	before, err := ReadProcess(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	for end := time.Now().Add(30 * time.Millisecond); time.Now().Before(end); {
	}
	for range 100 {
		if _, err := os.ReadFile("/proc/self/stat"); err != nil {
			t.Fatal(err)
		}
	}
	after, err := ReadProcess(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	d := after.Sub(before)
	if d.Syscalls < 100 {
		t.Errorf("100 reads counted as %d system calls", d.Syscalls)
	}
	if after.CPU <= 0 {
		t.Errorf("CPU time %v", after.CPU)
	}
	m, err := ReadMemory(os.Getpid())
	if err != nil || m.RSS == 0 {
		t.Errorf("ReadMemory = %+v, %v", m, err)
	}
	if c, err := MachineCPU(); err != nil || c <= 0 {
		t.Errorf("MachineCPU = %v, %v", c, err)
	}
}

func TestMonitorTask(t *testing.T) {
	tasks := []string{"/proc/100/task/100/status", "/proc/100/task/107/status", "/proc/100/task/101/status", "/proc/100/task/99x/status"}
	if got := monitorTask(100, tasks); got != "/proc/100/task/101/status" {
		t.Errorf("monitorTask = %q, want the lowest TID after the main thread's, 101", got)
	}
	if got := monitorTask(100, tasks[:1]); got != "" {
		t.Errorf("monitorTask of a single-threaded process = %q, want none", got)
	}
}

// TestMonitorSwitches: a Go program that goes idle and busy again makes
// its monitor thread (sysmon) switch, and that is a part of all its
// threads' switches.
func TestMonitorSwitches(t *testing.T) {
	before, err := ReadProcess(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	for range 200 {
		time.Sleep(200 * time.Microsecond)
		if _, err := os.ReadFile("/proc/self/stat"); err != nil {
			t.Fatal(err)
		}
	}
	after, err := ReadProcess(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	d := after.Sub(before)
	if d.MonitorCtxSw == 0 || d.MonitorCtxSw >= d.CtxSw {
		t.Errorf("200 idle spells: the monitor switched %d times of all threads' %d, want some and not all", d.MonitorCtxSw, d.CtxSw)
	}
	t.Logf("200 idle spells: %d context switches, %d of them the monitor's", d.CtxSw, d.MonitorCtxSw)
}
