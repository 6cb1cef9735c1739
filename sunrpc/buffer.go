package sunrpc

import (
	"math/bits"
	"sync"

	"github.com/rdmafs/rdmafs/sunrpc/xdr"
)

// Buffer is a pooled byte slice, for received messages and for payloads.
// GetBuffer's buffers come in size classes, the powers of two from 4 KiB
// to MaxBuffer; a transport may hand out buffers of its own (NewBuffer).
type Buffer struct {
	B     []byte
	class int
	pool  BufferPool
}

// BufferPool takes back the buffers it handed out.
type BufferPool interface {
	PutBuffer(*Buffer)
}

// NewBuffer returns a Buffer of b, which Release gives back to pool.
func NewBuffer(b []byte, pool BufferPool) *Buffer { return &Buffer{B: b, pool: pool} }

// PayloadBuffers is implemented by a transport that sends a call's payload
// without copying it when the payload lies in a buffer it handed out, such
// as RPC-over-RDMA, whose buffers are registered memory. A caller that
// fills payloads itself (write-behind) takes its buffers from there.
type PayloadBuffers interface {
	// PayloadBuffer returns a buffer whose B has length n, or nil when
	// the transport has none to give (or n is more than it can place).
	PayloadBuffer(n int) *Buffer
}

// ReplyBuffers is implemented by a transport that can place a reply's
// payload (READ data) straight in memory of its own that a caller holds
// for long (a FUSE ring entry's buffer), when the call names it as
// Call.ReplyInto.
type ReplyBuffers interface {
	// ReserveReplyBuffers hands out up to n buffers of size bytes
	// each (none when it cannot). release gives them back, once no call
	// names them any more.
	ReserveReplyBuffers(n, size int) (bufs [][]byte, release func())
}

const (
	minBufferShift = 12
	maxBufferShift = 24
	// MaxBuffer is the largest Buffer GetBuffer hands out (16 MiB).
	MaxBuffer = 1 << maxBufferShift
)

var bufferPools [maxBufferShift - minBufferShift + 1]sync.Pool

// GetBuffer returns a Buffer whose B has length n (0 <= n <= MaxBuffer).
// Its contents are not cleared.
func GetBuffer(n int) *Buffer {
	class := 0
	if n > 1<<minBufferShift {
		class = bits.Len(uint(n-1)) - minBufferShift
	}
	if b, ok := bufferPools[class].Get().(*Buffer); ok {
		b.B = b.B[:n]
		return b
	}
	return &Buffer{B: make([]byte, n, 1<<(class+minBufferShift)), class: class}
}

// Release gives the buffer back to its pool. Built with the rdmafs_scrub
// tag, it overwrites the buffer first (xdr.Scrub), so a view of it kept
// past its release reads garbage.
func (b *Buffer) Release() {
	xdr.Scrub(b.B)
	if b.pool != nil {
		b.pool.PutBuffer(b)
		return
	}
	bufferPools[b.class].Put(b)
}
