package fs

import (
	"os"
	"runtime"
	"sync"

	"github.com/hanwen/go-fuse/v2/fuse"
)

// fuseReaders is how many goroutines may wait for FUSE requests: go-fuse's
// ceiling, and as many requests as are usually in flight (an aio queue of
// 16, the kernel's readahead).
const fuseReaders = 16

// newServer makes the FUSE server with fuseReaders request readers. It
// also returns the server's /dev/fuse descriptor, which go-fuse does not
// export, for the io_uring channel (fusechannel.go): the one that making
// the server opened (-1 if that is not clear).
//
// go-fuse lets as many goroutines wait for requests as GOMAXPROCS was when
// the server was made, and ends the goroutine that finished a request when
// that many are waiting already. Its handlers are meant to be busy on the
// CPU; rdmafs's wait on the network. With 2 CPUs and 16 calls in flight,
// nearly every request ended its goroutine and a new one read the next,
// whose small stack then grew (was copied) on the way down to the RPC:
// stack growth was 4.5% of rdmafs's CPU time on 4 KiB random reads in the
// guest benchmark. Goroutines waiting in read(2) on /dev/fuse cost a
// thread each and no CPU.
//
// Measured on the host benchmark over TCP (bench/hostbench at 256 MiB
// and 2000 files, on a shared 2-CPU machine, 2026-12-01; medians, ranges
// in brackets): 4 KiB random reads at iodepth 16 made 10,900 IOPS
// [4,700-17,700] in six runs with 16 readers and 5,800 [5,200-9,400] in
// three with go-fuse's 2, so the readers stay. create+stat+unlink, one
// request at a time, went the other way: 1,640 files/s [810-4,110] with
// 16, 4,050 [3,940-4,620] with 2 (not profiled); 4 readers fell in
// between (8,800 IOPS, 3,150 files/s, three runs).
//
// go-fuse reads GOMAXPROCS once, in NewServer, and offers no option for
// it, so GOMAXPROCS is raised for that call only, and put back as it was:
// to the runtime's own choice (which follows the CPUs the process may
// use) unless the environment set it. Mounts made at once take turns, so
// that none puts back another's raised value.
func newServer(fs fuse.RawFileSystem, dir string, opts *fuse.MountOptions) (*fuse.Server, int, error) {
	gomaxprocsMu.Lock()
	defer gomaxprocsMu.Unlock()
	prev := runtime.GOMAXPROCS(max(fuseReaders, runtime.GOMAXPROCS(0)))
	defer func() {
		if os.Getenv("GOMAXPROCS") == "" {
			runtime.SetDefaultGOMAXPROCS()
		} else {
			runtime.GOMAXPROCS(prev)
		}
	}()
	before := fuseDevFDs()
	server, err := fuse.NewServer(fs, dir, opts)
	if err != nil {
		return nil, -1, err
	}
	return server, newFUSEDevFD(before, fuseDevFDs()), nil
}

// gomaxprocsMu is held while newServer has GOMAXPROCS raised (and
// while it looks for the descriptor its server opened).
var gomaxprocsMu sync.Mutex
