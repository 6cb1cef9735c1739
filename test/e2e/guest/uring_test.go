package guest

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rdmafs/rdmafs/test/e2e/e2etest"
)

// TestRdmafsRDMAIOURingPlacement: against knfsd over rxe, through FUSE
// over io_uring, the server writes READ data straight into the ring entry
// that answers the kernel and pulls O_DIRECT WRITE data from the entry
// the kernel filled (write_chunks_placed, payload_copies 0); through
// /dev/fuse the same I/O is copied. Only a kernel that offers FUSE over
// io_uring runs it (LAB_KERNEL=current boots with fuse.enable_uring=1).
func TestRdmafsRDMAIOURingPlacement(t *testing.T) {
	e := lab(t)
	exec.Command("modprobe", "fuse").Run() // for its parameters
	if b, err := os.ReadFile("/sys/module/fuse/parameters/enable_uring"); err != nil || strings.TrimSpace(string(b)) != "Y" {
		t.Skip("this kernel does not offer FUSE over io_uring (LAB_KERNEL=current does)")
	}
	bin := rdmafsBin(t, e)
	for _, c := range []struct{ channel, opt string }{{"io_uring", "io_uring"}, {"dev", "noio_uring"}} {
		t.Run(c.channel, func(t *testing.T) {
			t.Setenv(extraOptsEnv, "") // the channel is this test's to choose
			mnt := mountRdmafs(t, e, "proto=rdma,vers=3,"+c.opt)
			name := "placement-" + c.channel
			t.Cleanup(func() { os.Remove(filepath.Join(e.Export, name)) })
			want := e2etest.DirectRoundTrip(t, filepath.Join(mnt, name), 8, 1<<20)
			if got, err := os.ReadFile(filepath.Join(e.Export, name)); err != nil || !bytes.Equal(got, want) {
				t.Fatalf("the server's copy differs from what was written (%v)", err)
			}
			e2etest.CheckPlacement(t, e2etest.Stats(t, bin, mnt), c.channel, 8)
		})
	}
}
