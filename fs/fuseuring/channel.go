// Package fuseuring serves a FUSE mount through io_uring (Linux 6.14 and
// later): per CPU, a queue of ring entries registered once with the
// kernel, each of which receives a request and commits its reply with
// one io_uring command, FUSE_IO_URING_CMD_COMMIT_AND_FETCH, so that no
// system call per request is left on the hot path.
//
// go-fuse's fuse.Server mounts, answers INIT and writes notifications.
// The ring's requests go to a fuse.ProtocolServer over the same raw file
// system, go-fuse's transport-independent entry point, and so does what
// the kernel still sends on /dev/fuse (interrupts, FORGETs, the requests
// before every queue is registered, notification replies), read by
// fs/fusedev's loop: one protocol server knows every request in flight,
// as an INTERRUPT needs.
//
//	ring.go     io_uring: setup, the mapped rings, submission, reaping
//	worker.go   a worker: one ring entry of a CPU's queue, its buffers,
//	            and the goroutine that answers its requests
//	channel.go  the queues of one mount: start, teardown
package fuseuring

import (
	"fmt"
	"os"
	"strings"
	"sync"

	"github.com/hanwen/go-fuse/v2/fuse"
	"golang.org/x/sys/unix"
)

// enableParam is the fuse module's switch for FUSE over io_uring; the
// kernel offers it (FUSE_OVER_IO_URING in INIT) only while it is Y.
const enableParam = "/sys/module/fuse/parameters/enable_uring"

// Offered reports whether the kernel offers FUSE over io_uring to new
// mounts.
func Offered() bool {
	b, err := os.ReadFile(enableParam)
	return err == nil && strings.TrimSpace(string(b)) == "Y"
}

// DefaultQueueDepth is the number of ring entries per queue when the
// mount options do not say (io_uring_q_depth): as many requests of one
// CPU as may be in flight at once.
const DefaultQueueDepth = 16

// Config is what Start needs.
type Config struct {
	// DevFD is the mount's /dev/fuse descriptor. Start duplicates it.
	DevFD int
	// Server answers the requests; it must be set up with
	// fusedev.Initialize.
	Server *fuse.ProtocolServer
	// MaxWrite and MaxPages size the payload buffers as the kernel
	// requires (the largest WRITE, the largest READ).
	MaxWrite, MaxPages int
	// QueueDepth is the number of entries per queue; 0 means
	// DefaultQueueDepth.
	QueueDepth int
	// Payloads, if set, gives the payload buffers of the entries of
	// the CPUs online: up to n of size bytes each, spread over the
	// queues (the entries without one map their own). The RDMA
	// transport gives its chunk buffers (sunrpc.ReplyBuffers), into
	// which the server writes a READ's data, and from which it pulls a
	// WRITE's, with no copy in rdmafs. release is called at Close, once
	// no entry is in use.
	Payloads func(n, size int) (bufs [][]byte, release func())
	Logf     func(format string, args ...any)
}

// Channel is the io_uring queues of one mount.
type Channel struct {
	devFD   int
	server  *fuse.ProtocolServer
	logf    func(format string, args ...any)
	workers []*worker
	// release gives back the payload buffers Config.Payloads gave.
	release func()
	once    sync.Once
}

// Start sets up a queue per possible CPU, as the kernel requires before
// it sends any request through the ring, of QueueDepth workers each
// (worker.go), registers their entries and serves them. The INIT reply
// must have announced FUSE_OVER_IO_URING.
func Start(cfg Config) (*Channel, error) {
	depth := cfg.QueueDepth
	if depth <= 0 {
		depth = DefaultQueueDepth
	}
	possible, err := readCPUList(possibleCPUs)
	if err != nil {
		return nil, err
	}
	online, err := readCPUList(onlineCPUs)
	if err != nil {
		return nil, err
	}
	fd, err := unix.Dup(cfg.DevFD)
	if err != nil {
		return nil, fmt.Errorf("fuseuring: dup /dev/fuse: %w", err)
	}
	c := &Channel{devFD: fd, server: cfg.Server, logf: cfg.Logf}
	if c.logf == nil {
		c.logf = func(string, ...any) {}
	}
	// The kernel's size (fs/fuse/dev_uring.c): the larger of
	// FUSE_MIN_READ_BUFFER, max_write and max_pages pages.
	pageSize := os.Getpagesize()
	payload := max(8192, cfg.MaxWrite, cfg.MaxPages*pageSize)
	payload = (payload + pageSize - 1) / pageSize * pageSize
	// The kernel makes a queue for every CPU that may come online
	// (num_possible_cpus) and switches to the ring only when each has an
	// entry; requests go to the queue of the CPU their caller runs on.
	// A CPU not online gets one entry: machines often allow far more
	// CPUs than they have, and each idle entry holds a thread.
	given := c.payloads(cfg.Payloads, len(possible), online, depth, payload)
	for qid := range len(possible) {
		n := 1
		if online[qid] {
			n = depth
		}
		for j := range n {
			var buf []byte
			if j < len(given[qid]) {
				buf = given[qid][j]
			}
			w, err := newWorker(c, uint16(qid), payload, buf)
			if err != nil {
				c.Close()
				return nil, err
			}
			c.workers = append(c.workers, w)
		}
	}
	for _, w := range c.workers {
		w.running = true
		go w.run()
	}
	for _, w := range c.workers {
		if err := <-w.started; err != nil {
			c.Close()
			return nil, err
		}
	}
	return c, nil
}

// payloads gets the online queues' payload buffers from get, if it is set,
// and deals them out a queue at a time, so that each queue has a share
// of them if there are fewer than entries: given[qid] are queue qid's.
func (c *Channel) payloads(get func(n, size int) ([][]byte, func()), queues int, online map[int]bool, depth, size int) (given [][][]byte) {
	given = make([][][]byte, queues)
	n := 0
	for qid := range queues {
		if online[qid] {
			n += depth
		}
	}
	if get == nil || n == 0 {
		return given
	}
	bufs, release := get(n, size)
	c.release = release
	if len(bufs) < n {
		c.logf("fuseuring: the transport gave %d of %d buffers of %d bytes for the ring entries: the data of the others is copied to and from their own", len(bufs), n, size)
	}
	for len(bufs) > 0 {
		for qid := range queues {
			if online[qid] && len(bufs) > 0 {
				given[qid] = append(given[qid], bufs[0])
				bufs = bufs[1:]
			}
		}
	}
	return given
}

// Close stops the queues, waits for the requests being answered, and
// frees the rings and buffers. At unmount the kernel has ended every
// entry already; Close is then only the cleanup.
func (c *Channel) Close() {
	c.once.Do(func() {
		for _, w := range c.workers {
			w.stop()
		}
		for _, w := range c.workers {
			if w.running {
				<-w.done
			}
			w.release()
		}
		if c.release != nil {
			c.release()
		}
		unix.Close(c.devFD)
	})
}
