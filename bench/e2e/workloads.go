package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

func command(timeout time.Duration, env []string, name string, args ...string) error {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, name, args...)
	if env != nil {
		cmd.Env = append(os.Environ(), env...)
	}
	out, err := cmd.CombinedOutput()
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
func measure(c config, tg target) (res map[string]result, mem memoryUse, err error) {
	res = map[string]result{}
	dir, err := os.MkdirTemp("/mnt", "bench-"+tg.name+"-")
	if err != nil {
		return res, mem, err
	}
	defer os.Remove(dir)
	fmt.Printf("=== bench-e2e: %s\n", tg.name)
	m := newMeter(c, tg)
	if err := tg.mount(dir, m.mountEnv()); err != nil {
		return res, mem, err
	}
	defer func() {
		if err := tg.umnt(dir); err != nil {
			fmt.Fprintf(os.Stderr, "bench-e2e: unmount %s: %v\n", dir, err)
		}
	}()
	if err := m.attach(dir); err != nil {
		return res, mem, err
	}
	defer func() { mem = m.detach() }()
	work := filepath.Join(dir, fmt.Sprintf("bench-%d", os.Getpid()))
	if err := os.Mkdir(work, 0o755); err != nil {
		return res, mem, err
	}
	defer os.RemoveAll(work)
	run := func(key string, w func() result) {
		if !c.wants(key) {
			return
		}
		r := m.run(key, w)
		res[key] = r
		if r.err == nil {
			fmt.Printf("    %-22s %10.1f %s%s%s\n", tg.name+"-"+key, r.value, unitOf(key),
				map[bool]string{true: " (buffered)"}[r.buffered], r.cost.summary())
		}
	}

	// the random jobs use the first -rand-size bytes of the sequential file:
	// no second file to lay out
	seq := filepath.Join(work, "seq.dat")
	if c.wants("seqwrite") || c.wants("seqread") || c.wants("randread") || c.wants("randwrite") {
		run("seqwrite", func() result { return fio(c, tg.name+"-seqwrite", seq, "write", "1M", 4, c.size, c.runtime, false) })
		if !c.wants("seqwrite") {
			// the other jobs need the file
			fio(c, tg.name+"-layout", seq, "write", "1M", 4, c.size, c.runtime, false)
		}
		st, err := os.Stat(seq)
		if err == nil && st.Size() > 0 {
			run("seqread", func() result { return fio(c, tg.name+"-seqread", seq, "read", "1M", 4, st.Size(), c.runtime, false) })
			rsize := min(c.randSize, st.Size()/4096*4096)
			if rsize < c.randSize {
				fmt.Printf("    random jobs on %d MiB only: the sequential write stopped there\n", rsize>>20)
			}
			run("randread", func() result { return fio(c, tg.name+"-randread", seq, "randread", "4k", 16, rsize, c.randRuntime, true) })
			run("randwrite", func() result { return fio(c, tg.name+"-randwrite", seq, "randwrite", "4k", 16, rsize, c.randRuntime, true) })
		} else {
			err = fmt.Errorf("the sequential write left no file: %v", err)
			for _, k := range []string{"seqread", "randread", "randwrite"} {
				if c.wants(k) {
					res[k] = result{err: err}
				}
			}
		}
		os.Remove(seq)
	}

	run("bufwrite", func() result { return copyLikeWrite(seq, c.size, c.runtime) })
	if c.wants("bufread") {
		if !c.wants("bufwrite") {
			copyLikeWrite(seq, c.size, c.runtime)
		}
		run("bufread", func() result { dropCaches(); return sequentialRead(seq, c.runtime) })
	}
	os.Remove(seq)

	if c.wants("parallel") {
		par := filepath.Join(work, "parallel")
		if err := os.Mkdir(par, 0o755); err != nil {
			res["parallel"] = result{err: err}
		} else {
			// the files are laid out first, outside the figure
			if r := fioParallel(c, tg.name+"-parallel", par, "write", "1M", 4, c.runtime+c.randRuntime, false); r.err != nil {
				res["parallel"] = r
			} else {
				run("parallel", func() result {
					return fioParallel(c, tg.name+"-parallel", par, "randrw", "4k", 16, c.randRuntime, true)
				})
			}
			os.RemoveAll(par)
		}
	}

	metadata(c, filepath.Join(work, "meta"), run, res)
	return res, mem, nil
}

func unitOf(key string) string {
	for _, r := range rows {
		if r.key == key {
			return r.unit
		}
	}
	return ""
}

