// Command hostbench is the TCP benchmark of rdmafs on one machine. It
// serves a tmpfs directory with `rdmafs serve` and runs the same workloads,
// in one go, through
//
//   - rdmafs: an rdmafs mount of that export over TCP;
//   - libnfs: libnfs's nfs-cp against the same export (the sequential rows:
//     it is the client a user would otherwise pick, and it has no tool for
//     the others);
//   - loopback: a go-fuse loopback mount of the exported directory, the
//     FUSE ceiling (same kernel path, no network and no NFS).
//
// It prints one table with each figure and the ratios rdmafs/libnfs and
// rdmafs/loopback, and the CPU time the rdmafs client and server spent per
// workload, which says where the time goes. Machines are shared and noisy:
// compare the ratios, which are measured in the same run. It also writes
// the table as -out/hostbench.csv and draws it as -out/hostbench.svg.
//
// Run as root: go run ./bench/hostbench (make bench). It needs fio,
// libnfs-utils and fuse3.
package main

import (
	"bufio"
	"encoding/json"
	"flag"
	"fmt"
	"log"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/rdmafs/rdmafs/bench/chart"
)

var (
	sizeMiB   = flag.Int("size", 1024, "MiB of the sequential file")
	files     = flag.Int("files", 10000, "files of the small-file workload")
	randSecs  = flag.Int("randsecs", 15, "seconds of the random-read workload")
	keep      = flag.Bool("keep", false, "keep the work directory")
	workDir   = flag.String("dir", "", "work directory (default: a new one in /tmp)")
	profile   = flag.Bool("profile", false, "write CPU profiles of the rdmafs client and server into the work directory")
	mountOpts = flag.String("o", "", "extra rdmafs mount options")
	outDir    = flag.String("out", "bench/out", "directory for hostbench.csv and hostbench.svg")
)

type bench struct {
	dir, bin, export string
	port             int
	serve            *exec.Cmd
	rdmafsMnt        string
	loopMnt          string
	loop             *exec.Cmd
	srcFile          string // a local file of the sequential size, for nfs-cp
}

func main() {
	flag.Parse()
	log.SetFlags(0)
	log.SetPrefix("hostbench: ")
	if os.Geteuid() != 0 {
		fatal("run as root: the benchmark mounts file systems")
	}
	for _, tool := range []string{"fio", "nfs-cp", "fusermount3"} {
		if _, err := exec.LookPath(tool); err != nil {
			fatalf("%s is missing: apt-get install fio libnfs-utils fuse3", tool)
		}
	}
	b := &bench{}
	atExit = b.cleanup
	defer b.cleanup()
	b.setup()

	type row struct {
		name, unit         string
		rdmafs, libnfs, lo float64
		cpuClient, cpuSrv  float64
	}
	var rows []row
	seq := int64(*sizeMiB) << 20

	measure := func(name, unit string, run func(mnt string) float64, libnfs func() float64) {
		r := row{name: name, unit: unit}
		c0, s0 := cpuTime(b.clientPid()), cpuTime(b.serve.Process.Pid)
		r.rdmafs = run(b.rdmafsMnt)
		r.cpuClient, r.cpuSrv = cpuTime(b.clientPid())-c0, cpuTime(b.serve.Process.Pid)-s0
		r.lo = run(b.loopMnt)
		if libnfs != nil {
			r.libnfs = libnfs()
		}
		rows = append(rows, r)
		log.Printf("%-30s rdmafs %8.0f  libnfs %8.0f  loopback %8.0f %s", name, r.rdmafs, r.libnfs, r.lo, unit)
	}

	measure("seq write 1 MiB, fsync at end", "MB/s", func(mnt string) float64 {
		return fio(mnt, "--rw=write", "--bs=1M", fmt.Sprintf("--size=%d", seq), "--end_fsync=1", "--ioengine=psync")
	}, func() float64 {
		start := time.Now()
		run("nfs-cp", b.srcFile, b.nfsURL("libnfs.dat"))
		return float64(seq) / time.Since(start).Seconds() / 1e6
	})
	measure("seq read 1 MiB, cold cache", "MB/s", func(mnt string) float64 {
		dropCaches()
		return fio(mnt, "--rw=read", "--bs=1M", fmt.Sprintf("--size=%d", seq), "--ioengine=psync")
	}, func() float64 {
		dropCaches()
		start := time.Now()
		run("nfs-cp", b.nfsURL("libnfs.dat"), filepath.Join(b.dir, "libnfs-read.dat"))
		d := time.Since(start)
		os.Remove(filepath.Join(b.dir, "libnfs-read.dat"))
		return float64(seq) / d.Seconds() / 1e6
	})
	measure("rand read 4 KiB, iodepth 16", "IOPS", func(mnt string) float64 {
		return fio(mnt, "--rw=randread", "--bs=4k", "--iodepth=16", "--ioengine=libaio", "--direct=1",
			fmt.Sprintf("--size=%d", seq), fmt.Sprintf("--runtime=%d", *randSecs), "--time_based")
	}, nil)
	measure(fmt.Sprintf("create+stat+unlink %d files", *files), "files/s", func(mnt string) float64 {
		out := run(filepath.Join(b.bin, "smallfiles"), "-n", strconv.Itoa(*files), mnt)
		var v float64
		fmt.Sscanf(out, "files/s %f", &v)
		return v
	}, nil)

	fmt.Printf("\nrdmafs over TCP against `rdmafs serve` on loopback (export on tmpfs, %d MiB file)\n\n", *sizeMiB)
	fmt.Printf("| %-34s | %9s | %9s | %9s | %-7s | %13s | %15s | %22s |\n", "workload", "rdmafs", "libnfs", "loopback", "unit", "rdmafs/libnfs", "rdmafs/loopback", "CPU s client / server")
	fmt.Printf("|%s|%s:|%s:|%s:|%s|%s:|%s:|%s:|\n", dashes(36), dashes(10), dashes(10), dashes(10), dashes(9), dashes(14), dashes(16), dashes(23))
	for _, r := range rows {
		lib, ratioLib := "n/a", "n/a"
		if r.libnfs > 0 {
			lib, ratioLib = fmt.Sprintf("%.0f", r.libnfs), fmt.Sprintf("%.2f", r.rdmafs/r.libnfs)
		}
		fmt.Printf("| %-34s | %9.0f | %9s | %9.0f | %-7s | %13s | %15.2f | %10.1f / %-9.1f |\n",
			r.name, r.rdmafs, lib, r.lo, r.unit, ratioLib, r.rdmafs/r.lo, r.cpuClient, r.cpuSrv)
	}
	t := &chart.Table{
		Title:   fmt.Sprintf("make bench: rdmafs over TCP, libnfs and a FUSE loopback (%d MiB file, %s)", *sizeMiB, time.Now().Format("2006-01-02")),
		Columns: []string{"rdmafs", "libnfs", "loopback"},
		Notes:   []string{"libnfs: nfs-cp, sequential rows only"},
	}
	for _, r := range rows {
		lib := chart.Missing
		if r.libnfs > 0 {
			lib = r.libnfs
		}
		t.Rows = append(t.Rows, chart.Row{Label: r.name, Unit: r.unit, Values: []float64{r.rdmafs, lib, r.lo}})
	}
	csvPath, svgPath, err := chart.WriteFiles(*outDir, "hostbench", t)
	if err != nil {
		fatalf("%v", err)
	}
	fmt.Printf("\ntable: %s, chart: %s\n", csvPath, svgPath)
}

