package rpcrdma

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"unsafe"

	"github.com/rdmafs/rdmafs/sunrpc"
	"github.com/rdmafs/rdmafs/verbs"
)

// Arena is memory for registration cut into equal blocks. It lives outside
// the Go heap, so registrations of it stay valid, and for as long as its
// owner keeps it, so buffers handed out (to write-behind, to a READ reply
// being read) outlive connections: each connection registers the whole
// arena once. A client transport has two, for the life of the transport:
// small blocks for Sends and Receives, large ones for chunks; a server
// connection has two of its own.
type Arena struct {
	mem       *verbs.Memory
	blockSize int
	blocks    []Block
	free      chan *Block
}

// Block is one block of an Arena. As a sunrpc.BufferPool it takes back the
// Buffer it was handed out as.
type Block struct {
	a   *Arena
	idx int
	out atomic.Bool // handed out: a second release would give it to two users
}

var _ sunrpc.BufferPool = (*Block)(nil)

// NewArena allocates n blocks of blockSize bytes.
func NewArena(n, blockSize int) (*Arena, error) {
	mem, err := verbs.AllocMemory(n * blockSize)
	if err != nil {
		return nil, fmt.Errorf("rpcrdma: buffers: %w", err)
	}
	a := &Arena{mem: mem, blockSize: blockSize, blocks: make([]Block, n), free: make(chan *Block, n)}
	for i := range a.blocks {
		a.blocks[i] = Block{a: a, idx: i}
		a.free <- &a.blocks[i]
	}
	return a, nil
}

// Mem is the arena's memory, to register.
func (a *Arena) Mem() *verbs.Memory { return a.mem }

// BlockSize is the size of each block.
func (a *Arena) BlockSize() int { return a.blockSize }

// Len is the number of blocks.
func (a *Arena) Len() int { return len(a.blocks) }

// Free is the number of blocks not handed out.
func (a *Arena) Free() int { return len(a.free) }

// Block returns block i, as a work request names it (Index).
func (a *Arena) Block(i int) *Block { return &a.blocks[i] }

// Index is the block's number in its arena.
func (b *Block) Index() int { return b.idx }

// Off is where the block starts in its arena.
func (b *Block) Off() int { return b.idx * b.a.blockSize }

// Bytes is the block's memory.
func (b *Block) Bytes() []byte {
	return b.a.mem.Bytes()[b.Off() : b.Off()+b.a.blockSize : b.Off()+b.a.blockSize]
}

// Release gives the block back to its arena. Releasing a block twice is
// a bug that would hand one buffer to two calls (data of one in the
// other): it panics rather than corrupt data.
func (b *Block) Release() {
	if !b.out.CompareAndSwap(true, false) {
		panic(fmt.Sprintf("rpcrdma: block %d of a %d-byte arena released twice", b.idx, b.a.blockSize))
	}
	b.a.free <- b
}

// PutBuffer implements sunrpc.BufferPool for a block handed out by Buffer.
func (b *Block) PutBuffer(*sunrpc.Buffer) { b.Release() }

// Buffer hands the block out as a Buffer of n bytes.
func (b *Block) Buffer(n int) *sunrpc.Buffer { return sunrpc.NewBuffer(b.Bytes()[:n], b) }

// Get returns a free block, waiting for one until ctx ends or lost
// closes (the connection the block is for has ended: ErrLost).
func (a *Arena) Get(ctx context.Context, lost <-chan struct{}) (*Block, error) {
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
		return nil, ErrLost
	}
}

// ErrLost is the error of a wait for a block that ended because the
// connection did.
var ErrLost = errors.New("rpcrdma: connection lost while waiting for a buffer")

// TryGet returns a free block, or nil if there is none.
func (a *Arena) TryGet() *Block {
	select {
	case b := <-a.free:
		b.out.Store(true)
		return b
	default:
		return nil
	}
}

// OffsetOf reports where p lies in the arena, if it lies wholly inside.
func (a *Arena) OffsetOf(p []byte) (int, bool) {
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

// Close frees the arena's memory.
func (a *Arena) Close() error { return a.mem.Free() }
