package fuseuring

import (
	"fmt"
	"sync/atomic"
	"unsafe"

	"golang.org/x/sys/unix"
)

// The io_uring ABI (include/uapi/linux/io_uring.h) that a ring of FUSE
// commands needs: setup with 128-byte submission entries, the two rings
// and the entry array mapped from the ring's file, IORING_OP_URING_CMD
// entries and their completions.
const (
	setupSQE128     = 1 << 10 // IORING_SETUP_SQE128
	featSingleMmap  = 1 << 0  // IORING_FEAT_SINGLE_MMAP
	enterGetEvents  = 1 << 0  // IORING_ENTER_GETEVENTS
	opRead          = 22      // IORING_OP_READ
	opURingCmd      = 46      // IORING_OP_URING_CMD
	offSQRing       = 0       // IORING_OFF_SQ_RING
	offCQRing       = 0x8000000
	offSQEs         = 0x10000000
	sqeSize         = 128 // with IORING_SETUP_SQE128
	sqeCmdOffset    = 48  // where a URING_CMD's command area starts
	cqeSize         = 16
	sqeCmdAreaBytes = sqeSize - sqeCmdOffset
)

// sqringOffsets is struct io_sqring_offsets.
type sqringOffsets struct {
	Head, Tail, RingMask, RingEntries, Flags, Dropped, Array, Resv1 uint32
	UserAddr                                                        uint64
}

// cqringOffsets is struct io_cqring_offsets.
type cqringOffsets struct {
	Head, Tail, RingMask, RingEntries, Overflow, CQEs, Flags, Resv1 uint32
	UserAddr                                                        uint64
}

// ringParams is struct io_uring_params.
type ringParams struct {
	SQEntries, CQEntries, Flags, SQThreadCPU, SQThreadIdle, Features, WQFd uint32
	Resv                                                                   [3]uint32
	SQOff                                                                  sqringOffsets
	CQOff                                                                  cqringOffsets
}

// cqe is struct io_uring_cqe.
type cqe struct {
	UserData uint64
	Res      int32
	Flags    uint32
}

// ring is one io_uring with 128-byte submission entries, used by one
// goroutine only, whose thread submits and waits (worker.go says why).
type ring struct {
	fd int

	sqMem, cqMem, sqeMem []byte
	single               bool // the completion ring shares sqMem

	sqHead, sqTail, sqMask *uint32
	sqArray                unsafe.Pointer
	sqEntries              uint32

	cqHead, cqTail, cqMask *uint32
	cqes                   unsafe.Pointer
}

// newRing sets up an io_uring of entries submission entries.
func newRing(entries uint32) (*ring, error) {
	var p ringParams
	p.Flags = setupSQE128
	fd, _, errno := unix.Syscall(unix.SYS_IO_URING_SETUP, uintptr(entries), uintptr(unsafe.Pointer(&p)), 0)
	if errno != 0 {
		return nil, fmt.Errorf("fuseuring: io_uring_setup: %w", errno)
	}
	r := &ring{fd: int(fd), sqEntries: p.SQEntries, single: true}
	sqSize := int(p.SQOff.Array + p.SQEntries*4)
	cqSize := int(p.CQOff.CQEs + p.CQEntries*cqeSize)
	single := p.Features&featSingleMmap != 0
	if single {
		sqSize = max(sqSize, cqSize)
	}
	var err error
	if r.sqMem, err = unix.Mmap(r.fd, offSQRing, sqSize, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED|unix.MAP_POPULATE); err != nil {
		r.close()
		return nil, fmt.Errorf("fuseuring: mapping the submission ring: %w", err)
	}
	r.cqMem, r.single = r.sqMem, single
	if !single {
		if r.cqMem, err = unix.Mmap(r.fd, offCQRing, cqSize, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED|unix.MAP_POPULATE); err != nil {
			r.close()
			return nil, fmt.Errorf("fuseuring: mapping the completion ring: %w", err)
		}
	}
	if r.sqeMem, err = unix.Mmap(r.fd, offSQEs, int(p.SQEntries)*sqeSize, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED|unix.MAP_POPULATE); err != nil {
		r.close()
		return nil, fmt.Errorf("fuseuring: mapping the submission entries: %w", err)
	}
	sq := unsafe.Pointer(&r.sqMem[0])
	r.sqHead = (*uint32)(unsafe.Add(sq, p.SQOff.Head))
	r.sqTail = (*uint32)(unsafe.Add(sq, p.SQOff.Tail))
	r.sqMask = (*uint32)(unsafe.Add(sq, p.SQOff.RingMask))
	r.sqArray = unsafe.Add(sq, p.SQOff.Array)
	cq := unsafe.Pointer(&r.cqMem[0])
	r.cqHead = (*uint32)(unsafe.Add(cq, p.CQOff.Head))
	r.cqTail = (*uint32)(unsafe.Add(cq, p.CQOff.Tail))
	r.cqMask = (*uint32)(unsafe.Add(cq, p.CQOff.RingMask))
	r.cqes = unsafe.Add(cq, p.CQOff.CQEs)
	return r, nil
}

