package xprtrdma

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/rdmafs/rdmafs/nfs3"
	"github.com/rdmafs/rdmafs/rpcrdma"
	"github.com/rdmafs/rdmafs/sunrpc"
	"github.com/rdmafs/rdmafs/svcrdma"
)

// The waits of a call on its way out (a credit, a buffer) end at the
// try's deadline; a call that waits for nothing makes no timer, so these
// tests make the calls wait.

// TestCreditWaitEndsAtDeadlineOrWake: with every credit taken, a call
// waits; it gives up at its deadline, and one that waits longer gets the
// credit given back.
func TestCreditWaitEndsAtDeadlineOrWake(t *testing.T) {
	b := newTestBed(t, svcrdma.Config{})
	c, tr := b.client(t, Config{})
	b.create(t, c, "f") // connects; the server's grant is in
	ctx := context.Background()
	ep, err := tr.conns.Get(ctx, time.Now().Add(5*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	var held []*request
	for {
		r, _, err := ep.tryCredit()
		if err != nil {
			t.Fatal(err)
		}
		if r == nil {
			break
		}
		held = append(held, r)
	}
	t.Logf("%d credits taken", len(held))

	// A wait that ignored its deadline ends with the context instead.
	bounded, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	start := time.Now()
	if _, err := ep.credit(bounded, start.Add(100*time.Millisecond)); !errors.Is(err, sunrpc.ErrTimeout) {
		t.Fatalf("credit wait past its deadline: %v, want ErrTimeout", err)
	}
	if d := time.Since(start); d < 100*time.Millisecond || d > 5*time.Second {
		t.Fatalf("credit wait with a 100ms deadline took %v", d)
	}

	got := make(chan error, 1)
	go func() {
		r, err := ep.credit(ctx, time.Now().Add(30*time.Second))
		if err == nil {
			ep.unwind(r)
		}
		got <- err
	}()
	time.Sleep(50 * time.Millisecond) // let it wait
	ep.unwind(held[0])
	held = held[1:]
	select {
	case err := <-got:
		if err != nil {
			t.Fatalf("credit wait: %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("a credit given back did not wake the call waiting for one")
	}
	for _, r := range held {
		ep.unwind(r)
	}
	if tr.stats.Backlog.Load() != 0 {
		t.Errorf("backlog %d after the waits ended", tr.stats.Backlog.Load())
	}
}

// TestChunkWaitEndsAtDeadline: a READ that waits for a chunk buffer (all
// are in use) times out at its try's deadline, as a soft mount's call.
func TestChunkWaitEndsAtDeadline(t *testing.T) {
	b := newTestBed(t, svcrdma.Config{})
	_, tr := b.client(t, Config{})
	rpc := sunrpc.NewClient(tr, sunrpc.Config{Prog: nfs3.Program, Vers: nfs3.Version, Timeout: 200 * time.Millisecond,
		Soft: true, Auth: sunrpc.Auth{Flavor: sunrpc.AuthSys, Machine: "test"}, ProcNames: nfs3.ProcNames})
	c := nfs3.NewClient(rpc, nfs3.ClientConfig{})
	fh := b.create(t, c, "f")
	var held []*rpcrdma.Block
	for blk := tr.chunks.TryGetOrGrow(); blk != nil; blk = tr.chunks.TryGetOrGrow() {
		held = append(held, blk)
	}
	defer func() {
		for _, blk := range held {
			blk.Release()
		}
	}()
	// A wait that ignored its deadline ends with the context instead.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	start := time.Now()
	var res nfs3.ReadResult
	err := c.Read(ctx, root, &fh, 0, 1<<20, &res)
	res.Release()
	if !errors.Is(err, sunrpc.ErrTimeout) {
		t.Fatalf("READ waiting for a chunk buffer: %v, want ErrTimeout", err)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Fatalf("READ with a 200ms timeout waited %v for a chunk buffer", d)
	}
}

// TestAbandonedCallsGiveBackTheirCredits: calls whose callers stopped
// waiting hold their credits until somebody reads their replies off the
// completion queue, which no goroutine of the transport does on its own:
// a call that waits for a credit then reads them itself, and gets one.
func TestAbandonedCallsGiveBackTheirCredits(t *testing.T) {
	b := newTestBed(t, svcrdma.Config{})
	c, tr := b.client(t, Config{Credits: 4})
	fh := b.create(t, c, "f")
	ep, err := tr.conns.Get(context.Background(), time.Now().Add(5*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	// Nobody reads replies while the test holds the turn: every credit
	// goes to a call whose caller gives up first.
	if !ep.takeTurn() {
		t.Fatal("the turn at the completion queue is taken with no call in flight")
	}
	ep.mu.Lock()
	granted := ep.granted
	ep.mu.Unlock()
	errs := make(chan error, granted)
	for range granted {
		go func() {
			ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
			defer cancel()
			var a nfs3.Fattr
			errs <- c.Getattr(ctx, root, &fh, &a)
		}()
	}
	for range granted {
		if err := <-errs; !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("a call whose caller gave up: %v, want the context's deadline", err)
		}
	}
	ep.mu.Lock()
	inflight := ep.inflight
	ep.mu.Unlock()
	if inflight != granted {
		t.Fatalf("%d calls hold credits, want all %d abandoned ones", inflight, granted)
	}
	ep.passTurn()

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var a nfs3.Fattr
	if err := c.Getattr(ctx, root, &fh, &a); err != nil {
		t.Fatalf("a call after %d abandoned ones took every credit: %v", granted, err)
	}
}
