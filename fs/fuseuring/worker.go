package fuseuring

import (
	"encoding/binary"
	"fmt"
	"runtime"
	"unsafe"

	"github.com/hanwen/go-fuse/v2/fuse"
	"golang.org/x/sys/unix"
)

// The FUSE side of the ABI (include/uapi/linux/fuse.h).
const (
	cmdRegister       = 1 // FUSE_IO_URING_CMD_REGISTER
	cmdCommitAndFetch = 2 // FUSE_IO_URING_CMD_COMMIT_AND_FETCH

	// struct fuse_uring_req_header: in_out[128] holds the
	// fuse_in_header of a request and the fuse_out_header of its
	// reply, op_in[128] the request's first argument (the operation's
	// own struct; empty for the operations that send only names), and
	// ring_ent_in_out how many bytes of the payload buffer are used.
	hdrInOut       = 0
	hdrOpIn        = 128
	hdrEntInOut    = 256
	hdrPayloadSize = hdrEntInOut + 16 // ring_ent_in_out.payload_sz
	hdrSize        = 288

	inHeaderSize  = 40 // struct fuse_in_header
	outHeaderSize = 16 // struct fuse_out_header
	opInSize      = 128
)

// User data of the two commands a worker's ring can have outstanding.
const (
	tagEntry = 1 // the entry's REGISTER or COMMIT_AND_FETCH
	tagStop  = 2 // the read of the stop eventfd
)

// worker is one ring entry of a CPU's queue and the goroutine that serves
// it: its own io_uring, through which it registers the entry, receives a
// request in it, answers the request, and commits the reply while asking
// for the next, in one io_uring_enter.
//
// The kernel hands a request to an idle entry in the context of the
// thread that submitted the entry's last command (task work), and posts
// the entry's end there too. That thread must therefore be able to run
// the task work: not blocked in a system call on this very mount, as
// go-fuse's WaitMount is when it opens a file there, or the request it
// waits for could be the one never handed over. So the goroutine locks
// its thread from the enter that submits a command until the request
// comes back: the thread that owns an idle entry is always the one
// waiting in io_uring_enter for it. While it answers a request, the entry
// is busy and owned by no waiting thread, and the goroutine is unlocked:
// it waits for the server's reply as any goroutine does. (A goroutine
// locked throughout cost two thread hand-offs per request, one when it
// parked on the reply and one when the reply woke it: 29% of rdmafs's CPU
// time on 4 KiB random reads in the Linux 7.3 guest, in
// stoplockedm/startlockedm, and io_uring ran slower than /dev/fuse.)
type worker struct {
	qid     uint16
	ch      *Channel
	ring    *ring
	mem     []byte         // iovecs, headers and the eventfd's buffer
	iov     *[2]unix.Iovec // headers, payload: what REGISTER names
	hdr     []byte
	payload []byte
	mapped  bool    // payload is the worker's own mapping, not Config.Payloads
	stopFD  int     // eventfd: Close wakes the thread with it
	stopBuf *uint64 // where the eventfd's read lands
	started chan error
	done    chan struct{}
	running bool // run was started
}

// newWorker makes an entry of queue qid with a payload buffer of
// payloadSize bytes: payload if it is not nil, else one of its own.
func newWorker(ch *Channel, qid uint16, payloadSize int, payload []byte) (*worker, error) {
	w := &worker{qid: qid, ch: ch, stopFD: -1, started: make(chan error, 1), done: make(chan struct{})}
	var err error
	if w.ring, err = newRing(2); err != nil {
		return nil, err
	}
	if w.stopFD, err = unix.Eventfd(0, unix.EFD_CLOEXEC); err != nil {
		w.release()
		return nil, fmt.Errorf("fuseuring: queue %d eventfd: %w", qid, err)
	}
	// The kernel reads and writes the buffers from the daemon's
	// context between commands: they live outside the Go heap.
	anon := func(n int) ([]byte, error) {
		return unix.Mmap(-1, 0, n, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS)
	}
	if w.mem, err = anon(4096); err != nil {
		w.release()
		return nil, fmt.Errorf("fuseuring: queue %d headers: %w", qid, err)
	}
	if w.payload = payload; w.payload == nil {
		if w.payload, err = anon(payloadSize); err != nil {
			w.release()
			return nil, fmt.Errorf("fuseuring: queue %d payload buffer: %w", qid, err)
		}
		w.mapped = true
	}
	w.iov = (*[2]unix.Iovec)(unsafe.Pointer(&w.mem[0]))
	w.stopBuf = (*uint64)(unsafe.Pointer(&w.mem[64]))
	w.hdr = w.mem[128 : 128+hdrSize]
	w.iov[0].Base = &w.hdr[0]
	w.iov[0].SetLen(hdrSize)
	w.iov[1].Base = &w.payload[0]
	w.iov[1].SetLen(len(w.payload))
	return w, nil
}

// pushCommand queues a FUSE command for the entry: REGISTER, or
// COMMIT_AND_FETCH of the reply to request unique.
func (w *worker) pushCommand(op uint32, unique uint64) {
	w.ring.push(func(sqe []byte) {
		sqe[0] = opURingCmd
		le := binary.LittleEndian
		le.PutUint32(sqe[4:], uint32(w.ch.devFD))
		le.PutUint32(sqe[8:], op) // cmd_op
		le.PutUint64(sqe[16:], uint64(uintptr(unsafe.Pointer(w.iov))))
		le.PutUint32(sqe[24:], 2)
		le.PutUint64(sqe[32:], tagEntry)
		// struct fuse_uring_cmd_req: flags, commit_id, qid.
		cmd := sqe[sqeCmdOffset:]
		le.PutUint64(cmd[8:], unique)
		le.PutUint16(cmd[16:], w.qid)
	})
}

