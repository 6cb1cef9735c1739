package fuseuring

import (
	"encoding/binary"
	"errors"

	"github.com/hanwen/go-fuse/v2/fuse"
	"golang.org/x/sys/unix"
)

// devReaders is how many goroutines read /dev/fuse once the queues
// serve the requests: what still comes there is INTERRUPT, FORGET and
// notification replies, and the requests before every queue was
// registered.
const devReaders = 4

// ServeDev reads /dev/fuse with the protocol server of the queues, in
// place of fuse.Server.Serve, which must not run: so that an INTERRUPT,
// which the kernel sends there, finds the request it interrupts, which
// came through a queue and is known only to this protocol server.
// WaitDev returns once the mount is gone.
func (c *Channel) ServeDev() {
	for range devReaders {
		c.devWG.Add(1)
		go c.readDev()
	}
}

// WaitDev waits for the /dev/fuse readers of ServeDev to end, which
// they do when the kernel lets go of the mount (ENODEV).
func (c *Channel) WaitDev() { c.devWG.Wait() }

// readDev answers the requests on /dev/fuse until the mount is gone.
func (c *Channel) readDev() {
	defer c.devWG.Done()
	in := make([]byte, c.payloadSize+64<<10)
	out := make([]byte, c.payloadSize+4096)
	for {
		n, err := unix.Read(c.devFD, in)
		switch {
		case err == nil:
		case errors.Is(err, unix.EINTR), errors.Is(err, unix.EAGAIN), errors.Is(err, unix.ENOENT):
			// ENOENT: the request was interrupted before it was read.
			continue
		case errors.Is(err, unix.ENODEV):
			return // unmounted
		default:
			c.logf("fuseuring: reading /dev/fuse: %v", err)
			return
		}
		m, status := c.server.HandleRequest([][]byte{in[:n]}, [][]byte{out})
		if !status.Ok() {
			// A request too short to parse: answer it all the same,
			// if it has a header, or its caller waits for ever.
			if n < inHeaderSize {
				continue
			}
			le := binary.LittleEndian
			le.PutUint32(out[0:], outHeaderSize)
			errno := -int32(fuse.EIO)
			le.PutUint32(out[4:], uint32(errno))
			le.PutUint64(out[8:], le.Uint64(in[8:]))
			m = outHeaderSize
		}
		if m == 0 {
			continue // FORGET and others that have no reply
		}
		if _, err := unix.Write(c.devFD, out[:m]); err != nil && !errors.Is(err, unix.ENOENT) && !errors.Is(err, unix.ENODEV) {
			// ENOENT: the kernel no longer waits for it (an
			// interrupted request, an INTERRUPT of one that ended).
			c.logf("fuseuring: writing to /dev/fuse: %v", err)
		}
	}
}