// atExit undoes the benchmark's mounts and processes; fatal runs it too.
var atExit = func() {}

func fatalf(format string, args ...any) {
	log.Printf(format, args...)
	atExit()
	os.Exit(1)
}

func fatal(args ...any) { fatalf("%s", fmt.Sprint(args...)) }

func dashes(n int) string { return strings.Repeat("-", n) }

func (b *bench) setup() {
	var err error
	b.dir = *workDir
	if b.dir == "" {
		b.dir, err = os.MkdirTemp("", "rdmafs-bench")
		if err != nil {
			fatal(err)
		}
	}
	b.bin = filepath.Join(b.dir, "bin")
	for _, pkg := range []string{"cmd/rdmafs", "bench/loopback", "bench/smallfiles"} {
		run("go", "build", "-o", filepath.Join(b.bin, filepath.Base(pkg)), "./"+pkg)
	}
	b.export = filepath.Join(b.dir, "export")
	os.MkdirAll(b.export, 0o755)
	// The export is a tmpfs so that the figures are of the protocol
	// stacks, not of this machine's disk.
	run("mount", "-t", "tmpfs", "-o", fmt.Sprintf("size=%dm", 3**sizeMiB+512), "rdmafs-bench", b.export)
	os.MkdirAll(b.dir+"/src", 0o755)
	run("mount", "-t", "tmpfs", "-o", fmt.Sprintf("size=%dm", 2**sizeMiB+64), "rdmafs-bench-src", b.dir+"/src")
	b.srcFile = filepath.Join(b.dir, "src", "src.dat")
	run("dd", "if=/dev/urandom", "of="+b.srcFile, "bs=1M", fmt.Sprintf("count=%d", *sizeMiB), "status=none")

	// The benchmark works as root: no_root_squash (by default root is
	// squashed, as with knfsd), so calls are served as the server itself.
	b.serve = exec.Command(filepath.Join(b.bin, "rdmafs"), "serve", "-o", "port=0,no_root_squash", b.export)
	if *profile {
		b.serve.Env = append(os.Environ(), "RDMAFS_CPUPROFILE="+filepath.Join(b.dir, "cpu"))
	}
	stdout, _ := b.serve.StdoutPipe()
	b.serve.Stderr = os.Stderr
	b.serve.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGTERM}
	if err := b.serve.Start(); err != nil {
		fatal(err)
	}
	sc := bufio.NewScanner(stdout)
	portRE := regexp.MustCompile(`on port (\d+) `)
	for sc.Scan() {
		if m := portRE.FindStringSubmatch(sc.Text()); m != nil {
			b.port, _ = strconv.Atoi(m[1])
			break
		}
	}
	go func() {
		for sc.Scan() {
		}
	}()
	if b.port == 0 {
		fatal("rdmafs serve did not start")
	}

	b.rdmafsMnt = filepath.Join(b.dir, "rdmafs")
	os.MkdirAll(b.rdmafsMnt, 0o755)
	opts := fmt.Sprintf("port=%d,mountport=%d", b.port, b.port)
	if *mountOpts != "" {
		opts += "," + *mountOpts
	}
	mount := exec.Command(filepath.Join(b.bin, "rdmafs"), "-o", opts, "127.0.0.1:/", b.rdmafsMnt)
	if *profile {
		mount.Env = append(os.Environ(), "RDMAFS_CPUPROFILE="+filepath.Join(b.dir, "cpu"))
	}
	if out, err := mount.CombinedOutput(); err != nil {
		fatalf("mount: %v: %s", err, out)
	}
	os.MkdirAll(filepath.Join(b.export, "loop"), 0o755)
	b.loopMnt = filepath.Join(b.dir, "loopback")
	os.MkdirAll(b.loopMnt, 0o755)
	b.loop = exec.Command(filepath.Join(b.bin, "loopback"), filepath.Join(b.export, "loop"), b.loopMnt)
	lout, _ := b.loop.StdoutPipe()
	b.loop.Stderr = os.Stderr
	b.loop.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGTERM}
	if err := b.loop.Start(); err != nil {
		fatal(err)
	}
	bufio.NewReader(lout).ReadString('\n')
}

