package rpcrdma

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/rdmafs/rdmafs/sunrpc"
	"github.com/rdmafs/rdmafs/sunrpc/xdr"
	"github.com/rdmafs/rdmafs/verbs"
)

// Arena is memory for registration cut into equal blocks. It lives outside
// the Go heap, so registrations of it stay valid, and for as long as its
// owner keeps it, so buffers handed out (to write-behind, to a READ reply
// being read) outlive connections. A client transport has two, for the
// life of the transport: small blocks for Sends and Receives, large ones
// for chunks; a server connection has two of its own.
//
// The blocks come in slabs, the unit of registration. A fixed arena
// (NewArena) is one slab, registered whole. A growing arena
// (NewGrowingArena) maps all its blocks at once (address space only: a
// page untouched costs no memory) but hands out only the blocks of its
// active slabs, which its owner registers (Hooks.Activate): it starts
// with a few, activates more when a caller finds no block free (Grow),
// and, when its peak use over a period left slabs unused, retires them
// (Hooks.Deactivate) and gives their pages back to the kernel. So what
// a transport pins follows what its calls use, as the kernel client's
// does, and every address stays valid for the arena's life.
type Arena struct {
	mem        *verbs.Memory
	blockSize  int
	blocks     []Block
	free       chan *Block
	slabBlocks int
	slabs      []slab
	out        atomic.Int64 // blocks handed out
	peak       atomic.Int64 // most blocks out at once since the last shrink check

	// A growing arena's; under mu.
	mu        sync.Mutex
	hooks     Hooks
	minSlabs  int
	maxSlabs  int          // lowered to what registered when a registration fails
	limit     atomic.Int64 // blocks of maxSlabs slabs, read without mu
	active    int          // slabs active or draining
	peakSlabs int          // most active at once
	shrinkDue time.Duration
	shrinking *time.Timer // runs while more than minSlabs are active
}

// slab is one slab's state.
type slab struct {
	state atomic.Int32  // slabInactive, slabActive or slabDraining
	gen   atomic.Uint32 // counts activations: a registration names the one it is of
	// parked are the blocks of a draining slab that came back (under
	// the arena's mu).
	parked []*Block
}

const (
	slabInactive = iota
	slabActive
	// slabDraining: being retired. A block of it that comes back, or
	// is found free, is parked instead of handed out; when all are, the
	// slab is retired. Grow makes it active again if it is needed.
	slabDraining
)

// Hooks register the slabs of a growing arena.
type Hooks interface {
	// Activate registers slab i of a (Slab says where it lies) before
	// any of its blocks is handed out. An error leaves the slab
	// inactive, and the arena no larger than it is (unless it wraps
	// ErrNotNow).
	Activate(a *Arena, i int) error
	// Deactivate undoes the registrations of slab i once all its
	// blocks are back. It reports whether every one was undone; if not,
	// the slab's pages stay as they are (a registration still names
	// them).
	Deactivate(a *Arena, i int) bool
}

// Block is one block of an Arena. As a sunrpc.BufferPool it takes back the
// Buffer it was handed out as.
type Block struct {
	a   *Arena
	idx int
	out atomic.Bool // handed out: a second release would give it to two users
}

var _ sunrpc.BufferPool = (*Block)(nil)

// NewArena allocates n blocks of blockSize bytes, all handed out from the
// start: one slab, which its owner registers whole (Mem).
func NewArena(n, blockSize int) (*Arena, error) {
	a, err := newArena(n, blockSize, n)
	if err != nil {
		return nil, err
	}
	a.minSlabs = 1
	a.setMaxSlabs(1)
	a.slabs[0].gen.Add(1)
	a.activate(0)
	return a, nil
}

// NewGrowingArena maps up to n blocks of blockSize bytes in slabs of
// slabBlocks, of which minSlabs are always active (their Activate is
// called here) and more as calls need them, up to n blocks. A slab left
// unused for between shrinkAfter and twice that is retired.
func NewGrowingArena(n, blockSize, slabBlocks, minSlabs int, shrinkAfter time.Duration, hooks Hooks) (*Arena, error) {
	slabBlocks = max(1, min(slabBlocks, n))
	a, err := newArena(n, blockSize, slabBlocks)
	if err != nil {
		return nil, err
	}
	a.hooks = hooks
	a.setMaxSlabs(len(a.slabs))
	a.minSlabs = max(1, min(minSlabs, a.maxSlabs))
	a.shrinkDue = shrinkAfter
	a.mu.Lock()
	defer a.mu.Unlock()
	for range a.minSlabs {
		if err := a.growLocked(true); err != nil {
			a.mem.Free()
			return nil, err
		}
	}
	return a, nil
}

