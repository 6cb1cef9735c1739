package fs

import (
	"bytes"
	"math/rand/v2"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/rdmafs/rdmafs/nfs3"
	"github.com/rdmafs/rdmafs/sunrpc"
	"github.com/rdmafs/rdmafs/test/seed"
)

// TestWriteBehindExtents writes a file at random places in random sizes,
// with small extents (wsize 64 KiB) so that many are queued, in flight and
// unstable at once, reads ranges back between the writes (the read path
// around queued writes: holes read as zeros, nothing short below the end),
// and checks the server's copy after close.
func TestWriteBehindExtents(t *testing.T) {
	h := newHarness(t, harnessConfig{opts: Options{WSize: 64 << 10, RSize: 64 << 10,
		ACRegMin: 3 * time.Second, ACRegMax: 60 * time.Second, ACDirMin: 30 * time.Second, ACDirMax: 60 * time.Second}})
	rng := rand.New(rand.NewPCG(seed.New(t, "RDMAFS_FS_SEED"), 1))
	node, fh := h.mustCreate(rootNode, "f", 0o644)
	var model []byte
	for i := range 400 {
		off := rng.Int64N(2 << 20)
		if rng.IntN(3) == 0 {
			off = int64(len(model)) // an append
		}
		if rng.IntN(3) > 0 {
			data := make([]byte, 1+rng.IntN(200<<10))
			for j := range data {
				data[j] = byte(rng.Uint32())
			}
			if en := h.write(node, fh, off, data); en != 0 {
				t.Fatalf("step %d: write %d bytes at %d: %v", i, len(data), off, en)
			}
			if end := off + int64(len(data)); end > int64(len(model)) {
				model = append(model, make([]byte, end-int64(len(model)))...)
			}
			copy(model[off:], data)
			continue
		}
		n := 1 + rng.IntN(64<<10)
		got, en := h.read(node, fh, off, n)
		if en != 0 {
			t.Fatalf("step %d: read %d at %d: %v", i, n, off, en)
		}
		want := model[min(off, int64(len(model))):min(off+int64(n), int64(len(model)))]
		if !bytes.Equal(got, want) {
			t.Fatalf("step %d: read %d at %d: %d bytes, want %d (equal prefix: %v)", i, n, off, len(got), len(want),
				bytes.Equal(got[:min(len(got), len(want))], want[:min(len(got), len(want))]))
		}
	}
	if attr, en := h.getattr(node); en != 0 || attr.Size != uint64(len(model)) {
		t.Errorf("size before close: %d (%v), want %d", attr.Size, en, len(model))
	}
	if en := h.close(node, fh); en != 0 {
		t.Fatalf("close: %v", en)
	}
	if got := h.serverFile("f"); !bytes.Equal(got, model) {
		t.Errorf("the server's copy after close: %d bytes, want %d", len(got), len(model))
	}
	if n := h.fs.writebackBytes(); n != 0 {
		t.Errorf("write-behind still holds %d bytes after close", n)
	}
}

// writebackBytes is what write-behind holds for all files.
func (f *FS) writebackBytes() int64 {
	f.dirty.mu.Lock()
	defer f.dirty.mu.Unlock()
	return f.dirty.held
}

// TestReadOfHoleBelowQueuedWrite: the case, through the handlers.
func TestReadOfHoleBelowQueuedWrite(t *testing.T) {
	h := newHarness(t, harnessConfig{})
	node, fh := h.mustCreate(rootNode, "f", 0o644)
	data := bytes.Repeat([]byte{0xa5}, 0x15bb)
	if en := h.write(node, fh, 0xbb90, data); en != 0 {
		t.Fatal(en)
	}
	got, en := h.read(node, fh, 0, 0xd14b)
	if want := append(make([]byte, 0xbb90), data...); en != 0 || !bytes.Equal(got, want) {
		t.Fatalf("read of 0xd14b at 0 after a write of 0x15bb at 0xbb90: %d bytes (%v), right %v", len(got), en, bytes.Equal(got, want))
	}
	h.close(node, fh)
}

// TestReadRacingWriteBack: a READ that the server answers before a write
// of this client that extends the file has landed, and whose reply is
// looked at only once that write is gone from the client (sent and
// committed), still reads zeros up to the end the write made. A short
// read there makes FUSE shrink the file's size, and a mapping of the file
// then faults below its end (the guest's exerciser caught it, seed
// 1796062829546641150, operation 1503: the kernel's readahead raced the
// write-back of a copy_file_range that had extended the file).
func TestReadRacingWriteBack(t *testing.T) {
	var (
		h       *harness
		node    uint64
		fh      uint64
		holding atomic.Bool   // WRITEs wait for release
		release chan struct{} // closed when the READ is answered
		racing  atomic.Bool   // the next READ reply lets the write land first
	)
	release = make(chan struct{})
	h = newHarness(t, harnessConfig{wrap: func(tr sunrpc.Transport) sunrpc.Transport {
		return &misbehaving{Transport: tr,
			call: func(call *sunrpc.Call) {
				if holding.Load() && call.Proc == nfs3.ProcWrite {
					<-release
				}
			},
			reply: func(call *sunrpc.Call) {
				if call.Proc == nfs3.ProcRead && racing.CompareAndSwap(true, false) {
					close(release)
					if en := h.flush(node, fh); en != 0 {
						t.Errorf("flush while the READ was answered: %v", en)
					}
				}
			}}
	}})
	h.writeServerFile("f", bytes.Repeat([]byte{0x5a}, 0x1000), 0o644)
	node = h.mustLookup(rootNode, "f")
	var en syscall.Errno
	if fh, _, en = h.open(node, syscall.O_RDWR); en != 0 {
		t.Fatal(en)
	}
	holding.Store(true)
	if en := h.write(node, fh, 0x10000, []byte("tail")); en != 0 {
		t.Fatal(en)
	}
	racing.Store(true)
	got, en := h.read(node, fh, 0, 0x8000)
	want := append(bytes.Repeat([]byte{0x5a}, 0x1000), make([]byte, 0x7000)...)
	if en != 0 || !bytes.Equal(got, want) {
		t.Fatalf("read of 0x8000 at 0 while a write at 0x10000 lands: %#x bytes (%v), right %v; want the 0x1000 bytes and zeros",
			len(got), en, bytes.Equal(got, want))
	}
	h.close(node, fh)
}