func (b *bench) nfsURL(name string) string {
	return fmt.Sprintf("nfs://127.0.0.1//%s?nfsport=%d&mountport=%d&version=3", name, b.port, b.port)
}

// clientPid finds the rdmafs process serving the mount.
func (b *bench) clientPid() int {
	matches, _ := filepath.Glob("/proc/[0-9]*/cmdline")
	for _, p := range matches {
		data, _ := os.ReadFile(p)
		args := strings.Split(strings.TrimRight(string(data), "\x00"), "\x00")
		if len(args) > 2 && strings.HasSuffix(args[0], "/rdmafs") && args[len(args)-1] == b.rdmafsMnt {
			pid, _ := strconv.Atoi(filepath.Base(filepath.Dir(p)))
			return pid
		}
	}
	return 0
}

func (b *bench) cleanup() {
	atExit = func() {}
	if b.rdmafsMnt != "" {
		exec.Command("fusermount3", "-u", b.rdmafsMnt).Run()
	}
	if b.loop != nil && b.loop.Process != nil {
		exec.Command("fusermount3", "-u", b.loopMnt).Run()
		b.loop.Wait()
	}
	if b.serve != nil && b.serve.Process != nil {
		b.serve.Process.Signal(syscall.SIGTERM)
		b.serve.Wait()
	}
	exec.Command("umount", b.export).Run()
	exec.Command("umount", b.dir+"/src").Run()
	if !*keep && *workDir == "" && b.dir != "" {
		os.RemoveAll(b.dir)
	} else {
		log.Printf("work directory kept: %s", b.dir)
	}
}

// fio runs one fio job in dir and returns its bandwidth in MB/s, or its
// IOPS for a random job.
func fio(dir string, args ...string) float64 {
	all := append([]string{"--name=bench", "--directory=" + dir, "--filename=fio.dat", "--output-format=json", "--group_reporting"}, args...)
	out := run("fio", all...)
	var res struct {
		Jobs []struct {
			Read, Write struct {
				BwBytes float64 `json:"bw_bytes"`
				IOPS    float64 `json:"iops"`
			}
		}
	}
	if i := strings.IndexByte(out, '{'); i > 0 {
		out = out[i:]
	}
	if err := json.Unmarshal([]byte(out), &res); err != nil || len(res.Jobs) == 0 {
		fatalf("fio output: %v: %s", err, out)
	}
	j := res.Jobs[0]
	if strings.Contains(strings.Join(args, " "), "randread") {
		return j.Read.IOPS
	}
	return (j.Read.BwBytes + j.Write.BwBytes) / 1e6
}

func run(name string, args ...string) string {
	out, err := exec.Command(name, args...).Output()
	if err != nil {
		if ee, ok := err.(*exec.ExitError); ok {
			fatalf("%s %s: %v: %s", name, strings.Join(args, " "), err, ee.Stderr)
		}
		fatalf("%s: %v", name, err)
	}
	return string(out)
}

func dropCaches() {
	syscall.Sync()
	os.WriteFile("/proc/sys/vm/drop_caches", []byte("3"), 0)
}

// cpuTime returns the CPU seconds process pid has used.
func cpuTime(pid int) float64 {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	s := string(data)
	fields := strings.Fields(s[strings.LastIndexByte(s, ')')+2:])
	utime, _ := strconv.ParseFloat(fields[11], 64)
	stime, _ := strconv.ParseFloat(fields[12], 64)
	return (utime + stime) / 100 // clock ticks
}