// fio runs one job, O_DIRECT first and buffered if the mount refuses O_DIRECT.
func fio(c config, name, file, rw, bs string, depth int, size int64, runtime time.Duration, timeBased bool) result {
	args := []string{"--filename=" + file, "--size=" + strconv.FormatInt(size, 10)}
	r := fioRun(name, rw, bs, depth, runtime, timeBased, true, args)
	if r.err != nil && errors.Is(r.err, errDirect) {
		r = fioRun(name, rw, bs, depth, runtime, timeBased, false, args)
		r.buffered = true
	}
	return r
}

// fioParallel runs 4 jobs, each on a file of its own in dir of a quarter of
// -rand-size, and returns their sum.
func fioParallel(c config, name, dir, rw, bs string, depth int, runtime time.Duration, timeBased bool) result {
	args := []string{"--directory=" + dir, "--numjobs=4", "--group_reporting", "--size=" + strconv.FormatInt(c.randSize/4, 10)}
	if rw == "randrw" {
		args = append(args, "--rwmixread=50")
	}
	r := fioRun(name, rw, bs, depth, runtime, timeBased, true, args)
	if r.err != nil && errors.Is(r.err, errDirect) {
		r = fioRun(name, rw, bs, depth, runtime, timeBased, false, args)
		r.buffered = true
	}
	return r
}

var errDirect = errors.New("O_DIRECT refused")

// jobSlack is how much longer than its runtime a fio job may take (laying out
// its file, the final fsync) before it is killed and its figure is an error.
var jobSlack = durEnv("BENCH_JOB_SLACK", 4*time.Minute)

func fioRun(name, rw, bs string, depth int, runtime time.Duration, timeBased, direct bool, more []string) result {
	args := []string{"--output-format=json", "--name=" + name,
		"--rw=" + rw, "--bs=" + bs, "--ioengine=libaio", "--iodepth=" + strconv.Itoa(depth),
		"--runtime=" + strconv.Itoa(int(runtime.Seconds())),
		"--direct=" + map[bool]string{true: "1", false: "0"}[direct], "--randrepeat=0", "--norandommap=1"}
	args = append(args, more...)
	if timeBased {
		args = append(args, "--time_based=1")
	}
	if strings.Contains(rw, "write") || rw == "randrw" {
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
	v, ops, err := parseFio(out, rw)
	r := result{value: v, err: err}
	r.cost.ops = ops
	return r
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
	IOBytes  int64   `json:"io_bytes"`
	BWBytes  float64 `json:"bw_bytes"`
	IOPS     float64 `json:"iops"`
	TotalIOs int64   `json:"total_ios"`
}

// parseFio returns MiB/s (sequential) or IOPS (random; read and write
// together for randrw) of fio's JSON output, which may follow lines of
// warnings, and the number of I/Os it counts.
func parseFio(out []byte, rw string) (value float64, ops int64, err error) {
	i := strings.IndexByte(string(out), '{')
	if i < 0 {
		return 0, 0, fmt.Errorf("no JSON in fio's output: %s", clip(string(out), 300))
	}
	var j fioJSON
	if err := json.Unmarshal(out[i:], &j); err != nil {
		return 0, 0, fmt.Errorf("fio JSON: %v", err)
	}
	if len(j.Jobs) != 1 {
		return 0, 0, fmt.Errorf("fio JSON: %d jobs, want 1", len(j.Jobs))
	}
	job := j.Jobs[0]
	if job.Error != 0 {
		return 0, 0, fmt.Errorf("fio job %s: error %d", job.Jobname, job.Error)
	}
	var s fioStat
	switch {
	case rw == "randrw":
		s = fioStat{IOBytes: job.Read.IOBytes + job.Write.IOBytes, BWBytes: job.Read.BWBytes + job.Write.BWBytes,
			IOPS: job.Read.IOPS + job.Write.IOPS, TotalIOs: job.Read.TotalIOs + job.Write.TotalIOs}
	case strings.Contains(rw, "write"):
		s = job.Write
	default:
		s = job.Read
	}
	if s.IOBytes == 0 {
		return 0, 0, fmt.Errorf("fio job %s moved no data", job.Jobname)
	}
	if strings.HasPrefix(rw, "rand") {
		return s.IOPS, s.TotalIOs, nil
	}
	return s.BWBytes / (1 << 20), s.TotalIOs, nil
}

// ioBlock is the size of each write(2) and read(2) of the cp-like
// workloads: what cp uses where st_blksize is 1 MiB, as on rdmafs and the
// kernel client with rsize and wsize 1 MiB.
const ioBlock = 1 << 20

// copyLikeWrite writes a new file of size bytes as cp does, in ioBlock
// write(2)s through the page cache, then fsyncs and closes it; it stops
// writing after runtime. The figure counts the fsync and close.
func copyLikeWrite(path string, size int64, runtime time.Duration) result {
	buf := make([]byte, ioBlock)
	rng := rand.New(rand.NewPCG(1, 2))
	for i := range buf {
		buf[i] = byte(rng.Uint32())
	}
	start := time.Now()
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		return result{err: err}
	}
	var n int64
	for n < size && time.Since(start) < runtime {
		k, err := f.Write(buf[:min(int64(len(buf)), size-n)])
		n += int64(k)
		if err != nil {
			f.Close()
			return result{err: fmt.Errorf("write %s at %d: %v", path, n, err)}
		}
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return result{err: fmt.Errorf("fsync %s: %v", path, err)}
	}
	if err := f.Close(); err != nil {
		return result{err: fmt.Errorf("close %s: %v", path, err)}
	}
	r := result{value: float64(n) / (1 << 20) / time.Since(start).Seconds()}
	r.cost.ops = (n + ioBlock - 1) / ioBlock
	return r
}

