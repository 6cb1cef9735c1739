package fusedev

import (
	"encoding/binary"
	"fmt"
	"unsafe"

	"github.com/hanwen/go-fuse/v2/fuse"
	"golang.org/x/sys/unix"
)

// The sizes of the headers every request and reply start with.
const (
	inHeaderSize  = 40 // struct fuse_in_header
	outHeaderSize = 16 // struct fuse_out_header
)

// Initialize answers a copy of the kernel's INIT (as
// fuse.Server.KernelSettings returns it) with ps, which sets ps up as
// fuse.Server was: the protocol version and the flags negotiated. The
// kernel sends INIT once, and fuse.Server has answered it.
func Initialize(ps *fuse.ProtocolServer, init *fuse.InitIn) error {
	const opInit = 26 // FUSE_INIT
	// fuse.InitIn is the whole request, its header included.
	in := make([]byte, unsafe.Sizeof(*init))
	copy(in, unsafe.Slice((*byte)(unsafe.Pointer(init)), len(in)))
	le := binary.LittleEndian
	le.PutUint32(in[0:], uint32(len(in)))
	le.PutUint32(in[4:], opInit)
	le.PutUint64(in[8:], 1) // unique
	out := make([]byte, 4096)
	n, status := ps.HandleRequest([][]byte{in}, [][]byte{out})
	if !status.Ok() || n < outHeaderSize {
		return fmt.Errorf("fusedev: INIT for the protocol server: %v", status)
	}
	if errno := int32(le.Uint32(out[4:])); errno != 0 {
		return fmt.Errorf("fusedev: INIT for the protocol server: %v", unix.Errno(-errno))
	}
	return nil
}
