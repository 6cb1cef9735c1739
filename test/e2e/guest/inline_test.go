package guest

import (
	"fmt"
	"os"
	"slices"
	"testing"

	"github.com/rdmafs/rdmafs/test/e2e/workload"
)

// inlineServePort is the RDMA port of the serve of TestRDMAInlineSizes.
const inlineServePort = 20070

// TestRDMAInlineSizes: symlinks, listings and ACLs whose replies (and
// calls) fall on both sides of the 1 KiB and 4 KiB inline thresholds
// (workload.RunInlineSizes) read back over RPC-over-RDMA on rxe, for the
// four pairings of client (rdmafs, the kernel's) and server (knfsd, rdmafs
// serve): each pair must agree on the chunks of every such reply. With the
// kernel client as the oracle: rdmafs (with the default inline size and
// with 1 KiB) reads back from each server what the kernel client reads
// back from it, and from serve everything.
func TestRDMAInlineSizes(t *testing.T) {
	e := lab(t)
	bin := rdmafsBin(t, e)
	dir := t.TempDir()
	if err := os.Chmod(dir, 0o777); err != nil {
		t.Fatal(err)
	}
	port := startServe(t, e, bin, dir, inlineServePort, "no_root_squash")
	serve := e
	serve.Export = "/"
	serveOpts := fmt.Sprintf("proto=rdma,vers=3,port=%d,mountport=%s", inlineServePort, port)
	const small = ",max_inline_read=1024,max_inline_write=1024"
	for _, server := range []struct {
		name, dir      string
		kernel         func(t *testing.T) string
		rdmafs         func(t *testing.T, opts string) string
		kernelFailures bool // known to refuse some for every client (test/e2e/README.md)
	}{
		{"knfsd", e.Export,
			func(t *testing.T) string { return mountKernel(t, e, "rdma") },
			func(t *testing.T, opts string) string { return mountRdmafs(t, e, "proto=rdma,vers=3"+opts) }, true},
		{"serve", dir,
			func(t *testing.T) string { return mountKernelOnServe(t, e, port, inlineServePort, "rdma") },
			func(t *testing.T, opts string) string { return mountRdmafs(t, serve, serveOpts+opts) }, false},
	} {
		var kernel []string
		t.Run("kernel/"+server.name, func(t *testing.T) {
			kernel = workload.RunInlineSizes(t, server.kernel(t), server.dir, true)
			t.Logf("did not read back through the kernel client: %v", kernel)
			if len(kernel) > 0 && !server.kernelFailures {
				t.Errorf("the kernel client did not read back %v", kernel)
			}
		})
		for _, opts := range []string{"", small} {
			t.Run("rdmafs/"+server.name+opts, func(t *testing.T) {
				if got := workload.RunInlineSizes(t, server.rdmafs(t, opts), server.dir, true); !slices.Equal(got, kernel) {
					t.Errorf("did not read back through rdmafs: %v; through the kernel client: %v", got, kernel)
				}
			})
		}
	}
}
