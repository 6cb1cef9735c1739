// Command bench-e2e runs the e2e benchmark inside the e2e test system (the
// qemu guest of `make bench-e2e`, or the Docker container): the same
// workloads through every client mount of knfsd's export in one boot, and
// tables of the figures, of what each operation cost and of rdmafs's
// memory, with ratios against the kernel NFS/RDMA client. Every mount is
// made first; then each workload runs through each mount in turn, so that
// the figures of a row are taken close together (on a shared machine the
// same figure moves by up to 2x in a few minutes).
//
// Mounts (columns): knfs-rdma (mount -t nfs -o vers=3,proto=rdma,port=20049),
// knfs-rdma-nconnect4 (the same with nconnect=4: four connections, the
// kernel client's answer to parallel I/O, a second reference for the
// parallel row), knfs-tcp (vers=3,proto=tcp), rdmafs-tcp (rdmafs -o
// proto=tcp,vers=3) and rdmafs-rdma (proto=rdma), and rdmafs-tcp-dev and
// rdmafs-rdma-dev, the same with noio_uring after -rdmafs-o (so that
// -rdmafs-o io_uring weighs the FUSE channels side by side); each rdmafs
// mount logs the FUSE channel it got. A column rdmafs-rdma@NAME=VALUE is an rdmafs
// mount whose process runs with NAME=VALUE in its environment
// (GOMAXPROCS=1, say), to weigh a setting side by side. With -baseline BIN
// (another build of rdmafs, an earlier commit's) every rdmafs column has a
// twin, baseline:NAME, the same mount made by BIN, and a table of this
// build against it: the figure, rdmafs's CPU and its context switches per
// operation, each as a ratio.
//
// Workloads (rows, in the order they run):
//   - fio sequential 1 MiB write and read of one -size file, O_DIRECT,
//     libaio, iodepth 4; each stops after -runtime;
//   - fio 4 KiB random read and write at iodepth 16, O_DIRECT, libaio, on
//     its first -rand-size bytes, for -rand-runtime each;
//   - the way most programs do I/O: a cp-like buffered sequential write of a
//     new -size file in 1 MiB write(2)s with an fsync at the end, then a
//     sequential read of it in 1 MiB read(2)s after dropping the caches
//     (each stops after -runtime);
//   - fio with numjobs=4 on 4 files of -rand-size/4 each, 4 KiB random
//     reads and writes (half each), iodepth 16 per job, for -rand-runtime;
//   - create of -files empty files; `ls -l` of their directory after
//     dropping the caches; stat of each after dropping the caches; unlink.
//
// Where a mount refuses O_DIRECT (some FUSE setups) a fio job is rerun
// buffered and its figure marked "b". Each row prints its ratio to the first
// column and, for rdmafs-rdma, its target (the kernel client's speed on
// streaming I/O, half of it on small operations) and whether the figure
// meets it.
//
// Cost per operation: around each workload it reads the busy CPU time of
// the whole guest (/proc/stat: the kernel client's and server's threads
// count there, as do fio and this program, alike for every column) and, for
// an rdmafs mount, the CPU time, read and write system calls and context
// switches of the rdmafs process (/proc/PID/stat, io, task/*/status).
// Memory: rdmafs's resident, locked and pinned memory (VmRSS, VmLck, VmPin)
// right after the mount and at its peak under the workloads.
//
// It reads its setup like the e2e tests: LAB_ADDR, LAB_EXPORT and
// RDMAFS_BIN (test/e2e/run-tests.sh --bench sets them). With -out DIR it
// also writes the table as DIR/bench-e2e.csv and draws it as
// DIR/bench-e2e.svg (run-tests.sh gives the checkout's bench/out), and CPU
// profiles of rdmafs during the -profile workloads as
// DIR/cpu-MOUNT-WORKLOAD.pprof (go tool pprof -top FILE).
package main

import (
	"flag"
	"fmt"
	"io"
	"math"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/rdmafs/rdmafs/bench/chart"
	"github.com/rdmafs/rdmafs/bench/procstat"
)

type config struct {
	addr, export, rdmafs string
	baseline             string // another build's rdmafs, for the baseline: columns
	size, randSize       int64
	runtime, randRuntime time.Duration
	files                int
	targets              []string
	workloads            map[string]bool // nil: all
	profile              map[string]bool // workloads to profile rdmafs in
	outDir               string
	rdmafsOpts           string // more mount options of the rdmafs mounts
}

// wants reports whether workload key is to run.
func (c *config) wants(key string) bool { return c.workloads == nil || c.workloads[key] }

