// Command hostbench is the benchmark of rdmafs on one machine. It serves a
// tmpfs directory with `rdmafs serve` (over TCP and over the pure-Go soft
// RDMA provider) and runs the same workloads, in one go, through
//
//   - rdmafs-tcp: an rdmafs mount of that export over TCP;
//   - rdmafs-soft: an rdmafs mount over RPC-over-RDMA on the soft verbs
//     provider (RDMA emulated over a TCP socket);
//   - libnfs: libnfs's nfs-cp against the same export (the sequential rows:
//     it is the client a user would otherwise pick, and it has no tool for
//     the others);
//   - loopback: a go-fuse loopback mount of the exported directory, the
//     FUSE ceiling (same kernel path, no network and no NFS);
//   - rdmafs-tcp-uring: where the kernel has FUSE over io_uring (the fuse
//     module's enable_uring, which the benchmark turns on for this mount
//     only and puts back), an rdmafs mount over TCP that takes its FUSE
//     requests through io_uring, and rdmafs-soft-uring, the same over soft
//     RDMA, whose READ data the server places in the ring entries;
//     rdmafs-tcp and rdmafs-soft use /dev/fuse (noio_uring);
//   - rdmafs-tcp-baseline and rdmafs-soft-baseline: with -baseline BIN,
//     the same mounts as rdmafs-tcp and rdmafs-soft made by another build
//     of rdmafs, to measure a change in one run.
//
// It prints one table with each figure, the ratios of each rdmafs mount to
// the loopback and to libnfs, and whether the sequential rows meet their
// targets (at least 0.8 of the loopback, ahead of libnfs); then what
// each operation cost the rdmafs client (CPU µs, read and write system
// calls, context switches) and the server (CPU µs); then io_uring against
// /dev/fuse over TCP, with the io_uring channel's targets (at least 1.3 times on the
// small operations, no slower on the sequential ones), and over soft RDMA,
// each pair measured in -pairrounds rounds, its two mounts taking turns.
// Machines are shared and
// noisy: compare the ratios, which are measured in the same run. It also
// writes the table as -out/hostbench.csv and draws it as
// -out/hostbench.svg.
//
// Run as root: go run ./bench/hostbench (make bench). It needs fio,
// libnfs-utils and fuse3.
package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"log"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/rdmafs/rdmafs/bench/chart"
	"github.com/rdmafs/rdmafs/bench/procstat"
)

var (
	sizeMiB   = flag.Int("size", 1024, "MiB of the sequential file")
	files     = flag.Int("files", 10000, "files of the small-file workload")
	randSecs  = flag.Int("randsecs", 15, "seconds of the random-read workload")
	keep      = flag.Bool("keep", false, "keep the work directory")
	workDir   = flag.String("dir", "", "work directory (default: a new one in /tmp)")
	profile   = flag.Bool("profile", false, "write CPU profiles of the rdmafs clients and server into the work directory")
	mountOpts = flag.String("o", "", "extra rdmafs mount options")
	outDir    = flag.String("out", "bench/out", "directory for hostbench.csv and hostbench.svg")
	baseline  = flag.String("baseline", "", "an rdmafs binary of another build (an earlier commit's) to mount over TCP and soft RDMA next to this one's, with a table of each pair")
	rounds    = flag.Int("pairrounds", 3, "rounds of the workloads of each pair table (io_uring against /dev/fuse, -baseline), the pair's two mounts taking turns")
)

// client is one rdmafs mount of the export.
type client struct {
	name, mnt string
}

type bench struct {
	dir, bin, export string
	port, rdmaPort   int
	serve            *exec.Cmd
	clients          []client // rdmafs-tcp, rdmafs-soft, and rdmafs-tcp-uring and rdmafs-soft-uring if the kernel has it
	loopMnt          string
	loop             *exec.Cmd
	srcFile          string // a local file of the sequential size, for nfs-cp
}

// use is what one client's run of a workload cost.
type use struct {
	ops    int64
	client procstat.Process
	server procstat.Process
	err    error
}

