package host

import (
	"bytes"
	"crypto/rand"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
	"time"

	"golang.org/x/sys/unix"
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
	const blocks, size = 8, 1 << 20
	for _, c := range []struct {
		channel string
		opt     string
	}{{"io_uring", "io_uring"}, {"dev", "noio_uring"}} {
		t.Run(c.channel, func(t *testing.T) {
			s := startServer(t, "", 0, append(rdmaServe, "no_root_squash")...)
			mnt, _ := mountForeground(t, s, c.opt)

			// O_DIRECT, so that every block goes to rdmafs and back,
			// from and into page-aligned memory.
			buf, err := unix.Mmap(-1, 0, size, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS)
			if err != nil {
				t.Fatal(err)
			}
			defer unix.Munmap(buf)
			want := make([]byte, blocks*size)
			rand.Read(want)
			f, err := os.OpenFile(filepath.Join(mnt, "f"), os.O_CREATE|os.O_RDWR|unix.O_DIRECT, 0o644)
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			for i := range blocks {
				copy(buf, want[i*size:])
				if _, err := f.WriteAt(buf, int64(i*size)); err != nil {
					t.Fatalf("O_DIRECT write of block %d: %v", i, err)
				}
			}
			if got, err := os.ReadFile(filepath.Join(s.dir, "f")); err != nil || !bytes.Equal(got, want) {
				t.Fatalf("the server's copy differs from what was written (%v)", err)
			}
			for i := range blocks {
				clear(buf)
				if _, err := f.ReadAt(buf, int64(i*size)); err != nil {
					t.Fatalf("O_DIRECT read of block %d: %v", i, err)
				}
				if !bytes.Equal(buf, want[i*size:(i+1)*size]) {
					t.Fatalf("block %d read back differs from the file", i)
				}
			}

			code, out := rdmafs(t, 10*time.Second, "stats", "-json", mnt)
			if code != 0 {
				t.Fatalf("rdmafs stats -json: exit %d: %s", code, out)
			}
			var j struct {
				FUSEChannel string `json:"fuse_channel"`
				Xprt        []struct {
					Proto    string            `json:"proto"`
					Counters map[string]uint64 `json:"counters"`
				} `json:"xprt"`
			}
			if err := json.Unmarshal([]byte(out), &j); err != nil || len(j.Xprt) != 1 || j.Xprt[0].Proto != "rdma" {
				t.Fatalf("rdmafs stats -json: %v: %s", err, out)
			}
			if j.FUSEChannel != c.channel {
				t.Fatalf("fuse_channel %q, want %q", j.FUSEChannel, c.channel)
			}
			x := j.Xprt[0].Counters
			placed, writes, copies, reads := x["write_chunks_placed"], x["write_chunk_count"], x["payload_copies"], x["read_chunk_count"]
			t.Logf("%s: write chunks %d, placed %d; read chunks %d, payload copies %d", c.channel, writes, placed, reads, copies)
			if writes < blocks || reads < blocks {
				t.Fatalf("%d write chunks and %d read chunks for %d 1 MiB READs and WRITEs", writes, reads, blocks)
			}
			switch c.channel {
			case "io_uring":
				if placed != writes || copies != 0 {
					t.Errorf("write_chunks_placed %d of %d write chunks, payload_copies %d: want all placed and no copy", placed, writes, copies)
				}
			case "dev":
				if placed != 0 || copies < blocks {
					t.Errorf("write_chunks_placed %d, payload_copies %d through /dev/fuse: want 0 placed, each WRITE copied", placed, copies)
				}
			}
		})
	}
}