func newArena(n, blockSize, slabBlocks int) (*Arena, error) {
	mem, err := verbs.AllocMemory(n * blockSize)
	if err != nil {
		return nil, fmt.Errorf("rpcrdma: buffers: %w", err)
	}
	a := &Arena{mem: mem, blockSize: blockSize, blocks: make([]Block, n), free: make(chan *Block, n),
		slabBlocks: slabBlocks, slabs: make([]slab, (n+slabBlocks-1)/slabBlocks)}
	for i := range a.blocks {
		a.blocks[i] = Block{a: a, idx: i}
	}
	return a, nil
}

// activate hands slab i's blocks out from now on.
func (a *Arena) activate(i int) {
	a.slabs[i].state.Store(slabActive)
	lo, hi := a.slabBlocksOf(i)
	for j := lo; j < hi; j++ {
		a.free <- &a.blocks[j]
	}
	a.active++
	a.peakSlabs = max(a.peakSlabs, a.active)
}

// slabBlocksOf are the block numbers of slab i.
func (a *Arena) slabBlocksOf(i int) (lo, hi int) {
	return i * a.slabBlocks, min((i+1)*a.slabBlocks, len(a.blocks))
}

// Mem is the arena's memory.
func (a *Arena) Mem() *verbs.Memory { return a.mem }

// BlockSize is the size of each block.
func (a *Arena) BlockSize() int { return a.blockSize }

// Len is the number of blocks the arena may hand out: all it maps, unless
// a registration failed.
func (a *Arena) Len() int { return int(a.limit.Load()) }

// setMaxSlabs sets how many slabs may be active. The caller holds mu (or
// the arena is new).
func (a *Arena) setMaxSlabs(n int) {
	a.maxSlabs = n
	a.limit.Store(int64(min(n*a.slabBlocks, len(a.blocks))))
}

// Limit lowers how many blocks calls may have to n (whole slabs): the
// blocks mapped beyond are for Reserve.
func (a *Arena) Limit(n int) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.setMaxSlabs(max(a.minSlabs, (n+a.slabBlocks-1)/a.slabBlocks))
}

// Reservation is blocks handed out by Reserve.
type Reservation struct {
	a      *Arena
	Blocks []*Block
	slabs  int // how many more slabs the arena may activate for them
}

// Reserve hands out n blocks for as long as their holder lives (a FUSE
// ring entry's buffer), on top of what calls may have: the arena may
// activate that many blocks' slabs more, up to what it maps. The slabs
// it activates are not registered (Hooks.Activate): their users register
// them as they use them, so that a reservation costs no memory until it
// is used. It returns nil, having taken nothing, if the arena cannot
// give them all.
func (a *Arena) Reserve(n int) *Reservation {
	r := &Reservation{a: a, Blocks: make([]*Block, 0, n), slabs: (n + a.slabBlocks - 1) / a.slabBlocks}
	a.mu.Lock()
	if a.maxSlabs+r.slabs > len(a.slabs) {
		a.mu.Unlock()
		return nil
	}
	a.setMaxSlabs(a.maxSlabs + r.slabs)
	a.mu.Unlock()
	for range n {
		b := a.TryGet()
		for b == nil {
			a.mu.Lock()
			err := a.growLocked(false)
			a.mu.Unlock()
			if err != nil {
				r.Release()
				return nil
			}
			b = a.TryGet()
		}
		r.Blocks = append(r.Blocks, b)
	}
	return r
}

// Release gives the reserved blocks back, once nothing uses them.
func (r *Reservation) Release() {
	for _, b := range r.Blocks {
		b.Release()
	}
	r.Blocks = nil
	a := r.a
	a.mu.Lock()
	a.setMaxSlabs(max(a.minSlabs, a.maxSlabs-r.slabs))
	a.mu.Unlock()
}

// Out is the number of blocks handed out.
func (a *Arena) Out() int { return int(a.out.Load()) }

// Free is the number of blocks ready to be handed out.
func (a *Arena) Free() int { return len(a.free) }

// Slabs is the number of slabs.
func (a *Arena) Slabs() int { return len(a.slabs) }

// Slab is where slab i lies in Mem.
func (a *Arena) Slab(i int) (off, n int) {
	lo, hi := a.slabBlocksOf(i)
	return lo * a.blockSize, (hi - lo) * a.blockSize
}

// SlabOf is the slab holding offset off of Mem, and off's place in it.
func (a *Arena) SlabOf(off int) (slab, rel int) {
	size := a.slabBlocks * a.blockSize
	return off / size, off % size
}

