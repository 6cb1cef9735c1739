package xprtrdma

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/rdmafs/rdmafs/nfs3"
	"github.com/rdmafs/rdmafs/rpcrdma"
	"github.com/rdmafs/rdmafs/svcrdma"
	"github.com/rdmafs/rdmafs/verbs"
	"github.com/rdmafs/rdmafs/verbs/soft"
)

// Direct placement: a READ whose ReplyInto is a buffer the transport
// reserved (a FUSE io_uring entry's) gets its data written there by the
// server, under every memory registration strategy, and from a WRITE's
// payload there the server pulls the data with no copy.
func TestReplyPlacedInReservedBuffer(t *testing.T) {
	for _, m := range []MemReg{MemRegMW, MemRegRegister, MemRegPersistent} {
		t.Run(m.String(), func(t *testing.T) {
			b := newTestBed(t, svcrdma.Config{})
			c, tr := b.client(t, Config{MemReg: m})
			ctx := context.Background()
			fh := b.create(t, c, "f")
			data := randomBytes(1 << 20)
			if err := os.WriteFile(filepath.Join(b.dir, "f"), data, 0o644); err != nil {
				t.Fatal(err)
			}

			bufs, release := tr.ReserveReplyBuffers(2, 1<<20)
			if len(bufs) != 2 {
				t.Fatalf("ReserveReplyBuffers(2, 1 MiB) gave %d buffers", len(bufs))
			}
			defer release()
			out := tr.chunks.Out()
			var res nfs3.ReadResult
			if err := c.ReadInto(ctx, root, &fh, 4096, bufs[0][:256<<10], &res); err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(res.Data, data[4096:4096+256<<10]) {
				t.Fatal("READ data differs from the file's")
			}
			if &res.Data[0] != &bufs[0][0] {
				t.Error("READ data did not land in the caller's buffer")
			}
			if got := tr.chunks.Out(); got > out {
				t.Errorf("%d chunk buffers out during the READ, %d before: the placed READ took one", got, out)
			}
			res.Release()
			if got := tr.stats.writeChunksPlaced.Load(); got != 1 {
				t.Errorf("write_chunks_placed %d, want 1", got)
			}

			// A buffer from the Go heap is not the transport's: the
			// data comes in a chunk buffer, as for Read.
			heap := make([]byte, 64<<10)
			if err := c.ReadInto(ctx, root, &fh, 0, heap, &res); err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(res.Data, data[:64<<10]) || !holds(tr.chunks, res.Data) {
				t.Error("READ into heap memory: data wrong or not in a chunk buffer")
			}
			res.Release()
			if got := tr.stats.writeChunksPlaced.Load(); got != 1 {
				t.Errorf("write_chunks_placed %d after a READ into heap memory, want 1", got)
			}

			// A synchronous WRITE from a reserved buffer goes by read
			// chunk from there.
			copy(bufs[1], data)
			var wres nfs3.WriteResult
			if err := c.Write(ctx, root, &fh, 0, bufs[1][:512<<10], nfs3.FileSync, &wres); err != nil {
				t.Fatal(err)
			}
			if got := tr.stats.payloadCopies.Load(); got != 0 {
				t.Errorf("payload_copies %d for a WRITE from a reserved buffer, want 0", got)
			}
		})
	}
}

// TestAbandonedPlacedReadFenced: a server that writes a READ's data after
// the caller gave up on the call must not reach the caller's buffer,
// which the caller reuses as soon as ReadInto returns (a ring entry takes
// the next request in it). The hostile server holds the READ, the caller
// cancels, and only once ReadInto has returned does the server write into
// the chunk it was offered.
func TestAbandonedPlacedReadFenced(t *testing.T) {
	offered := make(chan rpcrdma.Segment, 1)
	s := startHostile(t, func(h *rpcrdma.Header) []byte {
		if h.NWrites == 1 {
			offered <- h.Writes[0].Segments[0]
		}
		return nil // never answers
	})
	c, tr := s.client(t, 30*time.Second)
	bufs, release := tr.ReserveReplyBuffers(1, 64<<10)
	if bufs == nil {
		t.Fatal("no reserved buffer")
	}
	defer release()
	dest := bufs[0]
	clear(dest)

	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		var fh nfs3.FH
		var res nfs3.ReadResult
		done <- c.ReadInto(ctx, nil, &fh, 0, dest, &res)
		res.Release()
	}()
	var seg rpcrdma.Segment
	select {
	case seg = <-offered:
	case <-time.After(10 * time.Second):
		t.Fatal("the READ never reached the server")
	}
	cancel()
	if err := <-done; err == nil {
		t.Fatal("the abandoned READ succeeded")
	}

	// The late write, of 0xee bytes, from memory of the test's own
	// (the server's connection may have ended, and freed its own).
	src, err := verbs.AllocMemory(int(seg.Length))
	if err != nil {
		t.Fatal(err)
	}
	defer src.Free()
	for i := range src.Bytes() {
		src.Bytes()[i] = 0xee
	}
	mr, err := s.pd.Register(src, 0, int(seg.Length), verbs.AccessLocalWrite)
	if err != nil {
		t.Fatal(err)
	}
	defer mr.Deregister()
	sge := [1]verbs.SGE{{MR: mr, Offset: 0, Length: int(seg.Length)}}
	// An error is the fence at work too: the connection is gone.
	(*s.conn.Load()).PostSend(&verbs.SendWR{ID: 200, Opcode: verbs.OpRDMAWrite, SGL: sge[:], Signaled: true,
		RemoteAddr: seg.Offset, RKey: seg.Handle})
	time.Sleep(200 * time.Millisecond)
	if i := bytes.IndexByte(dest, 0xee); i >= 0 {
		t.Fatalf("the server wrote into the caller's buffer (at %d) after ReadInto returned", i)
	}
}

