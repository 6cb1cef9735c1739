// Command rpcload drives READs or WRITEs of one file through the rdmafs
// NFSv3 client, without FUSE, at a given concurrency, to measure the
// client and server apart from the kernel.
package main

import (
	"context"
	"flag"
	"fmt"
	"log"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rdmafs/rdmafs/nfs3"
	"github.com/rdmafs/rdmafs/sunrpc"
)

func main() {
	addr := flag.String("addr", "127.0.0.1:2049", "server host:port (MOUNT and NFS on one port)")
	export := flag.String("export", "/", "export path")
	file := flag.String("file", "bench", "file in the export's root")
	size := flag.Int64("size", 1<<30, "bytes to transfer")
	io := flag.Int("io", 1<<20, "bytes per call")
	par := flag.Int("c", 8, "calls in flight")
	write := flag.Bool("write", false, "WRITE instead of READ")
	flag.Parse()

	host, port, _ := strings.Cut(*addr, ":")
	var p int
	fmt.Sscan(port, &p)
	ctx := context.Background()
	auth := sunrpc.Auth{Flavor: sunrpc.AuthSys, Machine: "rpcload"}
	cred := &sunrpc.Cred{}
	mc, err := nfs3.DialMount(ctx, nfs3.DialConfig{Host: host, Port: p, Auth: auth, Timeout: 10 * time.Second})
	if err != nil {
		log.Fatal(err)
	}
	root, _, err := mc.Mnt(ctx, cred, *export)
	if err != nil {
		log.Fatal(err)
	}
	rpc := sunrpc.NewClient(sunrpc.NewTCP(sunrpc.TCPConfig{Addr: *addr}), sunrpc.Config{
		Prog: nfs3.Program, Vers: nfs3.Version, Auth: auth, Timeout: time.Minute, ProcNames: nfs3.ProcNames})
	c := nfs3.NewClient(rpc, nfs3.ClientConfig{})
	var fh nfs3.FH
	var lr nfs3.LookupResult
	if err := c.Lookup(ctx, cred, &root, *file, &lr); err == nil {
		fh = lr.FH
	} else {
		var cr nfs3.CreateResult
		if err := c.Create(ctx, cred, &root, *file, nfs3.Unchecked, &nfs3.Sattr{SetMode: true, Mode: 0o644}, nfs3.Verf{}, &cr); err != nil {
			log.Fatal(err)
		}
		fh = cr.FH
	}
	var next atomic.Int64
	buf := make([]byte, *io)
	start := time.Now()
	var wg sync.WaitGroup
	for range *par {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				off := next.Add(int64(*io)) - int64(*io)
				if off >= *size {
					return
				}
				if *write {
					var res nfs3.WriteResult
					if err := c.Write(ctx, cred, &fh, uint64(off), buf, nfs3.Unstable, &res); err != nil {
						log.Fatal(err)
					}
				} else {
					var res nfs3.ReadResult
					if err := c.Read(ctx, cred, &fh, uint64(off), uint32(*io), &res); err != nil {
						log.Fatal(err)
					}
					res.Release()
				}
			}
		}()
	}
	wg.Wait()
	d := time.Since(start)
	fmt.Printf("%s %d MiB in %v: %.0f MB/s with %d in flight\n", map[bool]string{true: "WRITE", false: "READ"}[*write], *size>>20, d.Round(time.Millisecond), float64(*size)/d.Seconds()/1e6, *par)
	rpc.WriteOpStats(os.Stdout)
}