// Gen is the activation slab i is in (or was last): a registration made
// of an earlier one no longer names the slab's pages.
func (a *Arena) Gen(i int) uint32 { return a.slabs[i].gen.Load() }

// Active reports whether slab i's blocks may be handed out (it is
// registered).
func (a *Arena) Active(i int) bool { return a.slabs[i].state.Load() != slabInactive }

// ActiveBytes is the size of the slabs active now, and the most that were
// active at once.
func (a *Arena) ActiveBytes() (now, peak int64) {
	a.mu.Lock()
	defer a.mu.Unlock()
	size := int64(a.slabBlocks * a.blockSize)
	return int64(a.active) * size, int64(a.peakSlabs) * size
}

// EachActive calls fn for every active slab, holding off changes to the
// slabs meanwhile: what fn registers cannot be retired under it.
func (a *Arena) EachActive(fn func(i int) error) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	for i := range a.slabs {
		if a.slabs[i].state.Load() != slabInactive {
			if err := fn(i); err != nil {
				return err
			}
		}
	}
	return nil
}

// Block returns block i, as a work request names it (Index).
func (a *Arena) Block(i int) *Block { return &a.blocks[i] }

// Index is the block's number in its arena.
func (b *Block) Index() int { return b.idx }

// Off is where the block starts in its arena.
func (b *Block) Off() int { return b.idx * b.a.blockSize }

// Slab is the block's slab.
func (b *Block) Slab() int { return b.idx / b.a.slabBlocks }

// Bytes is the block's memory.
func (b *Block) Bytes() []byte {
	return b.a.mem.Bytes()[b.Off() : b.Off()+b.a.blockSize : b.Off()+b.a.blockSize]
}

// Release gives the block back to its arena. Releasing a block twice is
// a bug that would hand one buffer to two calls (data of one in the
// other): it panics rather than corrupt data. Built with the rdmafs_scrub
// tag, it overwrites the block (xdr.Scrub), so a view of a message
// received in it, kept past its release, reads garbage.
func (b *Block) Release() {
	if !b.out.CompareAndSwap(true, false) {
		panic(fmt.Sprintf("rpcrdma: block %d of a %d-byte arena released twice", b.idx, b.a.blockSize))
	}
	xdr.Scrub(b.Bytes())
	a := b.a
	a.out.Add(-1)
	if a.slabs[b.Slab()].state.Load() == slabDraining && a.park(b) {
		return
	}
	a.free <- b
}

// park keeps b, of a slab that may be draining, out of use; it reports
// false if the slab is no longer draining.
func (a *Arena) park(b *Block) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	s := &a.slabs[b.Slab()]
	if s.state.Load() != slabDraining {
		return false
	}
	s.parked = append(s.parked, b)
	return true
}

// PutBuffer implements sunrpc.BufferPool for a block handed out by Buffer.
func (b *Block) PutBuffer(*sunrpc.Buffer) { b.Release() }

// Buffer hands the block out as a Buffer of n bytes.
func (b *Block) Buffer(n int) *sunrpc.Buffer { return sunrpc.NewBuffer(b.Bytes()[:n], b) }

// Get returns a free block, waiting for one until ctx ends or lost
// closes (the connection the block is for has ended: ErrLost). It does
// not grow the arena: its caller asks Grow (TryGetOrGrow) first.
func (a *Arena) Get(ctx context.Context, lost <-chan struct{}) (*Block, error) {
	if b := a.TryGet(); b != nil {
		return b, nil
	}
	for {
		select {
		case b := <-a.free:
			if b = a.take(b); b != nil {
				return b, nil
			}
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-lost:
			return nil, ErrLost
		}
	}
}

// ErrLost is the error of a wait for a block that ended because the
// connection did.
var ErrLost = errors.New("rpcrdma: connection lost while waiting for a buffer")

// TryGet returns a free block, or nil if there is none.
func (a *Arena) TryGet() *Block {
	for {
		select {
		case b := <-a.free:
			if b = a.take(b); b != nil {
				return b
			}
		default:
			return nil
		}
	}
}

// TryGetOrGrow returns a free block, growing the arena while none is
// free and it may grow; nil if it may grow no more and none is free.
// Client and server take a block this way before they wait (Get).
func (a *Arena) TryGetOrGrow() *Block {
	for {
		if b := a.TryGet(); b != nil {
			return b
		}
		if !a.Grow() {
			return nil
		}
	}
}

