package main

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/rdmafs/rdmafs/bench/procstat"
)

// cost is what the operations of one workload cost.
type cost struct {
	ops     int64         // operations the figure counts (I/Os, files, entries)
	machine time.Duration // busy CPU time of the whole guest
	rpcs    uint64        // RPCs the mount sent
	hasRPCs bool          // rpcs was counted
	proc    *procstat.Process
	err     error // why the figures are missing
}

// perOp returns d per operation in µs.
func (c cost) perOp(d time.Duration) float64 {
	return float64(d.Microseconds()) / float64(c.ops)
}

// rpcsPerOp is the RPCs per operation.
func (c cost) rpcsPerOp() float64 { return float64(c.rpcs) / float64(c.ops) }

// summary is the cost in one line, after the figure.
func (c cost) summary() string {
	if c.ops == 0 || c.err != nil {
		return ""
	}
	s := fmt.Sprintf("  guest %.0f µs/op", c.perOp(c.machine))
	if c.hasRPCs {
		s += fmt.Sprintf(" %.2f RPCs/op", c.rpcsPerOp())
	}
	if c.proc != nil {
		s += fmt.Sprintf(", rdmafs %.0f µs/op %.1f syscalls/op %.1f ctxsw/op", c.perOp(c.proc.CPU),
			float64(c.proc.Syscalls)/float64(c.ops), float64(c.proc.CtxSw)/float64(c.ops))
	}
	return s
}

// meter measures the workloads of one mount: CPU time around each, the
// rdmafs process's counters, memory, and CPU profiles.
type meter struct {
	c       config
	tg      target
	dir     string // the mount point
	pid     int    // the rdmafs process serving the mount, 0 for the kernel client
	profile string // the RDMAFS_CPUPROFILE_SIGNALED path, "" for none
	nprof   int    // profiles started

	mu      sync.Mutex
	mem     memoryUse
	stop    chan struct{}
	stopped chan struct{}
}

func newMeter(c config, tg target) *meter {
	m := &meter{c: c, tg: tg}
	if tg.rdmafs && c.outDir != "" && len(c.profile) > 0 {
		m.profile = filepath.Join(c.outDir, "cpu-"+fileName(tg.name))
	}
	return m
}

// fileName makes a column's name (rdmafs-rdma@GOMAXPROCS=1) fit a file
// name.
func fileName(s string) string {
	return strings.Map(func(r rune) rune {
		if r == '-' || r == '.' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' {
			return r
		}
		return '_'
	}, s)
}

// mountEnv is the environment of the mount command: the signaled CPU
// profile of rdmafs (cmd/rdmafs/profile.go).
func (m *meter) mountEnv() []string {
	if m.profile == "" {
		return nil
	}
	return []string{"RDMAFS_CPUPROFILE_SIGNALED=" + m.profile}
}

// memoryPoll is how often the memory of rdmafs is sampled under load.
const memoryPoll = 250 * time.Millisecond

// attach finds the rdmafs process serving dir, records its idle memory and
// starts sampling its memory.
func (m *meter) attach(dir string) error {
	m.dir = dir
	if !m.tg.rdmafs {
		return nil
	}
	m.pid = procstat.FindMountDaemon(filepath.Base(m.tg.bin), dir)
	if m.pid == 0 {
		return fmt.Errorf("no rdmafs process serves %s", dir)
	}
	time.Sleep(time.Second) // settled after the mount
	idle, err := procstat.ReadMemory(m.pid)
	m.mem = memoryUse{idle: idle, peak: idle, err: err}
	m.stop, m.stopped = make(chan struct{}), make(chan struct{})
	go func() {
		defer close(m.stopped)
		t := time.NewTicker(memoryPoll)
		defer t.Stop()
		for {
			select {
			case <-m.stop:
				return
			case <-t.C:
			}
			if cur, err := procstat.ReadMemory(m.pid); err == nil {
				m.mu.Lock()
				m.mem.peak = m.mem.peak.Max(cur)
				m.mu.Unlock()
			}
		}
	}()
	return nil
}

// detach stops the memory sampling and returns what it found.
func (m *meter) detach() memoryUse {
	if m.stop == nil {
		return memoryUse{}
	}
	close(m.stop)
	<-m.stopped
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.mem
}

// run runs workload key and records what it cost. The RPCs are counted
// outside the process's counters: reading rdmafs's statistics is a FUSE
// request.
func (m *meter) run(key string, w func() result) result {
	rpcs0, rpcErr := procstat.MountRPCs(m.dir)
	machine0, err := procstat.MachineCPU()
	var proc0 procstat.Process
	if err == nil && m.pid != 0 {
		proc0, err = procstat.ReadProcess(m.pid)
	}
	profiled := m.startProfile(key)
	r := w()
	if profiled {
		m.stopProfile(key)
	}
	if err != nil {
		r.cost.err = err
		return r
	}
	machine1, err := procstat.MachineCPU()
	if err != nil {
		r.cost.err = err
		return r
	}
	r.cost.machine = machine1 - machine0
	if m.pid != 0 {
		proc1, err := procstat.ReadProcess(m.pid)
		if err != nil {
			r.cost.err = err
			return r
		}
		d := proc1.Sub(proc0)
		r.cost.proc = &d
	}
	if rpcs1, err := procstat.MountRPCs(m.dir); err == nil && rpcErr == nil {
		r.cost.rpcs, r.cost.hasRPCs = rpcs1-rpcs0, true
	}
	return r
}

