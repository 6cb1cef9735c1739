// Command fusechannel measures rdmafs's two FUSE channels alone, without
// NFS or a network behind them: one in-memory file system (go-fuse's
// MemRegularFile nodes) mounted twice in this process, one mount served
// through /dev/fuse by fs/fusedev and the other through FUSE over io_uring
// by fs/fuseuring, as rdmafs serves its mounts, and the same requests
// through each, the two mounts taking turns in each round:
//
//   - stat, 1 and 16 callers: entry and attribute timeouts are 0, so each
//     stat is a LOOKUP answered by the file system;
//   - 4 KiB O_DIRECT pread, 1 and 16 callers: one synchronous READ each;
//   - 4 KiB O_DIRECT random reads by fio (libaio, iodepth 16), as
//     bench/hostbench's row: FUSE sends them as asynchronous (background)
//     READs, up to 16 at once.
//
// It prints each figure per second, the ratio io_uring / /dev/fuse of
// each round and their median. What it tells apart from hostbench: how
// much of a difference between the channels is the channel's own, with
// nothing else on the machine's CPUs. The callers of the first four rows
// are goroutines of this process (the ring's entries belong to the
// worker threads, which never call into the mount, so this is safe);
// fio is a process of its own.
//
// Run as root: go run ./bench/fusechannel. It turns on the fuse module's
// enable_uring for the io_uring mount and puts it back, and needs fio.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"log"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	gofs "github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"
	"golang.org/x/sys/unix"

	"github.com/rdmafs/rdmafs/fs/fusedev"
	"github.com/rdmafs/rdmafs/fs/fuseuring"
)

var (
	secs   = flag.Int("secs", 3, "seconds of each workload on each mount in each round")
	rounds = flag.Int("rounds", 3, "rounds")
)

// files are the file system's files, of fileSize bytes each.
const (
	files    = 16
	fileSize = 1 << 20
	maxIO    = 1 << 20
)

const enableURing = "/sys/module/fuse/parameters/enable_uring"

// cleanups undo the setup, last first, also when fatalf ends the program:
// a process that exits with files open on a mount it serves hangs in the
// close (FLUSH) of the first, which only it could answer.
var cleanups []func()

func fatalf(format string, args ...any) {
	for i := len(cleanups) - 1; i >= 0; i-- {
		cleanups[i]()
	}
	log.Fatalf(format, args...)
}

// root is the file system: files f0 ... f15.
type root struct{ gofs.Inode }

func (r *root) OnAdd(ctx context.Context) {
	for i := range files {
		f := r.NewPersistentInode(ctx, &gofs.MemRegularFile{Data: make([]byte, fileSize), Attr: fuse.Attr{Mode: 0o644}}, gofs.StableAttr{})
		r.AddChild("f"+strconv.Itoa(i), f, false)
	}
}

