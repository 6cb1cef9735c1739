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

// mount is one column's mount of the export while the workloads run.
type mount struct {
	tg   target
	dir  string // the mount point
	work string // the run's work directory, through this mount
	m    *meter
	res  map[string]result
}

// measureAll mounts every target and runs each workload through each
// mount in turn, one right after the other, so that the figures of a row
// are taken close together: the load of a shared machine moves figures
// taken minutes apart by up to 2x. It returns each column's results and
// rdmafs's memory, and the mounts that failed.
func measureAll(c config, tgs []target) (map[string]map[string]result, map[string]memoryUse, map[string]error) {
	table := map[string]map[string]result{}
	mems := map[string]memoryUse{}
	failed := map[string]error{}
	var ms []*mount
	defer func() {
		for i := len(ms) - 1; i >= 0; i-- {
			mt := ms[i]
			mems[mt.tg.name] = mt.m.detach()
			if err := mt.tg.umnt(mt.dir); err != nil {
				fmt.Fprintf(os.Stderr, "bench-e2e: unmount %s: %v\n", mt.dir, err)
			}
			os.Remove(mt.dir)
		}
	}()
	workName := fmt.Sprintf("bench-%d", os.Getpid())
	for _, tg := range tgs {
		table[tg.name] = map[string]result{}
		mt, err := mountTarget(c, tg, workName)
		if err != nil {
			failed[tg.name] = err
			continue
		}
		ms = append(ms, mt)
		table[tg.name] = mt.res
	}
	if len(ms) == 0 {
		return table, mems, failed
	}
	// The work directory is one on the server: made and removed through
	// the first mount, seen by all.
	if err := os.Mkdir(ms[0].work, 0o777); err != nil {
		for _, mt := range ms {
			failed[mt.tg.name] = err
		}
		return table, mems, failed
	}
	defer os.RemoveAll(ms[0].work)

	// each runs workload key through every mount
	each := func(key string, w func(mt *mount) result) {
		if !c.wants(key) {
			return
		}
		for _, mt := range ms {
			r := mt.m.run(key, func() result { return w(mt) })
			mt.res[key] = r
			if r.err == nil {
				fmt.Printf("    %-22s %10.1f %s%s%s\n", mt.tg.name+"-"+key, r.value, unitOf(key),
					map[bool]string{true: " (buffered)"}[r.buffered], r.cost.summary())
			} else {
				fmt.Printf("    %-22s %v\n", mt.tg.name+"-"+key, r.err)
			}
		}
	}
	failAll := func(key string, err error) {
		if c.wants(key) {
			for _, mt := range ms {
				mt.res[key] = result{err: err}
			}
		}
	}

	// The sequential file is one for all: each mount writes it anew (the
	// export holds one), and reads it, and the random jobs use its first
	// -rand-size bytes.
	seq := func(mt *mount) string { return filepath.Join(mt.work, "seq.dat") }
	if c.wants("seqwrite") || c.wants("seqread") || c.wants("randread") || c.wants("randwrite") {
		if c.wants("seqwrite") {
			each("seqwrite", func(mt *mount) result {
				os.Remove(seq(mt))
				return fio(c, mt.tg.name+"-seqwrite", seq(mt), "write", "1M", 4, c.size, c.runtime, false)
			})
		} else {
			fio(c, "layout", seq(ms[0]), "write", "1M", 4, c.size, c.runtime, false)
		}
		st, err := os.Stat(seq(ms[0]))
		if err == nil && st.Size() > 0 {
			each("seqread", func(mt *mount) result {
				return fio(c, mt.tg.name+"-seqread", seq(mt), "read", "1M", 4, st.Size(), c.runtime, false)
			})
			rsize := min(c.randSize, st.Size()/4096*4096)
			if rsize < c.randSize {
				fmt.Printf("    random jobs on %d MiB only: the sequential write stopped there\n", rsize>>20)
			}
			each("randread", func(mt *mount) result {
				return fio(c, mt.tg.name+"-randread", seq(mt), "randread", "4k", 16, rsize, c.randRuntime, true)
			})
			each("randwrite", func(mt *mount) result {
				return fio(c, mt.tg.name+"-randwrite", seq(mt), "randwrite", "4k", 16, rsize, c.randRuntime, true)
			})
		} else {
			err = fmt.Errorf("the sequential write left no file: %v", err)
			for _, k := range []string{"seqread", "randread", "randwrite"} {
				failAll(k, err)
			}
		}
		os.Remove(seq(ms[0]))
	}

	if c.wants("bufwrite") || c.wants("bufread") {
		if c.wants("bufwrite") {
			each("bufwrite", func(mt *mount) result {
				os.Remove(seq(mt))
				return copyLikeWrite(seq(mt), c.size, c.runtime)
			})
		} else {
			copyLikeWrite(seq(ms[0]), c.size, c.runtime)
		}
		each("bufread", func(mt *mount) result { dropCaches(); return sequentialRead(seq(mt), c.runtime) })
		os.Remove(seq(ms[0]))
	}

	if c.wants("parallel") {
		par := func(mt *mount) string { return filepath.Join(mt.work, "parallel") }
		if err := os.Mkdir(par(ms[0]), 0o755); err != nil {
			failAll("parallel", err)
		} else if r := fioParallel(c, "parallel", par(ms[0]), "write", "1M", 4, c.runtime+c.randRuntime, false); r.err != nil {
			// the files are laid out first, outside the figures
			failAll("parallel", r.err)
		} else {
			each("parallel", func(mt *mount) result {
				return fioParallel(c, "parallel", par(mt), "randrw", "4k", 16, c.randRuntime, true)
			})
		}
		os.RemoveAll(par(ms[0]))
	}

	metadata(c, ms, each, failAll)
	return table, mems, failed
}