// sequentialRead reads path in ioBlock read(2)s through the page cache,
// to its end or for runtime.
func sequentialRead(path string, runtime time.Duration) result {
	buf := make([]byte, ioBlock)
	start := time.Now()
	f, err := os.Open(path)
	if err != nil {
		return result{err: err}
	}
	defer f.Close()
	var n int64
	for time.Since(start) < runtime {
		k, err := f.Read(buf)
		n += int64(k)
		if k == 0 || err != nil {
			if err != nil && !errors.Is(err, io.EOF) {
				return result{err: fmt.Errorf("read %s at %d: %v", path, n, err)}
			}
			break
		}
	}
	if n == 0 {
		return result{err: fmt.Errorf("read %s: empty", path)}
	}
	r := result{value: float64(n) / (1 << 20) / time.Since(start).Seconds()}
	r.cost.ops = (n + ioBlock - 1) / ioBlock
	return r
}

// metadata creates -files empty files, lists them with ls -l and stats
// each (both after dropping the caches), and unlinks each.
func metadata(c config, dir string, run func(string, func() result), res map[string]result) {
	keys := []string{"create", "lsl", "stat", "unlink"}
	wanted := false
	for _, k := range keys {
		wanted = wanted || c.wants(k)
	}
	if !wanted {
		return
	}
	fail := func(err error) {
		for _, k := range keys {
			if _, ok := res[k]; !ok && c.wants(k) {
				res[k] = result{err: err}
			}
		}
	}
	if err := os.Mkdir(dir, 0o755); err != nil {
		fail(err)
		return
	}
	defer os.RemoveAll(dir)
	n := c.files
	name := func(i int) string { return filepath.Join(dir, fmt.Sprintf("f%06d", i)) }
	each := func(key string, op func(string) error) func() result {
		return func() result {
			start := time.Now()
			for i := range n {
				if err := op(name(i)); err != nil {
					return result{err: fmt.Errorf("%s %s: %v", key, name(i), err)}
				}
			}
			r := result{value: float64(n) / time.Since(start).Seconds()}
			r.cost.ops = int64(n)
			return r
		}
	}
	create := func(p string) error {
		f, err := os.OpenFile(p, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
		if err != nil {
			return err
		}
		return f.Close()
	}
	stat := func(p string) error { _, err := os.Stat(p); return err }
	// create runs even when not asked for: the others need the files
	if c.wants("create") {
		run("create", each("create", create))
	} else if r := each("create", create)(); r.err != nil {
		fail(r.err)
		return
	}
	if r, ok := res["create"]; ok && r.err != nil {
		fail(r.err)
		return
	}
	run("lsl", func() result { dropCaches(); return listLong(dir, n) })
	run("stat", func() result { dropCaches(); return each("stat", stat)() })
	run("unlink", each("unlink", os.Remove))
}

// listLong runs ls -l on dir, which must list n entries, and returns the
// entries listed per second.
func listLong(dir string, n int) result {
	start := time.Now()
	cmd := exec.Command("ls", "-l", dir)
	cmd.Env = append(os.Environ(), "LC_ALL=C")
	out, err := cmd.Output()
	if err != nil {
		return result{err: fmt.Errorf("ls -l %s: %v", dir, err)}
	}
	d := time.Since(start)
	// "total N", then one line per entry
	if got := strings.Count(string(out), "\n") - 1; got != n {
		return result{err: fmt.Errorf("ls -l %s listed %d entries, want %d", dir, got, n)}
	}
	r := result{value: float64(n) / d.Seconds()}
	r.cost.ops = int64(n)
	return r
}
