package xprtrdma

import (
	"bytes"
	"context"
	"crypto/rand"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/rdmafs/rdmafs/nfs3"
	"github.com/rdmafs/rdmafs/nfs3/server"
	"github.com/rdmafs/rdmafs/rpcrdma"
	"github.com/rdmafs/rdmafs/sunrpc"
	"github.com/rdmafs/rdmafs/svcrdma"
	"github.com/rdmafs/rdmafs/verbs/soft"
)

// These tests run the client transport against the server (svcrdma) over
// the soft verbs provider, in front of rdmafs's NFS server (nfs3/server) on
// a temporary directory: real calls, real files, real (software) RDMA.

// testBed is an NFS server with a TCP listener (for MOUNT) and an
// RPC-over-RDMA listener, and what a client needs to reach it.
type testBed struct {
	dir      string
	prov     *soft.Provider
	nfs      *server.Server
	rdma     *svcrdma.Server
	mountAdr string
	root     nfs3.FH
}

func needRoot(t *testing.T) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("the NFS server switches credentials per call and needs root")
	}
}

func newTestBed(t *testing.T, cfg svcrdma.Config) *testBed {
	t.Helper()
	needRoot(t)
	b := &testBed{dir: t.TempDir(), prov: soft.New()}
	var err error
	// MOUNT comes over TCP from an unreserved port, and the tests act as
	// root: the export is insecure and does not squash root.
	export := server.Export{Insecure: true, NoRootSquash: true}
	if b.nfs, err = server.New(server.Options{Root: b.dir, Export: export}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.nfs.Close() })
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go b.nfs.Serve(l)
	b.mountAdr = l.Addr().String()

	cfg.Provider = b.prov
	cfg.Addr = "127.0.0.1:0"
	cfg.Service = b.nfs.RPC()
	if b.rdma, err = svcrdma.Listen(context.Background(), cfg); err != nil {
		t.Fatal(err)
	}
	go b.rdma.Serve()
	t.Cleanup(func() { b.rdma.Close() })

	host, port, _ := net.SplitHostPort(b.mountAdr)
	p, _ := strconv.Atoi(port)
	mc, err := nfs3.DialMount(context.Background(), nfs3.DialConfig{Host: host, Port: p,
		Auth: sunrpc.Auth{Flavor: sunrpc.AuthSys}, Timeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer mc.Close()
	if b.root, _, err = mc.Mnt(context.Background(), root, "/"); err != nil {
		t.Fatal(err)
	}
	return b
}

var root = &sunrpc.Cred{}

// client returns an NFS client over a new transport to the bed, through
// the bed's provider unless cfg names one (which must reach it).
func (b *testBed) client(t *testing.T, cfg Config) (*nfs3.Client, *Transport) {
	t.Helper()
	if cfg.Provider == nil {
		cfg.Provider = b.prov
	}
	cfg.Addr = b.rdma.Addr()
	tr, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	rpc := sunrpc.NewClient(tr, sunrpc.Config{Prog: nfs3.Program, Vers: nfs3.Version, Timeout: 10 * time.Second,
		Auth: sunrpc.Auth{Flavor: sunrpc.AuthSys, Machine: "test"}, ProcNames: nfs3.ProcNames})
	t.Cleanup(func() { rpc.Close() })
	return nfs3.NewClient(rpc, nfs3.ClientConfig{}), tr
}

func (b *testBed) create(t *testing.T, c *nfs3.Client, name string) nfs3.FH {
	t.Helper()
	var res nfs3.CreateResult
	if err := c.Create(context.Background(), root, &b.root, name, nfs3.Unchecked, &nfs3.Sattr{SetMode: true, Mode: 0o644}, nfs3.Verf{}, &res); err != nil {
		t.Fatal(err)
	}
	return res.FH
}

// bigDir makes directory d on the server with n empty files, enough for a
// READDIRPLUS reply too large to come inline, and returns its handle.
func (b *testBed) bigDir(t *testing.T, c *nfs3.Client, n int) nfs3.FH {
	t.Helper()
	os.Mkdir(filepath.Join(b.dir, "d"), 0o755)
	for i := range n {
		os.WriteFile(filepath.Join(b.dir, "d", fmt.Sprintf("entry-%04d", i)), nil, 0o644)
	}
	var lr nfs3.LookupResult
	if err := c.Lookup(context.Background(), root, &b.root, "d", &lr); err != nil {
		t.Fatal(err)
	}
	return lr.FH
}

func randomBytes(n int) []byte {
	b := make([]byte, n)
	rand.Read(b)
	return b
}

// payload copies data into one of the transport's buffers, as write-behind
// does.
func payload(t *testing.T, tr *Transport, data []byte) *sunrpc.Buffer {
	t.Helper()
	b := tr.PayloadBuffer(len(data))
	if b == nil {
		t.Fatal("no payload buffer")
	}
	copy(b.B, data)
	return b
}

// TestChunkTypes sends calls that take each kind of chunk and checks the
// data and the counters: a 1 MiB WRITE goes as a read chunk from the
// caller's buffer (no copy), a 1 MiB READ comes back by a write chunk, a
// large READDIRPLUS by a reply chunk, and a call too large for the Send
// goes whole as RDMA_NOMSG.
func TestChunkTypes(t *testing.T) {
	b := newTestBed(t, svcrdma.Config{})
	c, tr := b.client(t, Config{})
	ctx := context.Background()
	fh := b.create(t, c, "f")

	data := randomBytes(1 << 20)
	buf := payload(t, tr, data)
	var wres nfs3.WriteResult
	if err := c.Write(ctx, root, &fh, 0, buf.B, nfs3.FileSync, &wres); err != nil {
		t.Fatal(err)
	}
	buf.Release()
	if got, _ := os.ReadFile(filepath.Join(b.dir, "f")); !bytes.Equal(got, data) {
		t.Fatal("server file differs from what was written")
	}
	var rres nfs3.ReadResult
	if err := c.Read(ctx, root, &fh, 0, 1<<20, &rres); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(rres.Data, data) {
		t.Fatal("read back differs")
	}
	if !holds(tr.chunks, rres.Data) {
		t.Error("READ data did not land in a chunk buffer")
	}
	rres.Release()

	dir := b.bigDir(t, c, 500)
	n := 0
	if _, err := c.Readdirplus(ctx, root, &dir, 0, nfs3.Verf{}, 32768, 65536, func(*nfs3.DirEntry) { n++ }); err != nil {
		t.Fatal(err)
	}
	if n < 50 {
		t.Errorf("READDIRPLUS returned %d entries", n)
	}

	// A NULL call with 8 KiB of arguments fits in no Send.
	rpc := c.RPC()
	call := rpc.NewCall(nfs3.ProcNull, nil)
	call.Head = append(call.Head, make([]byte, 8192)...)
	if err := rpc.Do(ctx, call); err != nil {
		t.Fatal(err)
	}
	call.Release()

	s := &tr.stats
	for name, v := range map[string]uint64{
		"read chunks": s.readChunks.Load(), "write chunks": s.writeChunks.Load(),
		"reply chunks": s.replyChunks.Load(), "RDMA_NOMSG calls": s.nomsgCalls.Load(),
	} {
		if v == 0 {
			t.Errorf("no %s", name)
		}
	}
	if s.payloadCopies.Load() != 0 || s.fixupBytes.Load() != 0 {
		t.Errorf("payload copies %d, fixup bytes %d: want 0 for 1 MiB I/O from transport buffers",
			s.payloadCopies.Load(), s.fixupBytes.Load())
	}
	if s.pullupBytes.Load() < 8192 {
		t.Errorf("pullup bytes %d: the RDMA_NOMSG call was copied and must count", s.pullupBytes.Load())
	}
}

// holds reports whether p lies in the arena.
func holds(a *rpcrdma.Arena, p []byte) bool { _, ok := a.OffsetOf(p); return ok }

// TestInlineThresholds: with max_inline_write 1024, a 2000-byte WRITE goes
// by read chunk; with 4096 it goes inline. Both write the right bytes.
func TestInlineThresholds(t *testing.T) {
	for _, inline := range []int{1024, 4096} {
		t.Run(strconv.Itoa(inline), func(t *testing.T) {
			b := newTestBed(t, svcrdma.Config{})
			c, tr := b.client(t, Config{MaxInlineRead: inline, MaxInlineWrite: inline})
			fh := b.create(t, c, "f")
			data := randomBytes(2000)
			var wres nfs3.WriteResult
			if err := c.Write(context.Background(), root, &fh, 0, data, nfs3.FileSync, &wres); err != nil {
				t.Fatal(err)
			}
			if got, _ := os.ReadFile(filepath.Join(b.dir, "f")); !bytes.Equal(got, data) {
				t.Fatal("server file differs")
			}
			chunks := tr.stats.readChunks.Load()
			if inline == 1024 && chunks != 1 || inline == 4096 && chunks != 0 {
				t.Errorf("inline %d: %d read chunks", inline, chunks)
			}
			var rres nfs3.ReadResult
			defer rres.Release()
			if err := c.Read(context.Background(), root, &fh, 0, 2000, &rres); err != nil || !bytes.Equal(rres.Data, data) {
				t.Fatalf("read back: %v", err)
			}
		})
	}
}

// TestCreditWindows runs many calls at once with a window of 1 credit
// (they queue) and of 128 (the server grants its 64).
func TestCreditWindows(t *testing.T) {
	for _, credits := range []int{1, 128} {
		t.Run(strconv.Itoa(credits), func(t *testing.T) {
			b := newTestBed(t, svcrdma.Config{Credits: min(credits, 64)})
			// With credits 1, the client asks for 4 and the server
			// grants 1.
			c, tr := b.client(t, Config{Credits: max(credits, 4)})
			fh := b.create(t, c, "f")
			var wg sync.WaitGroup
			errs := make(chan error, 64)
			for i := range 64 {
				wg.Add(1)
				go func() {
					defer wg.Done()
					data := bytes.Repeat([]byte{byte(i)}, 8192)
					var wres nfs3.WriteResult
					errs <- c.Write(context.Background(), root, &fh, uint64(i)*8192, data, nfs3.FileSync, &wres)
				}()
			}
			wg.Wait()
			close(errs)
			for err := range errs {
				if err != nil {
					t.Fatal(err)
				}
			}
			got, _ := os.ReadFile(filepath.Join(b.dir, "f"))
			for i := range 64 {
				if got[i*8192] != byte(i) || got[i*8192+8191] != byte(i) {
					t.Fatalf("block %d wrong on the server", i)
				}
			}
			waits := tr.stats.creditWaits.Load()
			if credits == 1 && waits == 0 {
				t.Error("with one credit granted, no call waited for one")
			}
			t.Logf("credits %d: %d calls waited for a credit", credits, waits)
		})
	}
}