// target is one client mount of the export.
type target struct {
	name   string
	rdmafs bool   // an rdmafs mount: a process to measure and profile
	bin    string // the rdmafs binary that makes it
	mount  func(dir string, env []string) error
	umnt   func(dir string) error
}

// result is one figure: a value in unit, or the error that prevented it,
// and what its operations cost.
type result struct {
	value    float64
	buffered bool
	err      error
	cost     cost
}

// rows are the workloads, in table order, each with the ratio
// rdmafs-rdma/knfs-rdma that is its target.
var rows = []struct {
	key, label, unit string
	target           float64
}{
	{"seqwrite", "seq write 1M direct", "MiB/s", 1.0},
	{"seqread", "seq read 1M direct", "MiB/s", 1.0},
	{"bufwrite", "cp-like write 1M + fsync", "MiB/s", 1.0},
	{"bufread", "seq read 1M cold cache", "MiB/s", 1.0},
	{"randread", "rand read 4k qd16", "IOPS", 0.5},
	{"randwrite", "rand write 4k qd16", "IOPS", 0.5},
	{"parallel", "fio numjobs=4 4 files", "IOPS", 0.5},
	{"create", "create empty files", "ops/s", 0.5},
	{"lsl", "ls -l cold", "entries/s", 0.5},
	{"stat", "stat (cold cache)", "ops/s", 0.5},
	{"unlink", "unlink (cold cache)", "ops/s", 0.5},
}

// targetColumn is the column whose ratio the targets are for.
const targetColumn = "rdmafs-rdma"