// mount mounts the file system on a new directory, served through
// io_uring if uring, and returns the directory; a cleanup unmounts it.
func mount(uring bool) string {
	dir, err := os.MkdirTemp("", "fusechannel")
	if err != nil {
		fatalf("%v", err)
	}
	zero := time.Duration(0)
	opts := &gofs.Options{AttrTimeout: &zero, EntryTimeout: &zero}
	opts.MaxWrite = maxIO
	opts.MaxBackground = 64
	opts.DisableSplice = true
	opts.ExtraCapabilities = fuse.CAP_ASYNC_DIO
	if uring {
		opts.ExtraCapabilities |= fuse.CAP_OVER_IO_URING
	}
	raw := gofs.NewNodeFS(&root{}, opts)
	before, err := fusedev.Descriptors()
	if err != nil {
		fatalf("%v", err)
	}
	server, err := fuse.NewServer(raw, dir, &opts.MountOptions)
	if err != nil {
		fatalf("%v", err)
	}
	devFD := -1
	after, err := fusedev.Descriptors()
	if err != nil {
		fatalf("%v", err)
	}
	for fd := range after {
		if !before[fd] {
			devFD = fd
		}
	}
	ps := fuse.NewProtocolServer(raw, &opts.MountOptions)
	if err := fusedev.Initialize(ps, server.KernelSettings()); err != nil {
		fatalf("%v", err)
	}
	readers := 16 // rdmafs's fuseReaders
	var ring *fuseuring.Channel
	if uring {
		if server.KernelSettings().Flags64()&fuse.CAP_OVER_IO_URING == 0 {
			fatalf("the kernel did not offer FUSE over io_uring")
		}
		if ring, err = fuseuring.Start(fuseuring.Config{DevFD: devFD, Server: ps, MaxWrite: maxIO, MaxPages: maxIO / os.Getpagesize()}); err != nil {
			fatalf("%v", err)
		}
		readers = 2 // rdmafs's uringDevReaders
	}
	loop, err := fusedev.Serve(fusedev.Config{DevFD: devFD, Server: ps, Readers: readers, MaxWrite: maxIO, MaxRead: maxIO})
	if err != nil {
		fatalf("%v", err)
	}
	if err := server.WaitMount(); err != nil {
		fatalf("%v", err)
	}
	cleanups = append(cleanups, func() {
		syscall.Unmount(dir, unix.MNT_DETACH)
		loop.Close()
		if ring != nil {
			ring.Close()
		}
		os.Remove(dir)
	})
	return dir
}

// callers runs op in n goroutines for d and returns the operations per
// second; op gets its caller's number and a count.
func callers(n int, d time.Duration, op func(caller, i int) error) float64 {
	var total atomic.Int64
	var wg sync.WaitGroup
	start := time.Now()
	stop := start.Add(d)
	for c := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			i := 0
			for time.Now().Before(stop) {
				if err := op(c, i); err != nil {
					fatalf("%v", err)
				}
				i++
			}
			total.Add(int64(i))
		}()
	}
	wg.Wait()
	return float64(total.Load()) / time.Since(start).Seconds()
}

// mountUnderTest is one mount and its files, opened O_DIRECT.
type mountUnderTest struct {
	dir string
	fds [files]int
}

func (m *mountUnderTest) stat(n int) float64 {
	return callers(n, time.Duration(*secs)*time.Second, func(c, i int) error {
		var st unix.Stat_t
		return unix.Stat(m.dir+"/f"+strconv.Itoa((c+i)%files), &st)
	})
}

func (m *mountUnderTest) pread(n int) float64 {
	return callers(n, time.Duration(*secs)*time.Second, func(c, i int) error {
		buf := make([]byte, 4096)
		_, err := unix.Pread(m.fds[c%files], buf, int64(i*4096%fileSize))
		return err
	})
}

func (m *mountUnderTest) fio() float64 {
	out, err := exec.Command("fio", "--name=fusechannel", "--directory="+m.dir, "--filename=f0", "--rw=randread", "--bs=4k",
		"--iodepth=16", "--ioengine=libaio", "--direct=1", fmt.Sprintf("--size=%d", fileSize),
		fmt.Sprintf("--runtime=%d", *secs), "--time_based", "--output-format=json").Output()
	if err != nil {
		fatalf("fio: %v", err)
	}
	var res struct {
		Jobs []struct{ Read struct{ IOPS float64 } }
	}
	if i := strings.IndexByte(string(out), '{'); i > 0 {
		out = out[i:]
	}
	if err := json.Unmarshal(out, &res); err != nil || len(res.Jobs) == 0 {
		fatalf("fio output: %v: %s", err, out)
	}
	return res.Jobs[0].Read.IOPS
}