// startProfile starts a CPU profile of rdmafs if workload key is to be
// profiled.
func (m *meter) startProfile(key string) bool {
	if m.profile == "" || m.pid == 0 || !m.c.profile[key] {
		return false
	}
	if err := sendSignal(m.pid, "USR1"); err != nil {
		fmt.Fprintf(os.Stderr, "bench-e2e: starting the profile of %s: %v\n", key, err)
		return false
	}
	m.nprof++
	return true
}

// stopProfile ends the profile of workload key and moves it to
// OUT/cpu-MOUNT-WORKLOAD.pprof.
func (m *meter) stopProfile(key string) {
	if err := sendSignal(m.pid, "USR2"); err != nil {
		fmt.Fprintf(os.Stderr, "bench-e2e: ending the profile of %s: %v\n", key, err)
		return
	}
	// rdmafs renames the profile into place once it is complete
	written := fmt.Sprintf("%s.mount.%d", m.profile, m.nprof)
	dest := fmt.Sprintf("%s-%s.pprof", m.profile, key)
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		if err := os.Rename(written, dest); err == nil {
			fmt.Printf("    CPU profile of rdmafs: %s\n", dest)
			return
		}
	}
	fmt.Fprintf(os.Stderr, "bench-e2e: the profile %s did not appear\n", written)
}

func sendSignal(pid int, sig string) error {
	return command(10*time.Second, nil, "kill", "-"+sig, fmt.Sprint(pid))
}

// printCostTable prints one row per workload: for each column the guest's
// CPU µs and the mount's RPCs per operation, and for an rdmafs column its
// own CPU µs, system calls and context switches per operation.
func printCostTable(w io.Writer, cols []string, table map[string]map[string]result) {
	head := []string{"workload", "op"}
	rdmafsCol := map[string]bool{}
	for _, c := range cols {
		head = append(head, c+" guest µs", "RPCs")
		for _, r := range table[c] {
			if r.cost.proc != nil {
				rdmafsCol[c] = true
			}
		}
		if rdmafsCol[c] {
			head = append(head, c+" µs", "syscalls", "ctxsw", "sysmon")
		}
	}
	lines := [][]string{head}
	for _, r := range rows {
		line := []string{r.label, opName(r.key)}
		for _, c := range cols {
			res := table[c][r.key]
			k := res.cost
			ok := res.err == nil && k.err == nil && k.ops > 0
			if ok {
				line = append(line, fmt.Sprintf("%.0f", k.perOp(k.machine)))
			} else {
				line = append(line, "-")
			}
			if ok && k.hasRPCs {
				line = append(line, fmt.Sprintf("%.2f", k.rpcsPerOp()))
			} else {
				line = append(line, "-")
			}
			if rdmafsCol[c] {
				if ok && k.proc != nil {
					line = append(line, fmt.Sprintf("%.0f", k.perOp(k.proc.CPU)),
						fmt.Sprintf("%.1f", float64(k.proc.Syscalls)/float64(k.ops)),
						fmt.Sprintf("%.1f", float64(k.proc.CtxSw)/float64(k.ops)),
						fmt.Sprintf("%.1f", float64(k.proc.MonitorCtxSw)/float64(k.ops)))
				} else {
					line = append(line, "-", "-", "-", "-")
				}
			}
		}
		lines = append(lines, line)
	}
	writeAligned(w, lines)
}

// opName says what one operation of a workload is.
func opName(key string) string {
	switch key {
	case "seqwrite", "seqread", "bufwrite", "bufread":
		return "1 MiB"
	case "randread", "randwrite", "parallel":
		return "4 KiB"
	case "lsl":
		return "entry"
	}
	return "file"
}

// printMemoryTable prints the memory of each rdmafs column, idle and at its
// peak.
func printMemoryTable(w io.Writer, cols []string, mem map[string]memoryUse) {
	lines := [][]string{{"memory (MiB)"}}
	var have []string
	for _, c := range cols {
		if _, ok := mem[c]; ok {
			have = append(have, c)
			lines[0] = append(lines[0], c)
		}
	}
	mib := func(b uint64) string { return fmt.Sprintf("%.1f", float64(b)/(1<<20)) }
	for _, f := range []struct {
		label string
		get   func(memoryUse) uint64
	}{
		{"idle resident (VmRSS)", func(m memoryUse) uint64 { return m.idle.RSS }},
		{"idle pinned (VmPin)", func(m memoryUse) uint64 { return m.idle.Pinned }},
		{"idle locked (VmLck)", func(m memoryUse) uint64 { return m.idle.Locked }},
		{"peak resident", func(m memoryUse) uint64 { return m.peak.RSS }},
		{"peak pinned", func(m memoryUse) uint64 { return m.peak.Pinned }},
		{"peak locked", func(m memoryUse) uint64 { return m.peak.Locked }},
	} {
		line := []string{f.label}
		for _, c := range have {
			if mem[c].err != nil {
				line = append(line, "error")
				continue
			}
			line = append(line, mib(f.get(mem[c])))
		}
		lines = append(lines, line)
	}
	writeAligned(w, lines)
}