type row struct {
	name, unit string
	seq        bool      // a sequential row, with targets
	rdmafs     []float64 // per client
	cost       []use     // per client
	libnfs, lo float64
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

	var rows []row
	seq := int64(*sizeMiB) << 20

	// run returns a workload's figure and how many operations it counts.
	// Each workload starts with the next client in turn, so that none is
	// always measured first (on a cold machine) or last (after the others
	// filled the server's memory).
	first := 0
	measure := func(name, unit string, isSeq bool, run func(mnt string) (float64, int64), libnfs func() float64) {
		n := 2 // rdmafs-tcp and rdmafs-soft: the other mounts are the pair tables' (pairWorkloads.table)
		r := row{name: name, unit: unit, seq: isSeq, rdmafs: make([]float64, n), cost: make([]use, n)}
		for k := range n {
			i := (first + k) % n
			c := b.clients[i]
			pid := b.clientPid(c.mnt)
			c0, err0 := procstat.ReadProcess(pid)
			s0, err1 := procstat.ReadProcess(b.serve.Process.Pid)
			v, ops := run(c.mnt)
			c1, err2 := procstat.ReadProcess(pid)
			s1, err3 := procstat.ReadProcess(b.serve.Process.Pid)
			u := use{ops: ops, client: c1.Sub(c0), server: s1.Sub(s0)}
			for _, err := range []error{err0, err1, err2, err3} {
				if err != nil && u.err == nil {
					u.err = err
				}
			}
			r.rdmafs[i], r.cost[i] = v, u
		}
		first++
		r.lo, _ = run(b.loopMnt)
		if libnfs != nil {
			r.libnfs = libnfs()
		}
		rows = append(rows, r)
		log.Printf("%-30s rdmafs-tcp %8.0f  rdmafs-soft %8.0f  libnfs %8.0f  loopback %8.0f %s", name, r.rdmafs[0], r.rdmafs[1], r.libnfs, r.lo, unit)
	}

	seqWrite := func(mnt string) (float64, int64) {
		// Every mount shows the same export: each client writes a new
		// file, not over the one the client before it wrote.
		os.Remove(filepath.Join(mnt, "fio.dat"))
		return fio(mnt, "--rw=write", "--bs=1M", fmt.Sprintf("--size=%d", seq), "--end_fsync=1", "--ioengine=psync")
	}
	seqRead := func(mnt string) (float64, int64) {
		dropCaches()
		return fio(mnt, "--rw=read", "--bs=1M", fmt.Sprintf("--size=%d", seq), "--ioengine=psync")
	}
	randRead := func(mnt string) (float64, int64) {
		return fio(mnt, "--rw=randread", "--bs=4k", "--iodepth=16", "--ioengine=libaio", "--direct=1",
			fmt.Sprintf("--size=%d", seq), fmt.Sprintf("--runtime=%d", *randSecs), "--time_based")
	}
	// smallFiles returns the files per second of the whole workload and
	// of its create, stat and unlink phases.
	smallFiles := func(mnt string) (v float64, p [3]float64) {
		out := run(filepath.Join(b.bin, "smallfiles"), "-n", strconv.Itoa(*files), mnt)
		fmt.Sscanf(out, "files/s %f create %f stat %f unlink %f", &v, &p[0], &p[1], &p[2])
		return v, p
	}

	measure("seq write 1 MiB, fsync at end", "MB/s", true, seqWrite, func() float64 {
		start := time.Now()
		run("nfs-cp", b.srcFile, b.nfsURL("libnfs.dat"))
		return float64(seq) / time.Since(start).Seconds() / 1e6
	})
	measure("seq read 1 MiB, cold cache", "MB/s", true, seqRead, func() float64 {
		dropCaches()
		start := time.Now()
		run("nfs-cp", b.nfsURL("libnfs.dat"), filepath.Join(b.dir, "libnfs-read.dat"))
		d := time.Since(start)
		os.Remove(filepath.Join(b.dir, "libnfs-read.dat"))
		return float64(seq) / d.Seconds() / 1e6
	})
	measure("rand read 4 KiB, iodepth 16", "IOPS", false, randRead, nil)
	measure(fmt.Sprintf("create+stat+unlink %d files", *files), "files/s", false, func(mnt string) (float64, int64) {
		v, _ := smallFiles(mnt)
		return v, int64(*files)
	}, nil)

	names := []string{b.clients[0].name, b.clients[1].name}
	fmt.Printf("\nmake bench %s: rdmafs over TCP and over soft RDMA against `rdmafs serve` on loopback (export on tmpfs, %d MiB file)\n\n",
		time.Now().Format("2006-01-02 15:04"), *sizeMiB)
	fmt.Printf("| %-32s | %11s | %11s | %8s | %8s | %-7s | %8s | %8s | %8s | %8s | %-22s |\n", "workload",
		names[0], names[1], "libnfs", "loopback", "unit", "tcp/loop", "soft/loop", "tcp/lib", "soft/lib", "target (met: tcp, soft)")
	fmt.Printf("|%s|%s:|%s:|%s:|%s:|%s|%s:|%s:|%s:|%s:|%s|\n", dashes(34), dashes(12), dashes(12), dashes(9), dashes(9),
		dashes(9), dashes(9), dashes(10), dashes(9), dashes(10), dashes(24))
	for _, r := range rows {
		lib, libRatio := "n/a", []string{"n/a", "n/a"}
		if r.libnfs > 0 {
			lib = fmt.Sprintf("%.0f", r.libnfs)
			libRatio = []string{fmt.Sprintf("%.2f", r.rdmafs[0]/r.libnfs), fmt.Sprintf("%.2f", r.rdmafs[1]/r.libnfs)}
		}
		target := ""
		if r.seq {
			target = fmt.Sprintf(">=0.8 loop, >1 lib: %s, %s", meets(r.rdmafs[0], r.lo, r.libnfs), meets(r.rdmafs[1], r.lo, r.libnfs))
		}
		fmt.Printf("| %-32s | %11.0f | %11.0f | %8s | %8.0f | %-7s | %8.2f | %9.2f | %8s | %9s | %-23s |\n",
			r.name, r.rdmafs[0], r.rdmafs[1], lib, r.lo, r.unit, r.rdmafs[0]/r.lo, r.rdmafs[1]/r.lo, libRatio[0], libRatio[1], target)
	}
	fmt.Printf("\ncost per operation (1 MiB, 4 KiB I/O, or file) of each rdmafs client: its CPU µs, read/write system calls, context switches; the server's CPU µs\n\n")
	fmt.Printf("| %-32s |", "workload")
	for _, n := range names {
		fmt.Printf(" %s µs | syscalls | ctxsw | server µs |", n)
	}
	fmt.Println()
	fmt.Printf("|%s|", dashes(34))
	for _, n := range names {
		fmt.Printf("%s:|%s:|%s:|%s:|", dashes(len(n)+4), dashes(9), dashes(6), dashes(10))
	}
	fmt.Println()
	for _, r := range rows {
		fmt.Printf("| %-32s |", r.name)
		for i, n := range names {
			u := r.cost[i]
			if u.err != nil || u.ops == 0 {
				fmt.Printf(" %*s | %8s | %5s | %9s |", len(n)+3, "-", "-", "-", "-")
				continue
			}
			per := func(d time.Duration) float64 { return float64(d.Microseconds()) / float64(u.ops) }
			fmt.Printf(" %*.0f | %8.1f | %5.1f | %9.0f |", len(n)+3, per(u.client.CPU),
				float64(u.client.Syscalls)/float64(u.ops), float64(u.client.CtxSw)/float64(u.ops), per(u.server.CPU))
		}
		fmt.Println()
	}
	pairs := pairWorkloads{seqWrite: seqWrite, seqRead: seqRead, randRead: randRead, smallFiles: smallFiles}
	if u := b.client("rdmafs-tcp-uring"); u >= 0 {
		pairs.table("FUSE channel over TCP: io_uring against /dev/fuse (targets: io_uring >= 1.3x on small operations, >= 1.0x sequential)",
			[2]string{"/dev/fuse", "io_uring"}, b.clients[0].mnt, b.clients[u].mnt, true)
	} else {
		fmt.Printf("\nio_uring vs /dev/fuse: not measured, the kernel has no FUSE over io_uring (%s)\n", enableURing)
	}
	if u := b.client("rdmafs-soft-uring"); u >= 0 {
		pairs.table("FUSE channel over soft RDMA: io_uring, whose entries the data is placed in, against /dev/fuse",
			[2]string{"/dev/fuse", "io_uring"}, b.clients[1].mnt, b.clients[u].mnt, false)
	}
	if base := b.client("rdmafs-tcp-baseline"); base >= 0 {
		pairs.table(fmt.Sprintf("rdmafs over TCP: this build against %s", *baseline),
			[2]string{"baseline", "this"}, b.clients[base].mnt, b.clients[0].mnt, false)
	}
	if base := b.client("rdmafs-soft-baseline"); base >= 0 {
		pairs.table(fmt.Sprintf("rdmafs over soft RDMA: this build against %s", *baseline),
			[2]string{"baseline", "this"}, b.clients[base].mnt, b.clients[1].mnt, false)
	}
	t := &chart.Table{
		Title:   fmt.Sprintf("make bench: rdmafs over TCP and soft RDMA, libnfs and a FUSE loopback (%d MiB file, %s)", *sizeMiB, time.Now().Format("2006-01-02")),
		Columns: []string{names[0], names[1], "libnfs", "loopback"},
		Notes:   []string{"libnfs: nfs-cp, sequential rows only"},
	}
	for _, r := range rows {
		lib := chart.Missing
		if r.libnfs > 0 {
			lib = r.libnfs
		}
		t.Rows = append(t.Rows, chart.Row{Label: r.name, Unit: r.unit, Values: []float64{r.rdmafs[0], r.rdmafs[1], lib, r.lo}})
	}
	csvPath, svgPath, err := chart.WriteFiles(*outDir, "hostbench", t)
	if err != nil {
		fatalf("%v", err)
	}
	fmt.Printf("\ntable: %s, chart: %s\n", csvPath, svgPath)
}

