package fs

import (
	"sync"

	"github.com/hanwen/go-fuse/v2/fuse"

	"github.com/rdmafs/rdmafs/fs/fusedev"
)

// fuseReaders is how many goroutines wait for FUSE requests on /dev/fuse
// (fs/fusedev): as many requests as are usually in flight (an aio queue
// of 16, the kernel's readahead). Goroutines waiting in read(2) on
// /dev/fuse cost a thread each and no CPU.
//
// go-fuse's own loop would keep GOMAXPROCS of them (2 on the machines
// here) and end the one that finished a request when that many wait,
// so that the next request's goroutine grows its stack again on the way
// to the RPC: stack growth was 4.5% of rdmafs's CPU time on 4 KiB
// random reads in the guest benchmark. Measured on the host benchmark
// over TCP (bench/hostbench, shared 2-CPU machine, 2026-12-01; medians):
// 16 readers made 10,900 random 4 KiB reads per second at iodepth 16,
// go-fuse's 2 made 5,800. docs/performance.md compares this loop with the
// GOMAXPROCS change it replaced.
const fuseReaders = 16

// uringDevReaders is how many goroutines read /dev/fuse when io_uring
// queues carry the requests: what still comes there is INTERRUPT,
// FORGET, notification replies and the requests before every queue was
// registered.
const uringDevReaders = 4

// newServer mounts dir with go-fuse's server, which answers INIT, and
// returns it with the /dev/fuse descriptor it opened, which go-fuse does
// not export (-1 if that is not clear): rdmafs reads the requests there
// itself (fusechannel.go).
func newServer(fs fuse.RawFileSystem, dir string, opts *fuse.MountOptions) (*fuse.Server, int, error) {
	mountMu.Lock()
	defer mountMu.Unlock()
	before, _ := fusedev.Descriptors() // none read: the descriptor is not clear
	server, err := fuse.NewServer(fs, dir, opts)
	if err != nil {
		return nil, -1, err
	}
	after, _ := fusedev.Descriptors()
	return server, newFUSEDevFD(before, after), nil
}

// mountMu is held while newServer looks for the descriptor its server
// opened, so that mounts made at once do not see each other's.
var mountMu sync.Mutex