// mountTarget mounts tg and starts measuring it.
func mountTarget(c config, tg target, workName string) (*mount, error) {
	// fileName: a baseline column's name has a colon, which fio takes
	// for a list of files.
	dir, err := os.MkdirTemp("/mnt", "bench-"+fileName(tg.name)+"-")
	if err != nil {
		return nil, err
	}
	fmt.Printf("=== bench-e2e: mounting %s on %s\n", tg.name, dir)
	mt := &mount{tg: tg, dir: dir, work: filepath.Join(dir, workName), m: newMeter(c, tg), res: map[string]result{}}
	if err := tg.mount(dir, mt.m.mountEnv()); err != nil {
		os.Remove(dir)
		return nil, err
	}
	if err := mt.m.attach(dir); err != nil {
		tg.umnt(dir)
		os.Remove(dir)
		return nil, err
	}
	if tg.rdmafs {
		fmt.Printf("=== bench-e2e: %s serves FUSE through %s\n", tg.name, fuseChannel(c, dir))
	}
	return mt, nil
}

// fuseChannel is the FUSE channel of the rdmafs mount on dir, as `rdmafs
// stats -json` reports it ("io_uring" or "dev").
func fuseChannel(c config, dir string) string {
	out, err := exec.Command(c.rdmafs, "stats", "-json", dir).Output()
	if err != nil {
		return fmt.Sprintf("(rdmafs stats: %v)", err)
	}
	var st struct {
		FuseChannel string `json:"fuse_channel"`
	}
	if err := json.Unmarshal(out, &st); err != nil || st.FuseChannel == "" {
		return "(rdmafs stats -json names no fuse_channel)"
	}
	return st.FuseChannel
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

// metadata creates -files empty files through each mount, in a directory
// of its own, lists each directory with ls -l, stats each file and unlinks
// them (each after dropping the caches).
func metadata(c config, ms []*mount, each func(string, func(*mount) result), failAll func(string, error)) {
	keys := []string{"create", "lsl", "stat", "unlink"}
	wanted := false
	for _, k := range keys {
		wanted = wanted || c.wants(k)
	}
	if !wanted {
		return
	}
	dir := func(mt *mount) string { return filepath.Join(mt.work, "meta-"+fileName(mt.tg.name)) }
	n := c.files
	name := func(mt *mount, i int) string { return filepath.Join(dir(mt), fmt.Sprintf("f%06d", i)) }
	loop := func(key string, op func(string) error) func(*mount) result {
		return func(mt *mount) result {
			start := time.Now()
			for i := range n {
				if err := op(name(mt, i)); err != nil {
					return result{err: fmt.Errorf("%s %s: %v", key, name(mt, i), err)}
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
	for _, mt := range ms {
		if err := os.Mkdir(dir(mt), 0o755); err != nil {
			for _, k := range keys {
				failAll(k, err)
			}
			return
		}
	}
	// the files are made even when create is not measured: the others
	// need them
	if c.wants("create") {
		each("create", loop("create", create))
	} else {
		for _, mt := range ms {
			if r := loop("create", create)(mt); r.err != nil {
				for _, k := range keys {
					failAll(k, r.err)
				}
				return
			}
		}
	}
	each("lsl", func(mt *mount) result {
		if r := mt.res["create"]; r.err != nil {
			return r
		}
		dropCaches()
		return listLong(dir(mt), n)
	})
	each("stat", func(mt *mount) result {
		if r := mt.res["create"]; r.err != nil {
			return r
		}
		dropCaches()
		return loop("stat", stat)(mt)
	})
	// Caches are dropped before each mount's unlinks too: another mount's
	// drop before its stats empties this one's caches, so without it only
	// the last mount would unlink names it still has cached.
	each("unlink", func(mt *mount) result {
		if r := mt.res["create"]; r.err != nil {
			return r
		}
		dropCaches()
		return loop("unlink", os.Remove)(mt)
	})
	for _, mt := range ms {
		os.RemoveAll(dir(mt))
	}
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
