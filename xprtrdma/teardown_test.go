package xprtrdma

import (
	"context"
	"testing"
	"time"

	"github.com/rdmafs/rdmafs/nfs3"
	"github.com/rdmafs/rdmafs/rpcrdma"
	"github.com/rdmafs/rdmafs/svcrdma"
)

// TestTeardownWhileCallWaitsForChunk: a call that waits for a chunk
// buffer (all are in use) must not hold up the teardown of its broken
// connection. The send path used to wait under the connection's post
// lock, which teardown takes exclusively: teardown then waited for the
// call's timeout, and with it the buffers that only teardown gives back.
func TestTeardownWhileCallWaitsForChunk(t *testing.T) {
	b := newTestBed(t, svcrdma.Config{})
	c, tr := b.client(t, Config{ChunkBuffers: 1})
	ctx := context.Background()
	fh := b.create(t, c, "f")
	ep, err := tr.conns.Get(ctx, time.Now().Add(5*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	var held []*rpcrdma.Block
	for blk := tr.chunks.TryGetOrGrow(); blk != nil; blk = tr.chunks.TryGetOrGrow() {
		held = append(held, blk)
	}
	release := func() {
		for _, blk := range held {
			blk.Release()
		}
		held = nil
	}
	defer release()

	// A 1 MiB READ needs a write chunk: it waits for one.
	done := make(chan error, 1)
	go func() {
		var rres nfs3.ReadResult
		err := c.Read(ctx, root, &fh, 0, 1<<20, &rres)
		rres.Release()
		done <- err
	}()
	for deadline := time.Now().Add(5 * time.Second); tr.stats.Inflight.Load() == 0; {
		if time.Now().After(deadline) {
			t.Fatal("the READ did not start")
		}
		time.Sleep(10 * time.Millisecond)
	}
	time.Sleep(100 * time.Millisecond)

	start := time.Now()
	if n := b.prov.DropConnections(); n == 0 {
		t.Fatal("no connection to drop")
	}
	select {
	case <-ep.down:
		t.Logf("teardown took %v", time.Since(start).Round(time.Millisecond))
	case <-time.After(3 * time.Second):
		t.Fatal("the broken connection's teardown waits for a call that waits for a chunk buffer")
	}
	release()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("READ after the connection came back: %v", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the READ did not complete on a new connection")
	}
}
