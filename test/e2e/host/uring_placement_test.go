package host

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	"github.com/rdmafs/rdmafs/test/e2e/e2etest"
)

// TestIOURingPlacesRDMAData: over RDMA, the io_uring entries' payload
// buffers are the transport's registered chunk buffers. A READ's data
// lands by RDMA Write in the entry that answers FUSE, and an O_DIRECT
// WRITE's leaves by read chunk from the entry FUSE filled: rdmafs copies
// neither (write_chunks_placed counts every write chunk, payload_copies
// stays 0). Through /dev/fuse the same I/O has every write chunk in a
// chunk buffer of the transport's, which rdmafs hands to the kernel from
// there, and every WRITE payload copied into one.
func TestIOURingPlacesRDMAData(t *testing.T) {
	needHost(t)
	setEnableURing(t, true)
	for _, c := range []struct{ channel, opt string }{{"io_uring", "io_uring"}, {"dev", "noio_uring"}} {
		t.Run(c.channel, func(t *testing.T) {
			s := startServer(t, "", 0, append(rdmaServe, "no_root_squash")...)
			mnt, _ := mountForeground(t, s, c.opt)
			want := e2etest.DirectRoundTrip(t, filepath.Join(mnt, "f"), 8, 1<<20)
			if got, err := os.ReadFile(filepath.Join(s.dir, "f")); err != nil || !bytes.Equal(got, want) {
				t.Fatalf("the server's copy differs from what was written (%v)", err)
			}
			e2etest.CheckPlacement(t, e2etest.Stats(t, rdmafsBin, mnt), c.channel, 8)
		})
	}
}
