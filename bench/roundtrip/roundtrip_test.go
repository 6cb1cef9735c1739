// Package roundtrip benchmarks one NFS READ and one WRITE round trip of
// rdmafs's client over RPC-over-RDMA on the soft verbs provider, with the
// allocations each call makes, which must be none
// (TestRoundTripDoesNotAllocate). The server is
// `rdmafs serve` in a process of its own, so that the allocations counted
// are the client's alone (the transport's goroutines included).
//
//	go test -bench . -benchtime 2000x ./bench/roundtrip   (as root)
package roundtrip

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"testing"
	"time"

	"github.com/rdmafs/rdmafs/nfs3"
	"github.com/rdmafs/rdmafs/sunrpc"
	"github.com/rdmafs/rdmafs/verbs/soft"
	"github.com/rdmafs/rdmafs/xprtrdma"
)

var cred = &sunrpc.Cred{}

// server starts `rdmafs serve` over TCP and soft RDMA on a new directory
// and returns its MOUNT (TCP) and RDMA addresses.
func server(b testing.TB) (mountAddr, rdmaAddr string) {
	b.Helper()
	if os.Geteuid() != 0 {
		b.Skip("rdmafs serve switches credentials per call and needs root")
	}
	dir := b.TempDir()
	bin := filepath.Join(dir, "rdmafs")
	if out, err := exec.Command("go", "build", "-o", bin, "github.com/rdmafs/rdmafs/cmd/rdmafs").CombinedOutput(); err != nil {
		b.Fatalf("building rdmafs: %v: %s", err, out)
	}
	export := filepath.Join(dir, "export")
	if err := os.Mkdir(export, 0o755); err != nil {
		b.Fatal(err)
	}
	cmd := exec.Command(bin, "serve", "-o", "port=0,rdmaport=0,proto=rdma,provider=soft,no_root_squash,insecure", export)
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		b.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	tcpRE := regexp.MustCompile(`on port (\d+) \(NFSv3 and MOUNT\)`)
	rdmaRE := regexp.MustCompile(`NFSv3 over RDMA \(provider=soft\) on port (\d+)`)
	sc := bufio.NewScanner(stdout)
	for (mountAddr == "" || rdmaAddr == "") && sc.Scan() {
		if m := tcpRE.FindStringSubmatch(sc.Text()); m != nil {
			mountAddr = net.JoinHostPort("127.0.0.1", m[1])
		}
		if m := rdmaRE.FindStringSubmatch(sc.Text()); m != nil {
			rdmaAddr = net.JoinHostPort("127.0.0.1", m[1])
		}
	}
	if mountAddr == "" || rdmaAddr == "" {
		b.Fatal("rdmafs serve did not say where it listens")
	}
	go func() {
		for sc.Scan() {
		}
	}()
	return mountAddr, rdmaAddr
}

// client mounts the export and returns an NFS client over RPC-over-RDMA
// and the handle of a file of size bytes.
func client(b testing.TB, size int) (*nfs3.Client, nfs3.FH) {
	b.Helper()
	mountAddr, rdmaAddr := server(b)
	ctx := context.Background()
	auth := sunrpc.Auth{Flavor: sunrpc.AuthSys, Machine: "roundtrip"}
	host, port, _ := net.SplitHostPort(mountAddr)
	p, _ := strconv.Atoi(port)
	mc, err := nfs3.DialMount(ctx, nfs3.DialConfig{Host: host, Port: p, Auth: auth, Timeout: 10 * time.Second})
	if err != nil {
		b.Fatal(err)
	}
	root, _, err := mc.Mnt(ctx, cred, "/")
	mc.Close()
	if err != nil {
		b.Fatal(err)
	}
	tr, err := xprtrdma.New(xprtrdma.Config{Provider: soft.New(), Addr: rdmaAddr, ChunkBuffers: 16})
	if err != nil {
		b.Fatal(err)
	}
	rpc := sunrpc.NewClient(tr, sunrpc.Config{Prog: nfs3.Program, Vers: nfs3.Version, Auth: auth,
		Timeout: 30 * time.Second, ProcNames: nfs3.ProcNames})
	b.Cleanup(func() { rpc.Close() })
	c := nfs3.NewClient(rpc, nfs3.ClientConfig{})
	var cr nfs3.CreateResult
	if err := c.Create(ctx, cred, &root, "f", nfs3.Unchecked, &nfs3.Sattr{SetMode: true, Mode: 0o644}, nfs3.Verf{}, &cr); err != nil {
		b.Fatal(err)
	}
	var wr nfs3.WriteResult
	for off := 0; off < size; off += 1 << 20 {
		if err := c.Write(ctx, cred, &cr.FH, uint64(off), make([]byte, min(1<<20, size-off)), nfs3.FileSync, &wr); err != nil {
			b.Fatal(err)
		}
	}
	return c, cr.FH
}

// sizes: one page (inline over RDMA) and one large call (a chunk).
var sizes = []int{4 << 10, 1 << 20}

func BenchmarkReadRoundTrip(b *testing.B) {
	for _, n := range sizes {
		b.Run(fmt.Sprintf("%dKiB", n>>10), func(b *testing.B) {
			c, fh := client(b, n)
			ctx := context.Background()
			var res nfs3.ReadResult
			read := func() {
				if err := c.Read(ctx, cred, &fh, 0, uint32(n), &res); err != nil {
					b.Fatal(err)
				}
				if len(res.Data) != n {
					b.Fatalf("READ returned %d bytes, want %d", len(res.Data), n)
				}
				res.Release()
			}
			read() // the connection is up, the buffers are made
			b.SetBytes(int64(n))
			b.ReportAllocs()
			b.ResetTimer()
			for range b.N {
				read()
			}
		})
	}
}

func BenchmarkWriteRoundTrip(b *testing.B) {
	for _, n := range sizes {
		b.Run(fmt.Sprintf("%dKiB", n>>10), func(b *testing.B) {
			c, fh := client(b, n)
			ctx := context.Background()
			data := make([]byte, n)
			var res nfs3.WriteResult
			write := func() {
				if err := c.Write(ctx, cred, &fh, 0, data, nfs3.Unstable, &res); err != nil {
					b.Fatal(err)
				}
				if int(res.Count) != n {
					b.Fatalf("WRITE wrote %d bytes, want %d", res.Count, n)
				}
			}
			write()
			b.SetBytes(int64(n))
			b.ReportAllocs()
			b.ResetTimer()
			for range b.N {
				write()
			}
		})
	}
}
