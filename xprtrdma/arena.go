package xprtrdma

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"unsafe"

	"github.com/rdmafs/rdmafs/sunrpc"
	"github.com/rdmafs/rdmafs/verbs"
)

// arena is memory for registration cut into equal blocks. It lives outside
// the Go heap, so registrations of it stay valid, and for the life of the
// transport, so buffers handed out (to write-behind, to a READ reply being
// read) outlive connections: each connection registers the whole arena
// once. A transport has two: small blocks for Sends and Receives, large
// ones for chunks.
type arena struct {
	mem       *verbs.Memory
	blockSize int
	blocks    []block
	free      chan *block
}

// block is one block of an arena. As a sunrpc.BufferPool it takes back the
// Buffer it was handed out as.
type block struct {
	a   *arena
	idx int
	out atomic.Bool // handed out: a second release would give it to two users
}

func newArena(n, blockSize int) (*arena, error) {
	mem, err := verbs.AllocMemory(n * blockSize)
	if err != nil {
		return nil, fmt.Errorf("rpcrdma: buffers: %w", err)
	}
	a := &arena{mem: mem, blockSize: blockSize, blocks: make([]block, n), free: make(chan *block, n)}
	for i := range a.blocks {
		a.blocks[i] = block{a: a, idx: i}
		a.free <- &a.blocks[i]
	}
	return a, nil
}

// off is where the block starts in its arena.
func (b *block) off() int { return b.idx * b.a.blockSize }

// bytes is the block's memory.
func (b *block) bytes() []byte {
	return b.a.mem.Bytes()[b.off() : b.off()+b.a.blockSize : b.off()+b.a.blockSize]
}

// release gives the block back to its arena. Releasing a block twice is
// a bug that would hand one buffer to two calls (data of one in the
// other): it panics rather than corrupt data.
func (b *block) release() {
	if !b.out.CompareAndSwap(true, false) {
		panic(fmt.Sprintf("rpcrdma: block %d of a %d-byte arena released twice", b.idx, b.a.blockSize))
	}
	b.a.free <- b
}

// PutBuffer implements sunrpc.BufferPool for a block handed out by buffer.
func (b *block) PutBuffer(*sunrpc.Buffer) { b.release() }

// buffer hands the block out as a Buffer of n bytes.
func (b *block) buffer(n int) *sunrpc.Buffer { return sunrpc.NewBuffer(b.bytes()[:n], b) }

// get returns a free block, waiting for one until ctx ends or lost
// closes (the connection the block is for has ended: errLost).
func (a *arena) get(ctx context.Context, lost <-chan struct{}) (*block, error) {
	select {
	case b := <-a.free:
		b.out.Store(true)
		return b, nil
	default:
	}
	select {
	case b := <-a.free:
		b.out.Store(true)
		return b, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	case <-lost:
		return nil, errLost
	}
}

// errLost is the error of a wait that ended because the connection did.
var errLost = errors.New("connection lost while waiting for a buffer")

// tryGet returns a free block, or nil if there is none.
func (a *arena) tryGet() *block {
	select {
	case b := <-a.free:
		b.out.Store(true)
		return b
	default:
		return nil
	}
}

// offsetOf reports where p lies in the arena, if it lies wholly inside.
func (a *arena) offsetOf(p []byte) (int, bool) {
	if len(p) == 0 {
		return 0, false
	}
	mem := a.mem.Bytes()
	base := uintptr(unsafe.Pointer(unsafe.SliceData(mem)))
	start := uintptr(unsafe.Pointer(unsafe.SliceData(p)))
	if start < base || start+uintptr(len(p)) > base+uintptr(len(mem)) {
		return 0, false
	}
	return int(start - base), true
}

func (a *arena) close() error { return a.mem.Free() }