func main() {
	flag.Parse()
	log.SetFlags(0)
	log.SetPrefix("fusechannel: ")
	if _, err := exec.LookPath("fio"); err != nil {
		fatalf("fio is missing: apt-get install fio")
	}
	old, err := os.ReadFile(enableURing)
	if err != nil {
		fmt.Printf("fusechannel: not measured: the kernel has no FUSE over io_uring (%v)\n", err)
		return
	}
	devDir := mount(false)
	// The kernel offers FUSE over io_uring to mounts made while
	// enable_uring is Y; a mount keeps what it negotiated.
	if err := os.WriteFile(enableURing, []byte("Y"), 0); err != nil {
		fatalf("%v", err)
	}
	uringDir := mount(true)
	os.WriteFile(enableURing, old, 0)

	mounts := [2]*mountUnderTest{{dir: devDir}, {dir: uringDir}}
	for _, m := range mounts {
		for i := range m.fds {
			m.fds[i] = -1
		}
	}
	// The descriptors close before the mounts go.
	cleanups = append(cleanups, func() {
		for _, m := range mounts {
			for _, fd := range m.fds {
				if fd >= 0 {
					unix.Close(fd)
				}
			}
		}
	})
	for _, m := range mounts {
		for i := range files {
			if m.fds[i], err = unix.Open(m.dir+"/f"+strconv.Itoa(i), unix.O_RDONLY|unix.O_DIRECT, 0); err != nil {
				fatalf("%v", err)
			}
		}
	}

	rows := []struct {
		name, unit string
		run        func(m *mountUnderTest) float64
	}{
		{"stat, 1 caller", "ops/s", func(m *mountUnderTest) float64 { return m.stat(1) }},
		{"stat, 16 callers", "ops/s", func(m *mountUnderTest) float64 { return m.stat(16) }},
		{"4 KiB O_DIRECT pread, 1 caller", "ops/s", func(m *mountUnderTest) float64 { return m.pread(1) }},
		{"4 KiB O_DIRECT pread, 16 callers", "ops/s", func(m *mountUnderTest) float64 { return m.pread(16) }},
		{"4 KiB random read, libaio iodepth 16", "IOPS", (*mountUnderTest).fio},
	}
	figs := make([][2][]float64, len(rows))
	for r := range *rounds {
		for i, row := range rows {
			order := [2]int{0, 1}
			if r%2 == 1 {
				order = [2]int{1, 0}
			}
			for _, k := range order {
				figs[i][k] = append(figs[i][k], row.run(mounts[k]))
			}
		}
	}
	fmt.Printf("\nthe FUSE channels alone (an in-memory file system, no NFS): io_uring against /dev/fuse, %d rounds of %d s, %s\n\n",
		*rounds, *secs, time.Now().Format("2006-01-02 15:04"))
	fmt.Printf("| %-38s | %9s | %9s | %-5s | %6s | %-20s |\n", "workload", "/dev/fuse", "io_uring", "unit", "ratio", "rounds")
	fmt.Printf("|%s|%s:|%s:|%s|%s:|%s|\n", strings.Repeat("-", 40), strings.Repeat("-", 10), strings.Repeat("-", 10),
		strings.Repeat("-", 7), strings.Repeat("-", 7), strings.Repeat("-", 22))
	for i, row := range rows {
		var ratios []float64
		var each []string
		for r := range *rounds {
			x := figs[i][1][r] / figs[i][0][r]
			ratios = append(ratios, x)
			each = append(each, fmt.Sprintf("%.2f", x))
		}
		fmt.Printf("| %-38s | %9.0f | %9.0f | %-5s | %6.2f | %-20s |\n", row.name, median(figs[i][0]), median(figs[i][1]),
			row.unit, median(ratios), strings.Join(each, " "))
	}
	for i := len(cleanups) - 1; i >= 0; i-- {
		cleanups[i]()
	}
}

// median is the middle of v (the mean of the two middle ones).
func median(v []float64) float64 {
	v = slices.Clone(v)
	slices.Sort(v)
	if len(v)%2 == 1 {
		return v[len(v)/2]
	}
	return (v[len(v)/2-1] + v[len(v)/2]) / 2
}
