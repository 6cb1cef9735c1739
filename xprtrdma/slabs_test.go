package xprtrdma

import (
	"context"
	"sync"
	"testing"

	"github.com/rdmafs/rdmafs/nfs3"
	"github.com/rdmafs/rdmafs/svcrdma"
)

// TestRegisteredFollowsCalls: a transport asking for 16384 credits
// registers, once connected and idle, a few MiB, not Send and Receive
// buffers for every credit asked (the old 3 per credit: 192 MiB) nor
// every chunk buffer; parallel 1 MiB READs register more, as many slabs
// as they need and no more than the chunk buffers there are.
func TestRegisteredFollowsCalls(t *testing.T) {
	b := newTestBed(t, svcrdma.Config{})
	c, tr := b.client(t, Config{Credits: 16384})
	fh := b.create(t, c, "f")
	ctx := context.Background()
	if err := tr.Connect(ctx); err != nil {
		t.Fatal(err)
	}
	idle := tr.stats.registered.Load()
	if idle <= 0 || idle > 16<<20 {
		t.Fatalf("idle transport registers %d bytes, want some and at most 16 MiB", idle)
	}
	var wg sync.WaitGroup
	for range 24 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 4 {
				var res nfs3.ReadResult
				if err := c.Read(ctx, root, &fh, 0, 1<<20, &res); err != nil {
					t.Error(err)
				}
				res.Release()
			}
		}()
	}
	wg.Wait()
	peak := tr.stats.registeredPeak.Load()
	if peak <= idle {
		t.Errorf("24 parallel READs: at most %d bytes registered, idle %d: no growth", peak, idle)
	}
	if most := int64(128<<20 + 8<<20); peak > most {
		t.Errorf("24 parallel READs registered %d bytes, more than all the buffers (%d)", peak, most)
	}
	t.Logf("registered: idle %d KiB, peak %d KiB", idle>>10, peak>>10)
}
