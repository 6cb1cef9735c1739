package sunrpc

import (
	"math/bits"
	"sync"
)

// Buffer is a pooled byte slice for received messages. Its size classes
// are the powers of two from 4 KiB to MaxBuffer.
type Buffer struct {
	B     []byte
	class int
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

// Release gives the buffer back to its pool.
func (b *Buffer) Release() {
	bufferPools[b.class].Put(b)
}