// pushStopRead queues the read of the stop eventfd.
func (w *worker) pushStopRead() {
	w.ring.push(func(sqe []byte) {
		sqe[0] = opRead
		le := binary.LittleEndian
		le.PutUint32(sqe[4:], uint32(w.stopFD))
		le.PutUint64(sqe[16:], uint64(uintptr(unsafe.Pointer(w.stopBuf))))
		le.PutUint32(sqe[24:], 8)
		le.PutUint64(sqe[32:], tagStop)
	})
}

// run is the worker's goroutine: it registers the entry, then answers
// each request the kernel puts in it, until the kernel ends the entry
// (the connection is gone) or Close stops the worker. Its thread is
// locked while the entry is idle (see worker), and never when run
// returns, so that the runtime keeps the thread: a thread that ends takes
// the io_uring commands it submitted with it.
func (w *worker) run() {
	defer close(w.done)
	runtime.LockOSThread()
	w.pushStopRead()
	w.pushCommand(cmdRegister, 0)
	if _, err := w.ring.enter(w.ring.unsubmitted(), 0, 0); err != nil {
		runtime.UnlockOSThread()
		w.started <- fmt.Errorf("fuseuring: registering an entry of queue %d: %w", w.qid, err)
		return
	}
	// The kernel refuses a REGISTER while io_uring_enter issues it, so
	// a refusal is already there (and the kernel has gone back to
	// /dev/fuse for the mount); a completion that is not an error is a
	// request, which the loop takes.
	if c, ok := w.ring.peek(); ok && c.UserData == tagEntry && c.Res < 0 {
		runtime.UnlockOSThread()
		w.started <- fmt.Errorf("fuseuring: registering an entry of queue %d: %w", w.qid, unix.Errno(-c.Res))
		return
	}
	w.started <- nil // buffered: the goroutine does not park
	for {
		request, stop := false, false
		err := w.ring.submitAndReap(func(c cqe) {
			switch {
			case c.UserData == tagStop:
				stop = true
			case c.Res < 0:
				// ENOTCONN or ECONNABORTED at unmount, or a command
				// the kernel refused: the entry is gone.
				stop = true
				if c.Res != -int32(unix.ENOTCONN) && c.Res != -int32(unix.ECONNABORTED) && c.Res != -int32(unix.ECANCELED) {
					w.ch.logf("fuseuring: an entry of queue %d: %v", w.qid, unix.Errno(-c.Res))
				}
			default:
				request = true
			}
		})
		if err != nil || stop {
			runtime.UnlockOSThread()
			if err != nil {
				w.ch.logf("%v", err)
			}
			return
		}
		if !request {
			continue // interrupted: the entry is still idle, and this thread its owner
		}
		runtime.UnlockOSThread()
		unique := w.answer()
		runtime.LockOSThread()
		w.pushCommand(cmdCommitAndFetch, unique)
	}
}

// answer has the protocol server answer the request in the entry, and
// returns its unique, for the commit.
func (w *worker) answer() uint64 {
	le := binary.LittleEndian
	length := int(le.Uint32(w.hdr[hdrInOut:]))
	unique := le.Uint64(w.hdr[hdrInOut+8:])
	payloadSize := min(int(le.Uint32(w.hdr[hdrPayloadSize:])), len(w.payload))
	opIn := min(max(length-inHeaderSize-payloadSize, 0), opInSize)
	in := [][]byte{w.hdr[hdrInOut : hdrInOut+inHeaderSize], w.hdr[hdrOpIn : hdrOpIn+opIn], w.payload[:payloadSize]}
	// The reply is a stream: its header goes to in_out, the rest to
	// the payload buffer.
	out := [][]byte{w.hdr[hdrInOut : hdrInOut+outHeaderSize], w.payload}
	n, status := w.ch.server.HandleRequest(in, out)
	if !status.Ok() || n < outHeaderSize {
		// A request the protocol server could not parse, or one it
		// does not answer (which the kernel never sends here): the
		// entry must be committed all the same to fetch the next.
		if status.Ok() {
			status = fuse.ENOSYS
		}
		le.PutUint32(w.hdr[hdrInOut:], outHeaderSize)
		le.PutUint32(w.hdr[hdrInOut+4:], uint32(-int32(status)))
		le.PutUint64(w.hdr[hdrInOut+8:], unique)
		n = outHeaderSize
	}
	le.PutUint32(w.hdr[hdrPayloadSize:], uint32(n-outHeaderSize))
	return unique
}

// stop wakes the worker's thread to end it, if it still runs.
func (w *worker) stop() {
	one := [8]byte{1}
	unix.Write(w.stopFD, one[:])
}

// release frees the ring, which cancels its outstanding command, and
// the buffers. The thread must have ended.
func (w *worker) release() {
	if w.ring != nil {
		w.ring.close()
	}
	if w.stopFD >= 0 {
		unix.Close(w.stopFD)
	}
	if w.mapped {
		unix.Munmap(w.payload)
	}
	if w.mem != nil {
		unix.Munmap(w.mem)
	}
	w.payload, w.mem = nil, nil
}
