package fusedev

import (
	"encoding/binary"
	"errors"
	"fmt"
	"sync"

	"github.com/hanwen/go-fuse/v2/fuse"
	"golang.org/x/sys/unix"
)

// The requests whose replies may be as large as the largest READ: READ,
// and a directory listing, for which the kernel asks as much as the
// caller's getdents64 buffer holds, up to max_pages pages, in newer
// kernels (6.18 and 7.3 do; 6.1 asked for one page).
const (
	opRead        = 15 // FUSE_READ
	opReaddir     = 28 // FUSE_READDIR
	opReaddirplus = 44 // FUSE_READDIRPLUS
)

// largeReply reports whether request in may have a reply as large as the
// largest READ.
func largeReply(in []byte) bool {
	if len(in) < inHeaderSize {
		return false
	}
	switch binary.LittleEndian.Uint32(in[4:]) {
	case opRead, opReaddir, opReaddirplus:
		return true
	}
	return false
}

// smallReply bounds every other reply: an extended attribute (64 KiB at
// most) with its headers.
const smallReply = 64<<10 + 4096

// Config is what Serve needs.
type Config struct {
	// DevFD is the mount's /dev/fuse descriptor. Serve duplicates it.
	DevFD int
	// Server answers the requests; it must be set up with Initialize.
	Server *fuse.ProtocolServer
	// Readers is how many goroutines wait for requests; at least one.
	Readers int
	// MaxWrite and MaxRead are the largest WRITE and READ payloads the
	// mount negotiated: they size the buffers.
	MaxWrite, MaxRead int
	Logf              func(format string, args ...any)
}

// Loop is the /dev/fuse readers of one mount.
type Loop struct {
	fd     int
	server *fuse.ProtocolServer
	logf   func(format string, args ...any)
	inSize int
	reads  sync.Pool // *[]byte: large reply buffers, only while answering
	wg     sync.WaitGroup
	once   sync.Once
}

// Serve starts cfg.Readers goroutines that answer the requests on
// /dev/fuse until the mount is gone.
func Serve(cfg Config) (*Loop, error) {
	fd, err := unix.Dup(cfg.DevFD)
	if err != nil {
		return nil, fmt.Errorf("fusedev: dup /dev/fuse: %w", err)
	}
	l := &Loop{
		fd:     fd,
		server: cfg.Server,
		logf:   cfg.Logf,
		// The kernel refuses a read(2) of less than the largest WRITE
		// with its headers (and than FUSE_MIN_READ_BUFFER, 8 KiB); a
		// SETXATTR's value may be 64 KiB.
		inSize: max(cfg.MaxWrite, 64<<10) + 4096,
	}
	if l.logf == nil {
		l.logf = func(string, ...any) {}
	}
	readReply := outHeaderSize + max(cfg.MaxRead, 4096)
	l.reads.New = func() any { b := make([]byte, readReply); return &b }
	for range max(cfg.Readers, 1) {
		l.wg.Add(1)
		go l.read()
	}
	return l, nil
}

// Wait waits for the readers to end, which they do when the kernel lets
// go of the mount (ENODEV).
func (l *Loop) Wait() { l.wg.Wait() }

// Close waits for the mount to be gone, then closes the descriptor: not
// before, lest a reader's read find its number given to another file.
func (l *Loop) Close() {
	l.once.Do(func() {
		l.Wait()
		unix.Close(l.fd)
	})
}

// read answers the requests on /dev/fuse until the mount is gone.
func (l *Loop) read() {
	defer l.wg.Done()
	in := make([]byte, l.inSize)
	small := make([]byte, smallReply)
	// The iovs HandleRequest takes, kept so that a request allocates
	// none of its own here.
	inIov, outIov := make([][]byte, 1), make([][]byte, 1)
	for {
		n, err := unix.Read(l.fd, in)
		switch {
		case err == nil:
		case errors.Is(err, unix.EINTR), errors.Is(err, unix.EAGAIN), errors.Is(err, unix.ENOENT):
			// ENOENT: the request was interrupted before it was read.
			continue
		case errors.Is(err, unix.ENODEV):
			return // unmounted
		default:
			l.logf("fusedev: reading /dev/fuse: %v", err)
			return
		}
		l.answer(in[:n], small, inIov, outIov)
	}
}

// answer answers one request, writing its reply (if it has one) to
// /dev/fuse; inIov and outIov are the reader's one-element iovs.
func (l *Loop) answer(in, small []byte, inIov, outIov [][]byte) {
	out := small
	if largeReply(in) {
		// The data lands in place in the reply (go-fuse hands the
		// file system this buffer), so it is one piece.
		b := l.reads.Get().(*[]byte)
		defer l.reads.Put(b)
		out = *b
	}
	inIov[0], outIov[0] = in, out
	m, status := l.server.HandleRequest(inIov, outIov)
	if !status.Ok() {
		// A request too short to parse: answer it all the same, if it
		// has a header, or its caller waits for ever.
		if len(in) < inHeaderSize {
			return
		}
		le := binary.LittleEndian
		le.PutUint32(out[0:], outHeaderSize)
		errno := -int32(fuse.EIO)
		le.PutUint32(out[4:], uint32(errno))
		le.PutUint64(out[8:], le.Uint64(in[8:]))
		m = outHeaderSize
	}
	if m == 0 {
		return // FORGET and others that have no reply
	}
	if _, err := unix.Write(l.fd, out[:m]); err != nil && !errors.Is(err, unix.ENOENT) && !errors.Is(err, unix.ENODEV) {
		// ENOENT: the kernel no longer waits for it (an interrupted
		// request, an INTERRUPT of one that ended).
		l.logf("fusedev: writing to /dev/fuse: %v", err)
	}
}