// take hands out b, just taken from the free blocks, unless its slab is
// draining (then it is parked, and take returns nil).
func (a *Arena) take(b *Block) *Block {
	if a.slabs[b.Slab()].state.Load() == slabDraining && a.park(b) {
		return nil
	}
	b.out.Store(true)
	n := a.out.Add(1)
	for p := a.peak.Load(); n > p && !a.peak.CompareAndSwap(p, n); p = a.peak.Load() {
	}
	return b
}

// Grow makes more blocks free when none is: it brings back a draining
// slab, or activates (registers) another, in one step of a slab. It
// reports whether a block may now be free; false when the arena is as
// large as it may be (or a registration failed: the error is the
// Activate hook's to report).
func (a *Arena) Grow() bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	if len(a.free) > 0 {
		return true // another caller grew it, or a block came back
	}
	return a.growLocked(true) == nil
}

var errFull = errors.New("rpcrdma: arena at its largest")

// ErrNotNow, wrapped by the error of a Hooks.Activate, means the slab may
// not be activated now (its owner's memory budget is spent) but may be
// later: unlike another error, it leaves the arena free to grow.
var ErrNotNow = errors.New("rpcrdma: no room for another slab now")

// growLocked grows the arena by a slab; register says whether the slab
// is registered first (Hooks.Activate), or left to its users.
func (a *Arena) growLocked(register bool) error {
	for i := range a.slabs {
		if s := &a.slabs[i]; s.state.Load() == slabDraining {
			s.state.Store(slabActive)
			for _, b := range s.parked {
				a.free <- b
			}
			s.parked = s.parked[:0]
			return nil
		}
	}
	if a.active >= a.maxSlabs {
		return errFull
	}
	for i := range a.slabs {
		if a.slabs[i].state.Load() != slabInactive {
			continue
		}
		// A new activation: registrations of an earlier one, if any
		// are left, no longer count.
		a.slabs[i].gen.Add(1)
		if a.hooks != nil && register {
			if err := a.hooks.Activate(a, i); err != nil {
				if !errors.Is(err, ErrNotNow) {
					a.setMaxSlabs(a.active)
				}
				return err
			}
		}
		a.activate(i)
		if a.active > a.minSlabs && a.shrinking == nil && a.shrinkDue > 0 {
			a.shrinking = time.AfterFunc(a.shrinkDue, a.shrink)
		}
		return nil
	}
	return errFull
}

// shrink retires the slabs the peak use of the last period left unused,
// the highest first, and finishes retiring those drained since.
func (a *Arena) shrink() {
	a.mu.Lock()
	defer a.mu.Unlock()
	peak := int(a.peak.Swap(a.out.Load()))
	keep := max(a.minSlabs, (peak+a.slabBlocks-1)/a.slabBlocks)
	active := 0
	for i := range a.slabs {
		if a.slabs[i].state.Load() == slabActive {
			active++
		}
	}
	for i := len(a.slabs) - 1; i >= 0 && active > keep; i-- {
		if s := &a.slabs[i]; s.state.Load() == slabActive {
			s.state.Store(slabDraining)
			active--
		}
	}
	// Park the free blocks of draining slabs: nothing else would take
	// them while the mount is idle.
	for range len(a.free) {
		b := <-a.free
		if s := &a.slabs[b.Slab()]; s.state.Load() == slabDraining {
			s.parked = append(s.parked, b)
		} else {
			a.free <- b
		}
	}
	for i := range a.slabs {
		if s := &a.slabs[i]; s.state.Load() == slabDraining {
			if lo, hi := a.slabBlocksOf(i); len(s.parked) == hi-lo {
				a.retireLocked(i)
			}
		}
	}
	a.shrinking = nil
	if a.active > a.minSlabs && a.shrinkDue > 0 {
		a.shrinking = time.AfterFunc(a.shrinkDue, a.shrink)
	}
}

// retireLocked retires slab i, all of whose blocks are parked: its
// registrations are undone and its pages given back.
func (a *Arena) retireLocked(i int) {
	s := &a.slabs[i]
	s.state.Store(slabInactive)
	s.parked = s.parked[:0]
	a.active--
	if a.hooks == nil || a.hooks.Deactivate(a, i) {
		off, n := a.Slab(i)
		// The pages are free and unregistered: give them back (they
		// read as zeros when next used).
		_ = unix.Madvise(a.mem.Bytes()[off:off+n], unix.MADV_DONTNEED)
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
func (a *Arena) Close() error {
	a.mu.Lock()
	if a.shrinking != nil {
		a.shrinking.Stop()
		a.shrinkDue = 0
	}
	a.mu.Unlock()
	return a.mem.Free()
}
