// Package procstat reads what the benchmarks report of a process and of the
// whole machine from /proc: CPU time (the counters getrusage sums, as
// /proc/PID/stat shows them for every thread of the process), read and write
// system calls (/proc/PID/io), context switches (every thread's
// /proc/PID/task/TID/status) and memory (VmRSS, VmLck, VmPin of
// /proc/PID/status), the machine's busy CPU time (/proc/stat), and the RPCs
// an NFS mount has sent (its mountstats block, mountstats.go).
package procstat

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// clockTick is the unit of the CPU times of /proc/PID/stat and /proc/stat
// (USER_HZ, 100 on every Linux architecture the project builds for).
const clockTick = 10 * time.Millisecond

// Process is what one process has used so far.
type Process struct {
	CPU      time.Duration // user and system time of all its threads, dead ones included
	Syscalls uint64        // read-like and write-like system calls (syscr + syscw)
	CtxSw    uint64        // context switches of its live threads, voluntary and not
	// MonitorCtxSw is CtxSw's share of the Go runtime's monitor thread
	// (sysmon): the process's second thread, which runtime.main starts
	// before any other. It sleeps 20 µs at a time while the program runs
	// and is woken by the system call that ends an idle spell, so it
	// counts the program's idle-to-busy transitions more than its work.
	MonitorCtxSw uint64
}

// Sub returns what p used since earlier.
func (p Process) Sub(earlier Process) Process {
	return Process{CPU: p.CPU - earlier.CPU, Syscalls: p.Syscalls - earlier.Syscalls, CtxSw: p.CtxSw - earlier.CtxSw,
		MonitorCtxSw: p.MonitorCtxSw - earlier.MonitorCtxSw}
}

// ReadProcess reads the counters of process pid.
func ReadProcess(pid int) (Process, error) {
	var p Process
	dir := "/proc/" + strconv.Itoa(pid)
	stat, err := os.ReadFile(dir + "/stat")
	if err != nil {
		return p, err
	}
	if p.CPU, err = parseStatCPU(stat); err != nil {
		return p, fmt.Errorf("%s/stat: %w", dir, err)
	}
	io, err := os.ReadFile(dir + "/io")
	if err != nil {
		return p, err
	}
	if p.Syscalls, err = parseIOSyscalls(io); err != nil {
		return p, fmt.Errorf("%s/io: %w", dir, err)
	}
	tasks, _ := filepath.Glob(dir + "/task/*/status")
	monitor := monitorTask(pid, tasks)
	for _, t := range tasks {
		st, err := os.ReadFile(t)
		if err != nil {
			continue // the thread ended meanwhile
		}
		fields := statusFields(st)
		n := fields["voluntary_ctxt_switches"] + fields["nonvoluntary_ctxt_switches"]
		p.CtxSw += n
		if t == monitor {
			p.MonitorCtxSw = n
		}
	}
	return p, nil
}

// parseStatCPU returns utime + stime of a /proc/PID/stat line.
func parseStatCPU(stat []byte) (time.Duration, error) {
	// the command name (field 2) may hold spaces and parentheses: fields
	// are counted from the last ')'
	i := bytes.LastIndexByte(stat, ')')
	if i < 0 {
		return 0, fmt.Errorf("no command name in %q", stat)
	}
	f := strings.Fields(string(stat[i+1:]))
	// f[0] is field 3 (state); utime and stime are fields 14 and 15
	if len(f) < 13 {
		return 0, fmt.Errorf("%d fields after the command name, want at least 13", len(f))
	}
	utime, err1 := strconv.ParseUint(f[11], 10, 64)
	stime, err2 := strconv.ParseUint(f[12], 10, 64)
	if err1 != nil || err2 != nil {
		return 0, fmt.Errorf("utime %q, stime %q: not numbers", f[11], f[12])
	}
	return time.Duration(utime+stime) * clockTick, nil
}

// parseIOSyscalls returns syscr + syscw of /proc/PID/io.
func parseIOSyscalls(io []byte) (uint64, error) {
	var n uint64
	found := 0
	for line := range strings.Lines(string(io)) {
		name, value, ok := strings.Cut(strings.TrimSpace(line), ": ")
		if !ok || (name != "syscr" && name != "syscw") {
			continue
		}
		v, err := strconv.ParseUint(value, 10, 64)
		if err != nil {
			return 0, fmt.Errorf("%s %q: not a number", name, value)
		}
		n += v
		found++
	}
	if found != 2 {
		return 0, fmt.Errorf("syscr or syscw missing")
	}
	return n, nil
}

