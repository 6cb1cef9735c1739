package main

import (
	"bytes"
	"context"
	"net"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/rdmafs/rdmafs/cmd/rdmafs/serveopts"
	"github.com/rdmafs/rdmafs/mountopts"
	"github.com/rdmafs/rdmafs/nfs3"
	"github.com/rdmafs/rdmafs/nfs3/server"
	"github.com/rdmafs/rdmafs/sunrpc"
	"github.com/rdmafs/rdmafs/verbs/soft"
	"github.com/rdmafs/rdmafs/xprtrdma"
)

// TestRDMAXprtLineParses runs an RPC-over-RDMA transport (soft provider)
// against rdmafs serve's RDMA listener, makes a 1 MiB WRITE and a 1 MiB
// READ, and reads the transport's "xprt:" line as rdmafs stats does: each
// count a user looks for is under its name, and every field has one.
func TestRDMAXprtLineParses(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("the NFS server switches credentials per call and needs root")
	}
	dir := t.TempDir()
	// MOUNT comes over TCP from an unreserved port, and the test acts as
	// root: the export is insecure and does not squash root.
	srv, err := server.New(server.Options{Root: dir, Export: server.Export{Insecure: true, NoRootSquash: true}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Close() })
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go srv.Serve(l)
	o := serveopts.Default()
	o.Addr, o.RDMAPort, o.Provider = "127.0.0.1", 0, mountopts.ProviderSoft
	rs, err := serveRDMA(srv, &o, t.Logf)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { rs.Close() })

	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cred := &sunrpc.Cred{}
	mc, err := nfs3.DialMount(ctx, nfs3.DialConfig{Host: "127.0.0.1", Port: l.Addr().(*net.TCPAddr).Port,
		Auth: sunrpc.Auth{Flavor: sunrpc.AuthSys}, Timeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	root, _, err := mc.Mnt(ctx, cred, "/")
	mc.Close()
	if err != nil {
		t.Fatal(err)
	}
	tr, err := xprtrdma.New(xprtrdma.Config{Provider: soft.New(), Addr: rs.Addr()})
	if err != nil {
		t.Fatal(err)
	}
	rpc := sunrpc.NewClient(tr, sunrpc.Config{Prog: nfs3.Program, Vers: nfs3.Version, Timeout: 10 * time.Second,
		Auth: sunrpc.Auth{Flavor: sunrpc.AuthSys, Machine: "test"}, ProcNames: nfs3.ProcNames})
	defer rpc.Close()
	c := nfs3.NewClient(rpc, nfs3.ClientConfig{})

	var cres nfs3.CreateResult
	if err := c.Create(ctx, cred, &root, "f", nfs3.Unchecked, &nfs3.Sattr{SetMode: true, Mode: 0o644}, nfs3.Verf{}, &cres); err != nil {
		t.Fatal(err)
	}
	data := bytes.Repeat([]byte("rdmafs"), 1<<20/6+1)[:1<<20]
	var wres nfs3.WriteResult
	if err := c.Write(ctx, cred, &cres.FH, 0, data, nfs3.FileSync, &wres); err != nil {
		t.Fatal(err)
	}
	var rres nfs3.ReadResult
	if err := c.Read(ctx, cred, &cres.FH, 0, 1<<20, &rres); err != nil {
		t.Fatal(err)
	}
	rres.Release()

	line := tr.XprtStats()
	ms, err := parseMountStats("device 127.0.0.1:/ mounted on /mnt with fstype nfs statvers=1.1\n\txprt:\t" + line + "\n")
	if err != nil {
		t.Fatal(err)
	}
	x := ms[0].Xprts[0]
	t.Logf("%s", line)
	for _, f := range x.Fields {
		if strings.HasPrefix(f.Name, "field") {
			t.Errorf("field %s = %d has no name", f.Name, f.Value)
		}
	}
	got := func(name string) uint64 { return value(x.Fields, name) }
	for _, want := range []struct {
		name string
		n    uint64
	}{
		{"connect_count", 1},
		{"sends", 3}, // CREATE, WRITE, READ
		{"recvs", 3},
		{"read_chunk_count", 1},  // the WRITE's data
		{"write_chunk_count", 1}, // room for the READ's data
		{"total_rdma_request", 1 << 20},
		{"total_rdma_reply", 1 << 20},
		{"payload_copies", 1}, // the WRITE's data came from outside the transport's buffers
		{"bad_reply_count", 0},
	} {
		if n := got(want.name); n != want.n {
			t.Errorf("%s = %d, want %d", want.name, n, want.n)
		}
	}
	if reg, peak := got("registered_bytes"), got("registered_peak_bytes"); reg == 0 || peak < reg {
		t.Errorf("registered_bytes %d, registered_peak_bytes %d: want some, the peak no less", reg, peak)
	}
}
