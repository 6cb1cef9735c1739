package xprtrdma

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/rdmafs/rdmafs/nfs3"
	"github.com/rdmafs/rdmafs/svcrdma"
)

// TestMemRegStrategies moves data by every kind of chunk under each
// memreg strategy: a 1 MiB WRITE (read chunk), the same read back (write
// chunk), a large READDIRPLUS (reply chunk), and again, so that chunk
// buffers are used a second time. Each must give the right bytes and
// leave the connection up: with register and persistent the server must
// not be told it may invalidate rkeys that are plain registrations.
func TestMemRegStrategies(t *testing.T) {
	for _, m := range []MemReg{MemRegMW, MemRegRegister, MemRegPersistent} {
		t.Run(m.String(), func(t *testing.T) {
			b := newTestBed(t, svcrdma.Config{})
			c, tr := b.client(t, Config{MemReg: m})
			// A broken strategy hangs a hard call: bound the test.
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			fh := b.create(t, c, "f")
			dir := b.bigDir(t, c, 300)
			for round := range 3 {
				data := randomBytes(1 << 20)
				buf := payload(t, tr, data)
				var wres nfs3.WriteResult
				err := c.Write(ctx, root, &fh, 0, buf.B, nfs3.FileSync, &wres)
				buf.Release()
				if err != nil {
					t.Fatalf("round %d: WRITE: %v", round, err)
				}
				if got, _ := os.ReadFile(filepath.Join(b.dir, "f")); !bytes.Equal(got, data) {
					t.Fatalf("round %d: the server's copy differs from what was written", round)
				}
				var rres nfs3.ReadResult
				if err := c.Read(ctx, root, &fh, 0, 1<<20, &rres); err != nil {
					t.Fatalf("round %d: READ: %v", round, err)
				}
				same := bytes.Equal(rres.Data, data)
				rres.Release()
				if !same {
					t.Fatalf("round %d: read back differs", round)
				}
				n := 0
				if _, err := c.Readdirplus(ctx, root, &dir, 0, nfs3.Verf{}, 32768, 65536, func(*nfs3.DirEntry) { n++ }); err != nil {
					t.Fatalf("round %d: READDIRPLUS: %v", round, err)
				}
			}
			s := &tr.stats
			if s.ConnectCount.Load() != 1 {
				t.Errorf("%d connections for one client: a call broke the connection", s.ConnectCount.Load())
			}
			if s.badReplies.Load() != 0 {
				t.Errorf("%d bad replies", s.badReplies.Load())
			}
			t.Logf("memreg=%v: registrations %d, windows bound %d (allocated %d), local invalidations %d",
				m, s.hardwayRegister.Load(), s.mwReused.Load()+s.mwAllocated.Load(), s.mwAllocated.Load(), s.localInv.Load())
		})
	}
}

// TestRemoteInvalidateAdvertised: the client tells the server it takes Send
// With Invalidate only when every rkey it hands out is a memory window's
// (RFC 8797; a plain registration cannot be invalidated remotely).
func TestRemoteInvalidateAdvertised(t *testing.T) {
	for m, want := range map[MemReg]bool{MemRegMW: true, MemRegRegister: false, MemRegPersistent: false} {
		if got := remoteInvalidateOK(m); got != want {
			t.Errorf("memreg=%v: advertises remote invalidation %v, want %v", m, got, want)
		}
	}
}
