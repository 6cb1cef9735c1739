package roundtrip

import (
	"context"
	"testing"

	"github.com/rdmafs/rdmafs/nfs3"
)

// TestRoundTripDoesNotAllocate holds the client to what the benchmarks
// measure: a READ and a WRITE round trip over RPC-over-RDMA on the soft
// provider, inline (4 KiB) and in a chunk (1 MiB), allocate nothing in
// the client's process, its transport's and provider's goroutines
// included. `make test` runs it without the race detector.
func TestRoundTripDoesNotAllocate(t *testing.T) {
	if raceEnabled {
		t.Skip("allocation counts mean nothing under the race detector; make test runs this test without it")
	}
	c, fh := client(t, 1<<20)
	ctx := context.Background()
	data := make([]byte, 1<<20)
	for _, n := range sizes {
		var rres nfs3.ReadResult
		read := func() {
			if err := c.Read(ctx, cred, &fh, 0, uint32(n), &rres); err != nil {
				t.Fatal(err)
			}
			if len(rres.Data) != n {
				t.Fatalf("READ returned %d bytes, want %d", len(rres.Data), n)
			}
			rres.Release()
		}
		var wres nfs3.WriteResult
		write := func() {
			if err := c.Write(ctx, cred, &fh, 0, data[:n], nfs3.Unstable, &wres); err != nil {
				t.Fatal(err)
			}
			if int(wres.Count) != n {
				t.Fatalf("WRITE wrote %d bytes, want %d", wres.Count, n)
			}
		}
		for _, op := range []struct {
			name string
			f    func()
		}{{"READ", read}, {"WRITE", write}} {
			op.f() // the first of a size takes buffers the next ones reuse
			if allocs := testing.AllocsPerRun(500, op.f); allocs > 0 {
				t.Errorf("%s of %d KiB: %v allocations per round trip, want 0", op.name, n>>10, allocs)
			}
		}
	}
}
