package fs

import (
	"os"
	"runtime"

	"github.com/hanwen/go-fuse/v2/fuse"
)

// fuseReaders is how many goroutines may wait for FUSE requests: go-fuse's
// ceiling, and as many requests as are usually in flight (an aio queue of
// 16, the kernel's readahead).
const fuseReaders = 16

// newServer makes the FUSE server with fuseReaders request readers.
//
// go-fuse lets as many goroutines wait for requests as GOMAXPROCS was when
// the server was made, and ends the goroutine that finished a request when
// that many are waiting already. Its handlers are meant to be busy on the
// CPU; rdmafs's wait on the network. With 2 CPUs and 16 calls in flight,
// nearly every request ended its goroutine and a new one read the next,
// whose small stack then grew (was copied) on the way down to the RPC:
// stack growth was 4.5% of rdmafs's CPU time on 4 KiB random reads in the
// benchmark. Goroutines waiting in read(2) on /dev/fuse cost a thread
// each and no CPU.
//
// go-fuse reads GOMAXPROCS once, in NewServer, and offers no option for
// it, so GOMAXPROCS is raised for that call only.
func newServer(fs fuse.RawFileSystem, dir string, opts *fuse.MountOptions) (*fuse.Server, error) {
	prev := runtime.GOMAXPROCS(max(fuseReaders, runtime.GOMAXPROCS(0)))
	defer func() {
		if os.Getenv("GOMAXPROCS") == "" {
			// back to the runtime's own choice, which follows the
			// CPUs the process may use
			runtime.SetDefaultGOMAXPROCS()
		} else {
			runtime.GOMAXPROCS(prev)
		}
	}()
	return fuse.NewServer(fs, dir, opts)
}
