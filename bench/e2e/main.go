// Command bench-e2e runs the e2e benchmark inside the e2e test system (the
// qemu guest of `make bench-e2e`, or the Docker container): the same fio
// workloads through every client mount of knfsd's export, one after the other
// in one boot, and one table of the figures with ratios against the kernel
// NFS/RDMA client.
//
// Mounts (columns): knfs-rdma (mount -t nfs -o vers=3,proto=rdma,port=20049),
// knfs-tcp (vers=3,proto=tcp), rdmafs-tcp (rdmafs -o proto=tcp,vers=3, when
// built) and rdmafs-rdma (proto=rdma, once rdmafs links the RDMA transport).
//
// Workloads (rows): sequential 1 MiB write and read of one -size file
// (libaio, iodepth 4), 4 KiB random read and write at iodepth 16 (libaio) on
// its first -rand-size bytes, and create, stat and unlink of -files empty files. I/O is
// O_DIRECT where the mount accepts it; where it does not (some FUSE setups),
// the figure is buffered, marked with "b", with an fsync at the end of writes
// and dropped caches before reads. The sequential jobs stop after -runtime
// even if the file is not done, the random ones run for -rand-runtime.
//
// It reads its setup like the e2e tests: LAB_ADDR, LAB_EXPORT, RDMAFS_BIN,
// RDMAFS_RDMA (test/e2e/run-tests.sh --bench sets them). With -out DIR it
// also writes the table as DIR/bench-e2e.csv and draws it as
// DIR/bench-e2e.svg (run-tests.sh gives the checkout's bench/out).
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/rdmafs/rdmafs/bench/chart"
)

type config struct {
	addr, export, rdmafs string
	rdmafsRDMA           bool
	size, randSize       int64
	runtime, randRuntime time.Duration
	files                int
	targets              []string
}

// target is one client mount of the export.
type target struct {
	name  string
	mount func(dir string) error
	umnt  func(dir string) error
	skip  string // why this column has no figures
}

// result is one figure: a value in unit, or the error that prevented it.
type result struct {
	value    float64
	buffered bool
	err      error
}

// workloads, in table order
var rows = []struct{ key, label, unit string }{
	{"seqwrite", "seq write 1M", "MiB/s"},
	{"seqread", "seq read 1M", "MiB/s"},
	{"randread", "rand read 4k qd16", "IOPS"},
	{"randwrite", "rand write 4k qd16", "IOPS"},
	{"create", "create empty files", "ops/s"},
	{"stat", "stat (cold cache)", "ops/s"},
	{"unlink", "unlink", "ops/s"},
}