// statusFields returns the numeric fields of a /proc/PID/status file, sizes
// in kB as the file gives them.
func statusFields(status []byte) map[string]uint64 {
	m := map[string]uint64{}
	sc := bufio.NewScanner(bytes.NewReader(status))
	for sc.Scan() {
		name, value, ok := strings.Cut(sc.Text(), ":")
		if !ok {
			continue
		}
		value = strings.TrimSuffix(strings.TrimSpace(value), " kB")
		if v, err := strconv.ParseUint(value, 10, 64); err == nil {
			m[name] = v
		}
	}
	return m
}

// Memory is a process's memory at one moment, in bytes.
type Memory struct {
	RSS    uint64 // resident (VmRSS)
	Locked uint64 // mlocked (VmLck)
	Pinned uint64 // pinned by the kernel for devices, as RDMA registrations are (VmPin)
}

// Max returns the larger of each figure of m and o.
func (m Memory) Max(o Memory) Memory {
	return Memory{RSS: max(m.RSS, o.RSS), Locked: max(m.Locked, o.Locked), Pinned: max(m.Pinned, o.Pinned)}
}

// ReadMemory reads the memory of process pid.
func ReadMemory(pid int) (Memory, error) {
	st, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		return Memory{}, err
	}
	f := statusFields(st)
	if _, ok := f["VmRSS"]; !ok {
		return Memory{}, fmt.Errorf("/proc/%d/status: no VmRSS (a kernel thread, or gone)", pid)
	}
	return Memory{RSS: f["VmRSS"] << 10, Locked: f["VmLck"] << 10, Pinned: f["VmPin"] << 10}, nil
}

// MachineCPU returns the busy CPU time of all CPUs of the machine (user,
// nice, system, irq, softirq and steal of /proc/stat's cpu line): what
// every process and the kernel itself spent, including the kernel NFS
// client's and server's threads, which no process accounts for.
func MachineCPU() (time.Duration, error) {
	st, err := os.ReadFile("/proc/stat")
	if err != nil {
		return 0, err
	}
	return parseMachineCPU(st)
}

func parseMachineCPU(st []byte) (time.Duration, error) {
	line, _, _ := bytes.Cut(st, []byte("\n"))
	f := strings.Fields(string(line))
	if len(f) < 9 || f[0] != "cpu" {
		return 0, fmt.Errorf("/proc/stat: first line %q is not the cpu total", line)
	}
	var busy uint64
	// user nice system idle iowait irq softirq steal: all but idle and iowait
	for _, i := range []int{1, 2, 3, 6, 7, 8} {
		v, err := strconv.ParseUint(f[i], 10, 64)
		if err != nil {
			return 0, fmt.Errorf("/proc/stat: field %d %q: not a number", i, f[i])
		}
		busy += v
	}
	return time.Duration(busy) * clockTick, nil
}

// FindMountDaemon returns the pid of the process whose command line ends
// with mountpoint and whose program is named prog (rdmafs serving a mount,
// which runs as `rdmafs [-o OPTIONS] SOURCE MOUNTPOINT`), 0 if none.
func FindMountDaemon(prog, mountpoint string) int {
	matches, _ := filepath.Glob("/proc/[0-9]*/cmdline")
	for _, p := range matches {
		data, err := os.ReadFile(p)
		if err != nil {
			continue
		}
		args := strings.Split(strings.TrimRight(string(data), "\x00"), "\x00")
		if len(args) > 2 && filepath.Base(args[0]) == prog && args[len(args)-1] == mountpoint {
			pid, _ := strconv.Atoi(filepath.Base(filepath.Dir(p)))
			return pid
		}
	}
	return 0
}

// monitorTask is the status file, among tasks (/proc/PID/task/TID/status),
// of the thread with the lowest TID after the main thread's: a Go
// program's sysmon. "" if there is none.
func monitorTask(pid int, tasks []string) string {
	best, bestTID := "", 0
	for _, t := range tasks {
		tid, err := strconv.Atoi(filepath.Base(filepath.Dir(t)))
		if err != nil || tid == pid {
			continue
		}
		if best == "" || tid < bestTID {
			best, bestTID = t, tid
		}
	}
	return best
}