func main() {
	var c config
	var size, randSize, targets, workloads, profile string
	flag.StringVar(&size, "size", envOr("BENCH_SIZE", "1g"), "size of the sequential file (k, m, g suffixes); env BENCH_SIZE")
	flag.StringVar(&randSize, "rand-size", envOr("BENCH_RAND_SIZE", "256m"), "bytes of the sequential file that the random jobs use, and of the parallel job's 4 files together; env BENCH_RAND_SIZE")
	flag.DurationVar(&c.runtime, "runtime", durEnv("BENCH_RUNTIME", 60*time.Second), "time limit of each sequential job; env BENCH_RUNTIME")
	flag.DurationVar(&c.randRuntime, "rand-runtime", durEnv("BENCH_RAND_RUNTIME", 20*time.Second), "duration of each random job; env BENCH_RAND_RUNTIME")
	flag.IntVar(&c.files, "files", intEnv("BENCH_FILES", 2000), "files of the metadata workload; env BENCH_FILES")
	flag.StringVar(&targets, "targets", envOr("BENCH_TARGETS", "knfs-rdma,knfs-tcp,rdmafs-tcp,rdmafs-rdma"),
		"mounts to measure (an rdmafs mount with the environment of its process changed: rdmafs-rdma@NAME=VALUE+NAME=VALUE); env BENCH_TARGETS")
	flag.StringVar(&workloads, "workloads", envOr("BENCH_WORKLOADS", ""), "workloads to run (keys: "+rowKeys()+"), all if empty; env BENCH_WORKLOADS")
	flag.StringVar(&profile, "profile", envOr("BENCH_PROFILE", "randread,create"), "workloads during which rdmafs's CPU is profiled (into -out); env BENCH_PROFILE")
	flag.StringVar(&c.rdmafsOpts, "rdmafs-o", envOr("BENCH_RDMAFS_OPTS", ""), "more mount options of the rdmafs mounts; env BENCH_RDMAFS_OPTS")
	flag.StringVar(&c.baseline, "baseline", envOr("BENCH_BASELINE_BIN", ""), "another build of rdmafs (an earlier commit's): every rdmafs column gets a twin mounted by it, baseline:NAME; env BENCH_BASELINE_BIN")
	flag.StringVar(&c.outDir, "out", envOr("BENCH_OUT", ""), "directory for bench-e2e.csv, bench-e2e.svg and the profiles; none if empty; env BENCH_OUT")
	flag.Parse()
	var err error
	if c.size, err = parseSize(size); err != nil {
		fatalf("-size: %v", err)
	}
	if c.randSize, err = parseSize(randSize); err != nil {
		fatalf("-rand-size: %v", err)
	}
	if c.workloads, err = keySet(workloads); err != nil {
		fatalf("-workloads: %v", err)
	}
	if c.profile, err = keySet(profile); err != nil {
		fatalf("-profile: %v", err)
	}
	c.targets = withBaselines(strings.Split(targets, ","), c.baseline != "")
	c.addr, c.export = os.Getenv("LAB_ADDR"), os.Getenv("LAB_EXPORT")
	c.rdmafs = os.Getenv("RDMAFS_BIN")
	if c.addr == "" || c.export == "" {
		fatalf("LAB_ADDR and LAB_EXPORT are unset: run inside the e2e test system (make bench-e2e)")
	}
	if _, err := exec.LookPath("fio"); err != nil {
		fatalf("fio not found: %v", err)
	}
	if err := checkSpace(c); err != nil {
		fatalf("%v", err)
	}
	if c.outDir != "" {
		if err := os.MkdirAll(c.outDir, 0o755); err != nil {
			fatalf("%v", err)
		}
	}

	start := time.Now()
	tgs := makeTargets(c)
	var cols []string
	notes := []string{}
	for _, tg := range tgs {
		cols = append(cols, tg.name)
	}
	table, allMem, mountErrs := measureAll(c, tgs)
	failed := false
	mem := map[string]memoryUse{}
	for _, tg := range tgs {
		if err := mountErrs[tg.name]; err != nil {
			notes = append(notes, fmt.Sprintf("%s: %v", tg.name, err))
			failed = true
			continue
		}
		if m, ok := allMem[tg.name]; ok && tg.rdmafs {
			mem[tg.name] = m
		}
		for _, r := range rows {
			if e := table[tg.name][r.key].err; e != nil {
				notes = append(notes, fmt.Sprintf("%s %s: %v", tg.name, r.key, e))
				failed = true
			}
		}
	}
	fmt.Println()
	fmt.Printf("=== bench-e2e %s: sequential file %s, random %s for %v, %d files; server %s:%s; clock %s; %v\n",
		time.Now().Format("2006-01-02 15:04"), size, randSize, c.randRuntime, c.files, c.addr, c.export, clocksource(), time.Since(start).Round(time.Second))
	printTable(os.Stdout, cols, table)
	for _, col := range table {
		if anyBuffered(col) {
			fmt.Println("b: buffered I/O (the mount refused O_DIRECT): fsync at the end of writes, caches dropped before reads")
			break
		}
	}
	fmt.Println()
	fmt.Println("=== cost per operation: CPU µs of the whole guest and RPCs of the mount; of an rdmafs mount also its own CPU µs, read/write system calls and context switches")
	printCostTable(os.Stdout, cols, table)
	if c.baseline != "" {
		fmt.Println()
		fmt.Printf("=== this build against the baseline (%s): the figure, rdmafs's own CPU and its context switches per operation, this build's over the baseline's\n", c.baseline)
		printBaselineTable(os.Stdout, cols, table)
	}
	if len(mem) > 0 {
		fmt.Println()
		fmt.Println("=== memory of each rdmafs mount (MiB): idle right after the mount, and the peak under the workloads")
		printMemoryTable(os.Stdout, cols, mem)
	}
	for _, n := range notes {
		fmt.Println("note:", n)
	}
	if c.outDir != "" {
		title := fmt.Sprintf("bench-e2e: %s file, knfsd export on tmpfs, %s", size, time.Now().Format("2006-01-02"))
		csvPath, svgPath, err := chart.WriteFiles(c.outDir, "bench-e2e", chartTable(title, cols, table, notes))
		if err != nil {
			fmt.Fprintln(os.Stderr, "bench-e2e:", err)
			failed = true
		} else {
			fmt.Printf("table: %s, chart: %s\n", csvPath, svgPath)
		}
	}
	if failed {
		os.Exit(1)
	}
}

func fatalf(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "bench-e2e: "+format+"\n", args...)
	os.Exit(2)
}

func envOr(k, def string) string {
	if v := os.Getenv(k); v != "" {
		return v
	}
	return def
}

func durEnv(k string, def time.Duration) time.Duration {
	if d, err := time.ParseDuration(os.Getenv(k)); err == nil {
		return d
	}
	return def
}

func intEnv(k string, def int) int {
	if n, err := strconv.Atoi(os.Getenv(k)); err == nil {
		return n
	}
	return def
}

func rowKeys() string {
	var keys []string
	for _, r := range rows {
		keys = append(keys, r.key)
	}
	return strings.Join(keys, ",")
}

// keySet parses a comma-separated list of workload keys; nil for "".
func keySet(s string) (map[string]bool, error) {
	if strings.TrimSpace(s) == "" {
		return nil, nil
	}
	m := map[string]bool{}
	for _, k := range strings.Split(s, ",") {
		k = strings.TrimSpace(k)
		known := false
		for _, r := range rows {
			known = known || r.key == k
		}
		if !known {
			return nil, fmt.Errorf("unknown workload %q (known: %s)", k, rowKeys())
		}
		m[k] = true
	}
	return m, nil
}