func main() {
	var c config
	var size, randSize, targets, outDir string
	flag.StringVar(&size, "size", envOr("BENCH_SIZE", "1g"), "size of the sequential file (k, m, g suffixes); env BENCH_SIZE")
	flag.StringVar(&randSize, "rand-size", envOr("BENCH_RAND_SIZE", "256m"), "bytes of the sequential file that the random jobs use; env BENCH_RAND_SIZE")
	flag.DurationVar(&c.runtime, "runtime", durEnv("BENCH_RUNTIME", 60*time.Second), "time limit of each sequential job; env BENCH_RUNTIME")
	flag.DurationVar(&c.randRuntime, "rand-runtime", durEnv("BENCH_RAND_RUNTIME", 20*time.Second), "duration of each random job; env BENCH_RAND_RUNTIME")
	flag.IntVar(&c.files, "files", intEnv("BENCH_FILES", 2000), "files of the metadata workload; env BENCH_FILES")
	flag.StringVar(&targets, "targets", envOr("BENCH_TARGETS", "knfs-rdma,knfs-tcp,rdmafs-tcp,rdmafs-rdma"), "mounts to measure; env BENCH_TARGETS")
	flag.StringVar(&outDir, "out", envOr("BENCH_OUT", ""), "directory for bench-e2e.csv and bench-e2e.svg; none if empty; env BENCH_OUT")
	flag.Parse()
	var err error
	if c.size, err = parseSize(size); err != nil {
		fatalf("-size: %v", err)
	}
	if c.randSize, err = parseSize(randSize); err != nil {
		fatalf("-rand-size: %v", err)
	}
	c.targets = strings.Split(targets, ",")
	c.addr, c.export = os.Getenv("LAB_ADDR"), os.Getenv("LAB_EXPORT")
	c.rdmafs, c.rdmafsRDMA = os.Getenv("RDMAFS_BIN"), os.Getenv("RDMAFS_RDMA") == "1"
	if c.addr == "" || c.export == "" {
		fatalf("LAB_ADDR and LAB_EXPORT are unset: run inside the e2e test system (make bench-e2e)")
	}
	if _, err := exec.LookPath("fio"); err != nil {
		fatalf("fio not found: %v", err)
	}
	if err := checkSpace(c); err != nil {
		fatalf("%v", err)
	}

	var cols []string
	table := map[string]map[string]result{}
	notes := []string{}
	failed := false
	for _, tg := range makeTargets(c) {
		cols = append(cols, tg.name)
		table[tg.name] = map[string]result{}
		if tg.skip != "" {
			notes = append(notes, fmt.Sprintf("%s: %s", tg.name, tg.skip))
			continue
		}
		res, err := measure(c, tg)
		table[tg.name] = res
		if err != nil {
			notes = append(notes, fmt.Sprintf("%s: %v", tg.name, err))
			failed = true
		}
		for _, r := range rows {
			if e := res[r.key].err; e != nil {
				notes = append(notes, fmt.Sprintf("%s %s: %v", tg.name, r.key, e))
				failed = true
			}
		}
	}
	fmt.Println()
	fmt.Printf("=== bench-e2e: %s file %s, random %s for %v, %d files; server %s:%s\n",
		"sequential", size, randSize, c.randRuntime, c.files, c.addr, c.export)
	printTable(os.Stdout, cols, table)
	for _, col := range table {
		if anyBuffered(col) {
			fmt.Println("b: buffered I/O (the mount refused O_DIRECT): fsync at the end of writes, caches dropped before reads")
			break
		}
	}
	for _, n := range notes {
		fmt.Println("note:", n)
	}
	if outDir != "" {
		title := fmt.Sprintf("bench-e2e: %s file, knfsd export on tmpfs, %s", size, time.Now().Format("2006-01-02"))
		csvPath, svgPath, err := chart.WriteFiles(outDir, "bench-e2e", chartTable(title, cols, table, notes))
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
	knfs := func(opts string) func(string) error {
		return func(dir string) error { return command(2*time.Minute, "mount", "-t", "nfs", "-o", opts, src, dir) }
	}
	rdmafs := func(opts string) func(string) error {
		return func(dir string) error { return command(2*time.Minute, c.rdmafs, "-o", opts, src, dir) }
	}
	umount := func(dir string) error { return command(time.Minute, "umount", dir) }
	fuseUmount := func(dir string) error { return command(time.Minute, "fusermount3", "-u", dir) }
	var ts []target
	for _, name := range c.targets {
		t := target{name: name}
		switch name {
		case "knfs-rdma":
			t.mount, t.umnt = knfs("vers=3,proto=rdma,port=20049"), umount
		case "knfs-tcp":
			t.mount, t.umnt = knfs("vers=3,proto=tcp"), umount
		case "rdmafs-tcp", "rdmafs-rdma":
			proto := strings.TrimPrefix(name, "rdmafs-")
			t.mount, t.umnt = rdmafs("proto="+proto+",vers=3"), fuseUmount
			switch {
			case c.rdmafs == "":
				t.skip = "rdmafs not built (" + envOr("RDMAFS_SKIP", "RDMAFS_BIN unset") + ")"
			case proto == "rdma" && !c.rdmafsRDMA:
				t.skip = "RDMA transport (xprtrdma) not built yet: issue 5"
			}
		default:
			fatalf("unknown target %q", name)
		}
		ts = append(ts, t)
	}
	return ts
}

func command(timeout time.Duration, name string, args ...string) error {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	out, err := exec.CommandContext(ctx, name, args...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("%s %s: %v: %s", name, strings.Join(args, " "), err, strings.TrimSpace(string(out)))
	}
	return nil
}

func dropCaches() {
	syscall.Sync()
	os.WriteFile("/proc/sys/vm/drop_caches", []byte("3"), 0)
}

// measure mounts tg and runs every workload through it.
func measure(c config, tg target) (map[string]result, error) {
	res := map[string]result{}
	dir, err := os.MkdirTemp("/mnt", "bench-"+tg.name+"-")
	if err != nil {
		return res, err
	}
	defer os.Remove(dir)
	fmt.Printf("=== bench-e2e: %s\n", tg.name)
	if err := tg.mount(dir); err != nil {
		return res, err
	}
	defer func() {
		if err := tg.umnt(dir); err != nil {
			fmt.Fprintf(os.Stderr, "bench-e2e: unmount %s: %v\n", dir, err)
		}
	}()
	work := filepath.Join(dir, fmt.Sprintf("bench-%d", os.Getpid()))
	if err := os.Mkdir(work, 0o755); err != nil {
		return res, err
	}
	defer os.RemoveAll(work)

	// the random jobs use the first -rand-size bytes of the sequential file:
	// no second file to lay out
	seq := filepath.Join(work, "seq.dat")
	res["seqwrite"] = fio(c, tg.name+"-seqwrite", seq, "write", "1M", 4, c.size, c.runtime, false)
	st, err := os.Stat(seq)
	if err == nil && st.Size() > 0 {
		res["seqread"] = fio(c, tg.name+"-seqread", seq, "read", "1M", 4, st.Size(), c.runtime, false)
		rsize := min(c.randSize, st.Size()/4096*4096)
		if rsize < c.randSize {
			fmt.Printf("    random jobs on %d MiB only: the sequential write stopped there\n", rsize>>20)
		}
		res["randread"] = fio(c, tg.name+"-randread", seq, "randread", "4k", 16, rsize, c.randRuntime, true)
		res["randwrite"] = fio(c, tg.name+"-randwrite", seq, "randwrite", "4k", 16, rsize, c.randRuntime, true)
	} else {
		err = fmt.Errorf("the sequential write left no file: %v", err)
		for _, k := range []string{"seqread", "randread", "randwrite"} {
			res[k] = result{err: err}
		}
	}
	os.Remove(seq)
	for k, v := range metadata(tg.name, filepath.Join(work, "meta"), c.files) {
		res[k] = v
	}
	return res, nil
}

// fio runs one job, O_DIRECT first and buffered if the mount refuses O_DIRECT.
func fio(c config, name, file, rw, bs string, depth int, size int64, runtime time.Duration, timeBased bool) result {
	r := fioRun(name, file, rw, bs, depth, size, runtime, timeBased, true)
	if r.err != nil && errors.Is(r.err, errDirect) {
		r = fioRun(name, file, rw, bs, depth, size, runtime, timeBased, false)
		r.buffered = true
	}
	if r.err == nil {
		fmt.Printf("    %-22s %10.1f %s%s\n", name, r.value, unitOf(rw), map[bool]string{true: " (buffered)"}[r.buffered])
	}
	return r
}

var errDirect = errors.New("O_DIRECT refused")

// jobSlack is how much longer than its runtime a fio job may take (laying out
// its file, the final fsync) before it is killed and its figure is an error.
var jobSlack = durEnv("BENCH_JOB_SLACK", 4*time.Minute)

func unitOf(rw string) string {
	if strings.HasPrefix(rw, "rand") {
		return "IOPS"
	}
	return "MiB/s"
}

func fioRun(name, file, rw, bs string, depth int, size int64, runtime time.Duration, timeBased, direct bool) result {
	args := []string{"--output-format=json", "--name=" + name, "--filename=" + file,
		"--rw=" + rw, "--bs=" + bs, "--ioengine=libaio", "--iodepth=" + strconv.Itoa(depth),
		"--size=" + strconv.FormatInt(size, 10), "--runtime=" + strconv.Itoa(int(runtime.Seconds())),
		"--direct=" + map[bool]string{true: "1", false: "0"}[direct], "--randrepeat=0", "--norandommap=1"}
	if timeBased {
		args = append(args, "--time_based=1")
	}
	if strings.Contains(rw, "write") {
		args = append(args, "--end_fsync=1")
	} else {
		dropCaches()
	}
	ctx, cancel := context.WithTimeout(context.Background(), runtime+jobSlack)
	defer cancel()
	cmd := exec.CommandContext(ctx, "fio", args...)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if ctx.Err() != nil {
		return result{err: fmt.Errorf("fio %s: killed after %v (runtime %v + BENCH_JOB_SLACK %v)", name, runtime+jobSlack, runtime, jobSlack)}
	}
	if err != nil {
		msg := strings.TrimSpace(stderr.String() + " " + string(out))
		if direct && strings.Contains(msg, "Invalid argument") {
			return result{err: errDirect}
		}
		return result{err: fmt.Errorf("fio %s: %v: %s", name, err, clip(msg, 500))}
	}
	v, err := parseFio(out, rw)
	return result{value: v, err: err}
}

func clip(s string, n int) string {
	if len(s) > n {
		return s[:n] + "..."
	}
	return s
}

type fioJSON struct {
	Jobs []struct {
		Jobname string  `json:"jobname"`
		Error   int     `json:"error"`
		Read    fioStat `json:"read"`
		Write   fioStat `json:"write"`
	} `json:"jobs"`
}

type fioStat struct {
	IOBytes int64   `json:"io_bytes"`
	BWBytes float64 `json:"bw_bytes"`
	IOPS    float64 `json:"iops"`
}

// parseFio returns MiB/s (sequential) or IOPS (random) of fio's JSON output,
// which may follow lines of warnings.
func parseFio(out []byte, rw string) (float64, error) {
	i := strings.IndexByte(string(out), '{')
	if i < 0 {
		return 0, fmt.Errorf("no JSON in fio's output: %s", clip(string(out), 300))
	}
	var j fioJSON
	if err := json.Unmarshal(out[i:], &j); err != nil {
		return 0, fmt.Errorf("fio JSON: %v", err)
	}
	if len(j.Jobs) != 1 {
		return 0, fmt.Errorf("fio JSON: %d jobs, want 1", len(j.Jobs))
	}
	job := j.Jobs[0]
	if job.Error != 0 {
		return 0, fmt.Errorf("fio job %s: error %d", job.Jobname, job.Error)
	}
	s := job.Read
	if strings.Contains(rw, "write") {
		s = job.Write
	}
	if s.IOBytes == 0 {
		return 0, fmt.Errorf("fio job %s moved no data", job.Jobname)
	}
	if strings.HasPrefix(rw, "rand") {
		return s.IOPS, nil
	}
	return s.BWBytes / (1 << 20), nil
}

// metadata creates n empty files, stats each and unlinks each, and returns
// the rate of each phase.
func metadata(label, dir string, n int) map[string]result {
	res := map[string]result{}
	fail := func(err error) map[string]result {
		for _, k := range []string{"create", "stat", "unlink"} {
			if _, ok := res[k]; !ok {
				res[k] = result{err: err}
			}
		}
		return res
	}
	if err := os.Mkdir(dir, 0o755); err != nil {
		return fail(err)
	}
	name := func(i int) string { return filepath.Join(dir, fmt.Sprintf("f%06d", i)) }
	phase := func(key string, op func(string) error) error {
		start := time.Now()
		for i := range n {
			if err := op(name(i)); err != nil {
				return fmt.Errorf("%s %s: %v", key, name(i), err)
			}
		}
		res[key] = result{value: float64(n) / time.Since(start).Seconds()}
		fmt.Printf("    %-22s %10.1f ops/s\n", label+"-"+key, res[key].value)
		return nil
	}
	create := func(p string) error {
		f, err := os.OpenFile(p, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
		if err != nil {
			return err
		}
		return f.Close()
	}
	stat := func(p string) error { _, err := os.Stat(p); return err }
	if err := phase("create", create); err != nil {
		return fail(err)
	}
	dropCaches() // stat must ask the server, not the dentry/attribute cache
	if err := phase("stat", stat); err != nil {
		return fail(err)
	}
	if err := phase("unlink", os.Remove); err != nil {
		return fail(err)
	}
	os.Remove(dir)
	return res
}

// printTable prints one row per workload: each column's figure, then each
// column's ratio to the first column (the kernel NFS/RDMA client).
func printTable(w io.Writer, cols []string, table map[string]map[string]result) {
	head := []string{"workload", "unit"}
	head = append(head, cols...)
	for _, c := range cols[min(1, len(cols)):] {
		head = append(head, c+"/"+cols[0])
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
		lines = append(lines, line)
	}
	width := make([]int, len(head))
	for _, l := range lines {
		for i, f := range l {
			width[i] = max(width[i], len(f))
		}
	}
	for _, l := range lines {
		var b strings.Builder
		for i, f := range l {
			if i == 0 {
				fmt.Fprintf(&b, "%-*s", width[i], f) // labels left, figures right
			} else {
				fmt.Fprintf(&b, "  %*s", width[i], f)
			}
		}
		fmt.Fprintln(w, b.String())
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