// pairWorkloads are the workloads of a pair table: two mounts of the
// export that differ in one thing (the FUSE channel, or the build).
type pairWorkloads struct {
	seqWrite, seqRead, randRead func(mnt string) (float64, int64)
	smallFiles                  func(mnt string) (float64, [3]float64)
}

// pairRows are a pair table's rows, in the order pairWorkloads.round
// gives their figures; the small operations are smallfiles' phases.
var pairRows = []struct {
	name, unit string
	seq        bool
}{
	{"seq write 1 MiB, fsync at end", "MB/s", true},
	{"seq read 1 MiB, cold cache", "MB/s", true},
	{"rand read 4 KiB, iodepth 16", "IOPS", false},
	{"create", "files/s", false},
	{"stat", "files/s", false},
	{"unlink", "files/s", false},
}

// round runs each workload once on mnt and returns the figures of
// pairRows.
func (w pairWorkloads) round(mnt string) []float64 {
	sw, _ := w.seqWrite(mnt)
	sr, _ := w.seqRead(mnt)
	rr, _ := w.randRead(mnt)
	_, p := w.smallFiles(mnt)
	return []float64{sw, sr, rr, p[0], p[1], p[2]}
}

// table runs -pairrounds rounds of the workloads on mounts a and b, one
// mount's round after the other's and the first of each round in turn,
// and prints each row's medians and the median of its rounds' ratios b/a
// (a single run of each is noise on a shared machine: the ratios of one
// row moved from 0.5 to 1.4 between runs), with the rounds' ratios. The
// stat row stays noisy at a few thousand files: its phase is one GETATTR
// per file, a tenth of a second for 3000 (a second pass would be answered
// from the kernel's attribute cache, not by rdmafs). With targets,
// the io_uring channel's (at least 1.3 on small operations, 1.0 on sequential ones)
// for the median ratio.
func (w pairWorkloads) table(title string, names [2]string, a, b string, targets bool) {
	n := max(*rounds, 1)
	figs := [2][][]float64{}
	for i := range n {
		order := [2]int{0, 1}
		if i%2 == 1 {
			order = [2]int{1, 0}
		}
		for _, k := range order {
			figs[k] = append(figs[k], w.round([2]string{a, b}[k]))
		}
	}
	fmt.Printf("\n%s; medians of %d rounds\n\n", title, n)
	fmt.Printf("| %-32s | %9s | %9s | %-7s | %11s | %-20s | %-6s |\n", "workload", names[0], names[1], "unit", "ratio", "rounds", "target")
	fmt.Printf("|%s|%s:|%s:|%s|%s:|%s|%s|\n", dashes(34), dashes(10), dashes(10), dashes(9), dashes(12), dashes(22), dashes(8))
	for r, row := range pairRows {
		var va, vb, ratios []float64
		var each []string
		for i := range n {
			x, y := figs[0][i][r], figs[1][i][r]
			va, vb = append(va, x), append(vb, y)
			if x > 0 {
				ratios = append(ratios, y/x)
				each = append(each, fmt.Sprintf("%.2f", y/x))
			}
		}
		ratio := median(ratios)
		met := "-"
		if targets {
			want := 1.3
			if row.seq {
				want = 1.0
			}
			met = "no"
			if len(ratios) > 0 && ratio >= want {
				met = "yes"
			}
		}
		fmt.Printf("| %-32s | %9.0f | %9.0f | %-7s | %11.2f | %-20s | %-6s |\n", row.name, median(va), median(vb), row.unit, ratio, strings.Join(each, " "), met)
	}
}