// parseSize parses 512, 64k, 256m, 1g (powers of 1024).
func parseSize(s string) (int64, error) {
	s = strings.ToLower(strings.TrimSpace(s))
	mult := int64(1)
	switch {
	case strings.HasSuffix(s, "k"):
		mult, s = 1<<10, s[:len(s)-1]
	case strings.HasSuffix(s, "m"):
		mult, s = 1<<20, s[:len(s)-1]
	case strings.HasSuffix(s, "g"):
		mult, s = 1<<30, s[:len(s)-1]
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || n <= 0 {
		return 0, fmt.Errorf("bad size %q", s)
	}
	return n * mult, nil
}

// checkSpace fails early if the export cannot hold the files.
func checkSpace(c config) error {
	var st syscall.Statfs_t
	if err := syscall.Statfs(c.export, &st); err != nil {
		return fmt.Errorf("statfs %s: %v", c.export, err)
	}
	free := int64(st.Bavail) * st.Bsize
	if need := c.size + 64<<20; need > free {
		return fmt.Errorf("the export %s has %d MiB free, the benchmark needs %d MiB: lower -size or raise LAB_EXPORT_SIZE",
			c.export, free>>20, need>>20)
	}
	return nil
}

func makeTargets(c config) []target {
	src := c.addr + ":" + c.export
	knfs := func(opts string) func(string, []string) error {
		return func(dir string, _ []string) error {
			return command(2*time.Minute, nil, "mount", "-t", "nfs", "-o", opts, src, dir)
		}
	}
	rdmafs := func(bin, opts string, dev bool, variant []string) func(string, []string) error {
		if c.rdmafsOpts != "" {
			opts += "," + c.rdmafsOpts
		}
		if dev {
			opts += ",noio_uring"
		}
		return func(dir string, env []string) error {
			return command(2*time.Minute, append(env, variant...), bin, "-o", opts, src, dir)
		}
	}
	umount := func(dir string) error { return command(time.Minute, nil, "umount", dir) }
	fuseUmount := func(dir string) error { return command(time.Minute, nil, "fusermount3", "-u", dir) }
	var ts []target
	for _, name := range c.targets {
		t := target{name: name}
		bin := c.rdmafs
		// baseline:rdmafs-rdma: the same mount made by the baseline build
		unprefixed, isBaseline := strings.CutPrefix(name, baselinePrefix)
		if isBaseline {
			if c.baseline == "" {
				fatalf("target %q: no -baseline build", name)
			}
			bin = c.baseline
		}
		// rdmafs-rdma@GOMAXPROCS=1+GODEBUG=x: the same mount with the
		// rdmafs process's environment changed, as a column of its own
		base, variant, hasVariant := strings.Cut(unprefixed, "@")
		var env []string
		if hasVariant {
			env = strings.Split(variant, "+")
			for _, e := range env {
				if !strings.Contains(e, "=") {
					fatalf("target %q: %q is not NAME=VALUE", name, e)
				}
			}
			if !strings.HasPrefix(base, "rdmafs-") {
				fatalf("target %q: only rdmafs mounts take an environment", name)
			}
		}
		switch base {
		case "knfs-rdma":
			t.mount, t.umnt = knfs("vers=3,proto=rdma,port=20049"), umount
		case "knfs-rdma-nconnect4":
			t.mount, t.umnt = knfs("vers=3,proto=rdma,port=20049,nconnect=4"), umount
		case "knfs-tcp":
			t.mount, t.umnt = knfs("vers=3,proto=tcp"), umount
		case "rdmafs-tcp", "rdmafs-rdma", "rdmafs-tcp-dev", "rdmafs-rdma-dev":
			// -dev: FUSE through /dev/fuse whatever -rdmafs-o says (a
			// column to weigh FUSE over io_uring against)
			proto, dev := strings.CutSuffix(strings.TrimPrefix(base, "rdmafs-"), "-dev")
			t.rdmafs, t.bin = true, bin
			t.mount, t.umnt = rdmafs(bin, "proto="+proto+",vers=3", dev, env), fuseUmount
			if c.rdmafs == "" {
				fatalf("target %s: RDMAFS_BIN is unset: run inside the e2e test system (make bench-e2e), which builds rdmafs", name)
			}
		default:
			fatalf("unknown target %q", name)
		}
		if isBaseline && !t.rdmafs {
			fatalf("target %q: only rdmafs mounts have a baseline", name)
		}
		ts = append(ts, t)
	}
	return ts
}

// printTable prints one row per workload: each column's figure, then each
// column's ratio to the first column (the kernel NFS/RDMA client), then
// the target of the rdmafs-rdma ratio and whether it is met.
func printTable(w io.Writer, cols []string, table map[string]map[string]result) {
	head := []string{"workload", "unit"}
	head = append(head, cols...)
	for _, c := range cols[min(1, len(cols)):] {
		head = append(head, c+"/"+cols[0])
	}
	hasTarget := len(cols) > 1 && contains(cols[1:], targetColumn)
	if hasTarget {
		head = append(head, "target", "met")
	}
	lines := [][]string{head}
	for _, r := range rows {
		line := []string{r.label, r.unit}
		for _, c := range cols {
			line = append(line, cell(table[c][r.key]))
		}
		base := table[cols[0]][r.key]
		for _, c := range cols[min(1, len(cols)):] {
			line = append(line, ratio(table[c][r.key], base))
		}
		if hasTarget {
			line = append(line, fmt.Sprintf(">=%.1f", r.target), met(table[targetColumn][r.key], base, r.target))
		}
		lines = append(lines, line)
	}
	writeAligned(w, lines)
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// writeAligned prints lines as columns: the first left-aligned, the others
// right-aligned.
func writeAligned(w io.Writer, lines [][]string) {
	width := map[int]int{}
	for _, l := range lines {
		for i, f := range l {
			width[i] = max(width[i], len([]rune(f)))
		}
	}
	for _, l := range lines {
		var b strings.Builder
		for i, f := range l {
			pad := strings.Repeat(" ", width[i]-len([]rune(f)))
			if i == 0 {
				b.WriteString(f + pad) // labels left, figures right
			} else {
				b.WriteString("  " + pad + f)
			}
		}
		fmt.Fprintln(w, strings.TrimRight(b.String(), " "))
	}
}

// chartTable is the table for chart: a figure per column and row, none
// where the figure failed or is missing, "b" on buffered figures.
func chartTable(title string, cols []string, table map[string]map[string]result, notes []string) *chart.Table {
	t := &chart.Table{Title: title, Columns: cols, Notes: notes}
	for _, r := range rows {
		row := chart.Row{Label: r.label, Unit: r.unit, Values: make([]float64, len(cols)), Marks: make([]string, len(cols))}
		for i, c := range cols {
			res := table[c][r.key]
			row.Values[i] = chart.Missing
			if res.err == nil && res.value > 0 {
				row.Values[i] = res.value
			}
			if res.buffered {
				row.Marks[i] = "b"
			}
		}
		t.Rows = append(t.Rows, row)
	}
	if anyBufferedTable(table) {
		t.Notes = append(t.Notes, "b: buffered I/O (the mount refused O_DIRECT)")
	}
	return t
}

func anyBufferedTable(table map[string]map[string]result) bool {
	for _, col := range table {
		if anyBuffered(col) {
			return true
		}
	}
	return false
}

func anyBuffered(col map[string]result) bool {
	for _, r := range col {
		if r.buffered {
			return true
		}
	}
	return false
}

func cell(r result) string {
	switch {
	case r.err != nil:
		return "error"
	case r.value == 0:
		return "-"
	case r.buffered:
		return fmt.Sprintf("%.1f b", r.value)
	}
	return fmt.Sprintf("%.1f", r.value)
}

func ratio(r, base result) string {
	if r.err != nil || base.err != nil || r.value == 0 || base.value == 0 {
		return "-"
	}
	return fmt.Sprintf("%.2f", r.value/base.value)
}

// met says whether r is at least target times base: yes, no, or - when
// either figure is missing.
func met(r, base result, target float64) string {
	if r.err != nil || base.err != nil || r.value == 0 || base.value == 0 {
		return "-"
	}
	// as the ratio is printed, to two places
	if math.Round(100*r.value/base.value) >= math.Round(100*target) {
		return "yes"
	}
	return "no"
}

// memoryUse is an rdmafs mount's memory, idle and at its peak.
type memoryUse struct {
	idle, peak procstat.Memory
	err        error
}

// clocksource names the kernel's clock: what a clock read costs depends on
// it (the TSC is read in the vDSO; an emulated HPET costs a system call).
func clocksource() string {
	b, err := os.ReadFile("/sys/devices/system/clocksource/clocksource0/current_clocksource")
	if err != nil {
		return "unknown"
	}
	return strings.TrimSpace(string(b))
}