// TestReservedBuffersPinnedWhileUsed: reserved buffers are not registered
// until a call uses them, and are deregistered once a period goes by in
// which none did (unpinIdle, every shrinkAfter), so that an idle mount
// pins no more for its FUSE ring than without one.
func TestReservedBuffersPinnedWhileUsed(t *testing.T) {
	b := newTestBed(t, svcrdma.Config{})
	c, tr := b.client(t, Config{})
	ctx := context.Background()
	fh := b.create(t, c, "f")
	if err := os.WriteFile(filepath.Join(b.dir, "f"), randomBytes(1<<20), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := c.Null(ctx); err != nil { // connect
		t.Fatal(err)
	}
	base := tr.stats.registered.Load()
	bufs, release := tr.ReserveReplyBuffers(16, 1<<20)
	if len(bufs) != 16 {
		t.Fatalf("ReserveReplyBuffers(16, 1 MiB) gave %d", len(bufs))
	}
	defer release()
	reserved := tr.stats.registered.Load()
	if reserved > base {
		t.Errorf("%d bytes registered after reserving, %d before: reserved buffers pinned before any use", reserved, base)
	}
	for _, buf := range bufs {
		var res nfs3.ReadResult
		if err := c.ReadInto(ctx, root, &fh, 0, buf, &res); err != nil {
			t.Fatal(err)
		}
		res.Release()
	}
	used := tr.stats.registered.Load()
	if used < reserved+16<<20 {
		t.Errorf("%d bytes registered after READs into 16 MiB of reserved buffers, %d before", used, reserved)
	}
	tr.unpinIdle(false) // used in this period: kept
	if got := tr.stats.registered.Load(); got != used {
		t.Errorf("%d bytes registered after a period in which the buffers were used, %d before", got, used)
	}
	tr.unpinIdle(false) // unused for a period: deregistered
	if got := tr.stats.registered.Load(); got > reserved {
		t.Errorf("%d bytes registered after an idle period, %d before the buffers were used", got, reserved)
	}
	var res nfs3.ReadResult
	if err := c.ReadInto(ctx, root, &fh, 0, bufs[3], &res); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(res.Data, bufs[3][:1<<20]) || &res.Data[0] != &bufs[3][0] {
		t.Error("a READ into a reserved buffer after its slab was deregistered did not land in it")
	}
	res.Release()
}

// TestReserveRefusedUnderMemLock: a process that may not pin what a busy
// mount would (RLIMIT_MEMLOCK of 8 MiB, no CAP_IPC_LOCK) gets no reserved
// buffers: their slabs would be registered only as calls use them, and a
// refusal then would fail calls. Its ring then copies, as through
// /dev/fuse. The check runs in a helper process, whose limits setpriv and
// prlimit set.
func TestReserveRefusedUnderMemLock(t *testing.T) {
	if os.Getenv("RDMAFS_MEMLOCK_HELPER") != "" {
		tr, err := New(Config{Provider: soft.New(), Addr: "127.0.0.1:1"})
		if err != nil {
			t.Fatal(err)
		}
		if bufs, _ := tr.ReserveReplyBuffers(16, 1<<20); bufs != nil {
			t.Fatalf("reserved %d buffers of 1 MiB under an 8 MiB RLIMIT_MEMLOCK without CAP_IPC_LOCK", len(bufs))
		}
		return
	}
	needRoot(t)
	for _, tool := range []string{"setpriv", "prlimit"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("%s not installed (util-linux)", tool)
		}
	}
	cmd := exec.Command("setpriv", "--bounding-set", "-ipc_lock", "--inh-caps", "-ipc_lock",
		"prlimit", "--memlock=8388608:8388608", os.Args[0], "-test.run=^TestReserveRefusedUnderMemLock$", "-test.v")
	cmd.Env = append(os.Environ(), "RDMAFS_MEMLOCK_HELPER=1")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("helper: %v\n%s", err, out)
	}
}