// median is the middle of v (the mean of the two middle ones), 0 for none.
func median(v []float64) float64 {
	if len(v) == 0 {
		return 0
	}
	v = slices.Clone(v)
	slices.Sort(v)
	if len(v)%2 == 1 {
		return v[len(v)/2]
	}
	return (v[len(v)/2-1] + v[len(v)/2]) / 2
}

// client returns the index of the client named name, or -1.
func (b *bench) client(name string) int {
	for i, c := range b.clients {
		if c.name == name {
			return i
		}
	}
	return -1
}

// enableURing is the fuse module's switch for FUSE over io_uring.
const enableURing = "/sys/module/fuse/parameters/enable_uring"

// meets says whether v is at least 0.8 of the loopback and ahead of libnfs.
func meets(v, loop, lib float64) string {
	if loop <= 0 || lib <= 0 {
		return "-"
	}
	if v >= 0.8*loop && v > lib {
		return "yes"
	}
	return "no"
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
	b.serve = exec.Command(filepath.Join(b.bin, "rdmafs"), "serve", "-o",
		"port=0,no_root_squash,proto=rdma,provider=soft,rdmaport=0", b.export)
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
	portRE := regexp.MustCompile(`on port (\d+) \(NFSv3 and MOUNT\)`)
	rdmaRE := regexp.MustCompile(`NFSv3 over RDMA \(provider=soft\) on port (\d+)`)
	for (b.port == 0 || b.rdmaPort == 0) && sc.Scan() {
		if m := portRE.FindStringSubmatch(sc.Text()); m != nil {
			b.port, _ = strconv.Atoi(m[1])
		}
		if m := rdmaRE.FindStringSubmatch(sc.Text()); m != nil {
			b.rdmaPort, _ = strconv.Atoi(m[1])
		}
	}
	go func() {
		for sc.Scan() {
		}
	}()
	if b.port == 0 || b.rdmaPort == 0 {
		fatal("rdmafs serve did not start")
	}

	rdmafs := filepath.Join(b.bin, "rdmafs")
	mounts := []struct{ name, opts, bin string }{
		{"rdmafs-tcp", fmt.Sprintf("noio_uring,port=%d,mountport=%d", b.port, b.port), rdmafs},
		{"rdmafs-soft", fmt.Sprintf("noio_uring,proto=rdma,provider=soft,port=%d,mountport=%d", b.rdmaPort, b.port), rdmafs},
	}
	// The io_uring mount: the kernel offers FUSE over io_uring to mounts
	// made while enable_uring is Y, and a mount keeps what it negotiated.
	oldURing, uringErr := os.ReadFile(enableURing)
	if uringErr == nil {
		mounts = append(mounts,
			struct{ name, opts, bin string }{"rdmafs-tcp-uring", fmt.Sprintf("io_uring,port=%d,mountport=%d", b.port, b.port), rdmafs},
			struct{ name, opts, bin string }{"rdmafs-soft-uring", fmt.Sprintf("io_uring,proto=rdma,provider=soft,port=%d,mountport=%d", b.rdmaPort, b.port), rdmafs})
	}
	if *baseline != "" {
		// Without noio_uring, which builds older than the io_uring
		// channel refuse: those serve through /dev/fuse, and so does
		// every later build by default.
		mounts = append(mounts,
			struct{ name, opts, bin string }{"rdmafs-tcp-baseline", strings.TrimPrefix(mounts[0].opts, "noio_uring,"), *baseline},
			struct{ name, opts, bin string }{"rdmafs-soft-baseline", strings.TrimPrefix(mounts[1].opts, "noio_uring,"), *baseline})
	}
	for _, c := range mounts {
		mnt := filepath.Join(b.dir, c.name)
		os.MkdirAll(mnt, 0o755)
		opts := c.opts
		if *mountOpts != "" {
			opts += "," + *mountOpts
		}
		mount := exec.Command(c.bin, "-o", opts, "127.0.0.1:/", mnt)
		if *profile {
			mount.Env = append(os.Environ(), "RDMAFS_CPUPROFILE="+filepath.Join(b.dir, "cpu-"+c.name))
		}
		uring := strings.HasPrefix(c.opts, "io_uring,")
		if uring {
			os.WriteFile(enableURing, []byte("Y"), 0)
		}
		out, err := mount.CombinedOutput()
		if uring {
			os.WriteFile(enableURing, bytes.TrimSpace(oldURing), 0)
		}
		if err != nil {
			fatalf("mount %s: %v: %s", c.name, err, out)
		}
		if uring {
			// A mount whose queues failed falls back to /dev/fuse:
			// its rows would not be of io_uring.
			stats := run(filepath.Join(b.bin, "rdmafs"), "stats", "-json", mnt)
			if !strings.Contains(stats, `"fuse_channel":"io_uring"`) {
				fatalf("mount %s does not serve through io_uring: %s", c.name, stats)
			}
		}
		b.clients = append(b.clients, client{name: c.name, mnt: mnt})
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

// clientPid finds the rdmafs process serving mnt.
func (b *bench) clientPid(mnt string) int { return procstat.FindMountDaemon("rdmafs", mnt) }

func (b *bench) cleanup() {
	atExit = func() {}
	for _, c := range b.clients {
		exec.Command("fusermount3", "-u", c.mnt).Run()
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
// IOPS for a random job, and its number of I/Os.
func fio(dir string, args ...string) (float64, int64) {
	all := append([]string{"--name=bench", "--directory=" + dir, "--filename=fio.dat", "--output-format=json", "--group_reporting"}, args...)
	out := run("fio", all...)
	type stat struct {
		BwBytes  float64 `json:"bw_bytes"`
		IOPS     float64 `json:"iops"`
		TotalIOs int64   `json:"total_ios"`
	}
	var res struct {
		Jobs []struct{ Read, Write stat }
	}
	if i := strings.IndexByte(out, '{'); i > 0 {
		out = out[i:]
	}
	if err := json.Unmarshal([]byte(out), &res); err != nil || len(res.Jobs) == 0 {
		fatalf("fio output: %v: %s", err, out)
	}
	j := res.Jobs[0]
	if strings.Contains(strings.Join(args, " "), "randread") {
		return j.Read.IOPS, j.Read.TotalIOs
	}
	return (j.Read.BwBytes + j.Write.BwBytes) / 1e6, j.Read.TotalIOs + j.Write.TotalIOs
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