// push fills the next submission entry with fill, for the next enter to
// hand to the kernel. It reports false if the submission ring is full.
// Only the ring's worker calls it (worker.go).
func (r *ring) push(fill func(sqe []byte)) bool {
	tail := *r.sqTail
	if tail-atomic.LoadUint32(r.sqHead) >= r.sqEntries {
		return false
	}
	idx := tail & *r.sqMask
	sqe := r.sqeMem[int(idx)*sqeSize : int(idx+1)*sqeSize]
	clear(sqe)
	fill(sqe)
	*(*uint32)(unsafe.Add(r.sqArray, 4*idx)) = idx
	atomic.StoreUint32(r.sqTail, tail+1)
	return true
}

// unsubmitted is the number of entries pushed that the kernel has not
// taken yet.
func (r *ring) unsubmitted() uint32 {
	return *r.sqTail - atomic.LoadUint32(r.sqHead)
}

// enter is io_uring_enter(2).
func (r *ring) enter(toSubmit, minComplete, flags uint32) (int, error) {
	n, _, errno := unix.Syscall6(unix.SYS_IO_URING_ENTER, uintptr(r.fd), uintptr(toSubmit), uintptr(minComplete), uintptr(flags), 0, 0)
	if errno != 0 {
		return int(n), errno
	}
	return int(n), nil
}

// submitAndReap hands the kernel the entries pushed, waits for at
// least one completion, and passes every completion there is to each,
// in order.
func (r *ring) submitAndReap(each func(c cqe)) error {
	head := atomic.LoadUint32(r.cqHead)
	if head == atomic.LoadUint32(r.cqTail) || r.unsubmitted() > 0 {
		wait := uint32(0)
		if head == atomic.LoadUint32(r.cqTail) {
			wait = 1
		}
		if _, err := r.enter(r.unsubmitted(), wait, enterGetEvents); err != nil && err != unix.EINTR {
			return fmt.Errorf("fuseuring: io_uring_enter: %w", err)
		}
	}
	tail := atomic.LoadUint32(r.cqTail)
	for ; head != tail; head++ {
		c := *(*cqe)(unsafe.Add(r.cqes, cqeSize*(head&*r.cqMask)))
		atomic.StoreUint32(r.cqHead, head+1)
		each(c)
	}
	return nil
}

// peek returns the oldest completion without taking it, if there is
// one.
func (r *ring) peek() (cqe, bool) {
	head := atomic.LoadUint32(r.cqHead)
	if head == atomic.LoadUint32(r.cqTail) {
		return cqe{}, false
	}
	return *(*cqe)(unsafe.Add(r.cqes, cqeSize*(head&*r.cqMask))), true
}

// close unmaps the ring and closes its file, which cancels the commands
// still outstanding.
func (r *ring) close() {
	if r.sqeMem != nil {
		unix.Munmap(r.sqeMem)
	}
	if r.cqMem != nil && !r.single {
		unix.Munmap(r.cqMem)
	}
	if r.sqMem != nil {
		unix.Munmap(r.sqMem)
	}
	r.sqeMem, r.cqMem, r.sqMem = nil, nil, nil
	if r.fd >= 0 {
		unix.Close(r.fd)
		r.fd = -1
	}
}
