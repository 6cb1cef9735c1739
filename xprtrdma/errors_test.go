package xprtrdma

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/rdmafs/rdmafs/nfs3"
	"github.com/rdmafs/rdmafs/rpcrdma"
	"github.com/rdmafs/rdmafs/svcrdma"
)

// TestReplyLargerThanReplyChunk: a reply that does not fit the reply chunk
// the call offered is answered with ERR_CHUNK, and the call fails with it
// while the connection goes on.
func TestReplyLargerThanReplyChunk(t *testing.T) {
	b := newTestBed(t, svcrdma.Config{})
	c, tr := b.client(t, Config{})
	os.Mkdir(filepath.Join(b.dir, "d"), 0o755)
	for i := range 400 {
		os.WriteFile(filepath.Join(b.dir, "d", fmt.Sprintf("a-rather-long-file-name-%04d", i)), nil, 0o644)
	}
	var lr nfs3.LookupResult
	ctx := context.Background()
	if err := c.Lookup(ctx, root, &b.root, "d", &lr); err != nil {
		t.Fatal(err)
	}
	// READDIR of up to 64 KiB, offering a reply chunk of 6000 bytes only.
	rpc := c.RPC()
	call := rpc.NewCall(nfs3.ProcReaddir, root)
	e := call.Args()
	e.Opaque(lr.FH.Bytes())
	e.Uint64(0)
	e.Fixed(make([]byte, 8))
	e.Uint32(65536)
	call.SetArgs(e)
	call.ReplyMax = 6000
	err := rpc.Do(ctx, call)
	call.Release()
	var re *RDMAError
	if !errors.As(err, &re) || re.Code != rpcrdma.ErrChunk || !errors.Is(err, ErrBadReply) {
		t.Fatalf("READDIR with a short reply chunk: %v, want ERR_CHUNK", err)
	}
	if tr.stats.badReplies.Load() != 1 {
		t.Errorf("bad_reply_count %d, want 1", tr.stats.badReplies.Load())
	}
	if err := c.Null(ctx); err != nil {
		t.Fatalf("next call on the connection: %v", err)
	}
}

// TestConnectionDroppedMidTransfer breaks the connection while 1 MiB WRITEs
// and READs are in flight: the transport reconnects and every call
// completes with the right data.
func TestConnectionDroppedMidTransfer(t *testing.T) {
	b := newTestBed(t, svcrdma.Config{})
	c, _ := b.client(t, Config{})
	ctx := context.Background()
	fh := b.create(t, c, "f")
	const n = 16
	data := randomBytes(n << 20)
	done := make(chan error, 2*n)
	write := func(i int) {
		var res nfs3.WriteResult
		done <- c.Write(ctx, root, &fh, uint64(i)<<20, data[i<<20:(i+1)<<20], nfs3.FileSync, &res)
	}
	for i := range n {
		go write(i)
	}
	time.Sleep(5 * time.Millisecond)
	if dropped := b.prov.DropConnections(); dropped == 0 {
		t.Log("nothing to drop yet")
	}
	for range n {
		if err := <-done; err != nil {
			t.Fatalf("WRITE across a lost connection: %v", err)
		}
	}
	if got, _ := os.ReadFile(filepath.Join(b.dir, "f")); len(got) != len(data) || string(got) != string(data) {
		t.Fatal("server file differs after the reconnect")
	}
	reads := make([][]byte, n)
	for i := range n {
		go func() {
			var res nfs3.ReadResult
			err := c.Read(ctx, root, &fh, uint64(i)<<20, 1<<20, &res)
			reads[i] = append([]byte(nil), res.Data...)
			res.Release()
			done <- err
		}()
	}
	time.Sleep(5 * time.Millisecond)
	b.prov.DropConnections()
	for range n {
		if err := <-done; err != nil {
			t.Fatalf("READ across a lost connection: %v", err)
		}
	}
	for i := range n {
		if string(reads[i]) != string(data[i<<20:(i+1)<<20]) {
			t.Fatalf("READ %d across a lost connection returned other data", i)
		}
	}
}
