package svcrdma

import (
	"bytes"
	"context"
	"crypto/rand"
	"fmt"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/rdmafs/rdmafs/nfs3"
	"github.com/rdmafs/rdmafs/nfs3/server"
	"github.com/rdmafs/rdmafs/sunrpc"
	"github.com/rdmafs/rdmafs/verbs/soft"
	"github.com/rdmafs/rdmafs/xprtrdma"
)

// startExport starts an NFS server on a new directory behind an
// RPC-over-RDMA listener, and returns the directory and its handle.
func startExport(t *testing.T, cfg Config) (*Server, *soft.Provider, string, nfs3.FH) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("the NFS server switches credentials per call and needs root")
	}
	dir := t.TempDir()
	nfs, err := server.New(server.Options{Root: dir, Export: server.Export{Insecure: true, NoRootSquash: true}, Logf: t.Logf})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { nfs.Close() })
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go nfs.Serve(l)
	prov := soft.New()
	cfg.Provider, cfg.Addr = prov, "127.0.0.1:0"
	cfg.Service = nfs.RPC()
	s, err := Listen(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	go s.Serve()
	t.Cleanup(func() { s.Close() })
	port := l.Addr().(*net.TCPAddr).Port
	mc, err := nfs3.DialMount(context.Background(), nfs3.DialConfig{Host: "127.0.0.1", Port: port,
		Auth: sunrpc.Auth{Flavor: sunrpc.AuthSys}, Timeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer mc.Close()
	fh, _, err := mc.Mnt(context.Background(), &sunrpc.Cred{}, "/")
	if err != nil {
		t.Fatal(err)
	}
	return s, prov, dir, fh
}

// testBudget is a Budget of limit bytes that remembers the most taken.
type testBudget struct {
	mu                sync.Mutex
	limit, used, peak int
}

func (b *testBudget) TryReserve(_ netip.Addr, n int) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.used+n > b.limit {
		return false
	}
	b.used += n
	b.peak = max(b.peak, b.used)
	return true
}

func (b *testBudget) Unreserve(_ netip.Addr, n int) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.used -= n
}

func (b *testBudget) state() (used, peak int) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.used, b.peak
}

// connBuffers is the size of the pull and push buffers the server's
// connections have registered now.
func connBuffers(s *Server) (n int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for c := range s.conns {
		pull, _ := c.pull.ActiveBytes()
		push, _ := c.push.ActiveBytes()
		n += pull + push
	}
	return n
}

// TestBuffersFollowCalls: a connection's pull and push buffers grow as its
// calls need them, within the server's memory budget, and shrink back to
// one of each once idle; calls that find no buffer free wait for one of
// their connection's instead of failing. Before, every connection had 128
// buffers of 1 MiB (two per credit) from connect to disconnect, whatever
// its calls used.
func TestBuffersFollowCalls(t *testing.T) {
	old := shrinkAfter
	shrinkAfter = 200 * time.Millisecond
	t.Cleanup(func() { shrinkAfter = old })
	const block = (1<<20 + 64<<10 + 4095) &^ 4095 // MaxIO's default, in pages
	budget := &testBudget{limit: 4 * block}
	s, prov, dir, rootFH := startExport(t, Config{Budget: budget})

	tr, err := xprtrdma.New(xprtrdma.Config{Provider: prov, Addr: s.Addr()})
	if err != nil {
		t.Fatal(err)
	}
	rpc := sunrpc.NewClient(tr, sunrpc.Config{Prog: nfs3.Program, Vers: nfs3.Version, Timeout: 20 * time.Second,
		Auth: sunrpc.Auth{Flavor: sunrpc.AuthSys, Machine: "test"}, ProcNames: nfs3.ProcNames})
	t.Cleanup(func() { rpc.Close() })
	c := nfs3.NewClient(rpc, nfs3.ClientConfig{})
	ctx := context.Background()
	cred := &sunrpc.Cred{}
	var cr nfs3.CreateResult
	if err := c.Create(ctx, cred, &rootFH, "f", nfs3.Unchecked, &nfs3.Sattr{SetMode: true, Mode: 0o644}, nfs3.Verf{}, &cr); err != nil {
		t.Fatal(err)
	}
	const calls = 24
	data := make([]byte, calls<<20)
	rand.Read(data)
	var wg sync.WaitGroup
	errs := make(chan error, 2*calls)
	var grown int64
	var grownMu sync.Mutex
	sample := func() {
		grownMu.Lock()
		grown = max(grown, connBuffers(s))
		grownMu.Unlock()
	}
	for i := range calls {
		wg.Add(1)
		go func() {
			defer wg.Done()
			buf := tr.PayloadBuffer(1 << 20)
			copy(buf.B, data[i<<20:(i+1)<<20])
			var res nfs3.WriteResult
			if err := c.Write(ctx, cred, &cr.FH, uint64(i)<<20, buf.B, nfs3.Unstable, &res); err != nil {
				errs <- fmt.Errorf("WRITE %d: %w", i, err)
			}
			buf.Release()
			sample()
		}()
	}
	wg.Wait()
	for i := range calls {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var res nfs3.ReadResult
			if err := c.Read(ctx, cred, &cr.FH, uint64(i)<<20, 1<<20, &res); err != nil {
				errs <- fmt.Errorf("READ %d: %w", i, err)
				return
			}
			if !bytes.Equal(res.Data, data[i<<20:(i+1)<<20]) {
				errs <- fmt.Errorf("READ %d: the data differs", i)
			}
			res.Release()
			sample()
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if got, _ := os.ReadFile(filepath.Join(dir, "f")); !bytes.Equal(got, data) {
		t.Error("the server's file differs from what was written")
	}
	_, peak := budget.state()
	t.Logf("pull and push buffers: at most %d KiB; budget: at most %d KiB of %d", grown>>10, peak>>10, budget.limit>>10)
	if grown > int64(2*block+budget.limit) {
		t.Errorf("the connection had %d KiB of pull and push buffers, more than one of each and the %d KiB budget", grown>>10, budget.limit>>10)
	}
	if peak == 0 {
		t.Error("24 concurrent 1 MiB calls took nothing of the budget: the buffers did not grow")
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		used, _ := budget.state()
		n := connBuffers(s)
		if used == 0 && n == 2*block {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("idle for 5 s, the connection keeps %d KiB of pull and push buffers and %d KiB of the budget, want %d and 0",
				n>>10, used>>10, 2*block>>10)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
