package e2etest

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/json"
	"os"
	"os/exec"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// DirectRoundTrip writes blocks blocks of size random bytes to path with
// O_DIRECT, so that every block goes through the file system and none
// stays in the page cache, reads each back the same way and checks it,
// and returns what it wrote.
func DirectRoundTrip(t testing.TB, path string, blocks, size int) []byte {
	t.Helper()
	// O_DIRECT wants page-aligned memory.
	buf, err := unix.Mmap(-1, 0, size, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Munmap(buf)
	want := make([]byte, blocks*size)
	rand.Read(want)
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR|unix.O_DIRECT, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	for i := range blocks {
		copy(buf, want[i*size:])
		if _, err := f.WriteAt(buf, int64(i*size)); err != nil {
			t.Fatalf("O_DIRECT write of block %d of %s: %v", i, path, err)
		}
	}
	for i := range blocks {
		clear(buf)
		if _, err := f.ReadAt(buf, int64(i*size)); err != nil {
			t.Fatalf("O_DIRECT read of block %d of %s: %v", i, path, err)
		}
		if !bytes.Equal(buf, want[i*size:(i+1)*size]) {
			t.Fatalf("block %d of %s read back differs from what was written", i, path)
		}
	}
	return want
}

// MountStats is what `rdmafs stats -json` says of a mount that a test
// looks at.
type MountStats struct {
	FUSEChannel string `json:"fuse_channel"`
	Xprt        []struct {
		Proto    string            `json:"proto"`
		Counters map[string]uint64 `json:"counters"`
	} `json:"xprt"`
}

// Stats runs `bin stats -json mnt`.
func Stats(t testing.TB, bin, mnt string) MountStats {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, bin, "stats", "-json", mnt).Output()
	var s MountStats
	if err != nil || json.Unmarshal(out, &s) != nil {
		t.Fatalf("%s stats -json %s: %v: %s", bin, mnt, err, out)
	}
	return s
}

// CheckPlacement checks the counters of a mount over RDMA that moved n
// 1 MiB READs and O_DIRECT WRITEs through channel ("io_uring" or "dev"):
// through io_uring every write chunk is placed in a ring entry and no
// payload is copied; through /dev/fuse none is placed and every WRITE's
// payload is copied.
func CheckPlacement(t testing.TB, s MountStats, channel string, n uint64) {
	t.Helper()
	if s.FUSEChannel != channel || len(s.Xprt) != 1 || s.Xprt[0].Proto != "rdma" {
		t.Fatalf("fuse_channel %q, transports %+v; want %s over one rdma", s.FUSEChannel, s.Xprt, channel)
	}
	x := s.Xprt[0].Counters
	placed, writes, copies, reads := x["write_chunks_placed"], x["write_chunk_count"], x["payload_copies"], x["read_chunk_count"]
	t.Logf("%s: write chunks %d, placed %d; read chunks %d, payload copies %d", channel, writes, placed, reads, copies)
	if writes < n || reads < n {
		t.Fatalf("%d write chunks and %d read chunks for %d 1 MiB READs and WRITEs", writes, reads, n)
	}
	switch channel {
	case "io_uring":
		if placed != writes || copies != 0 {
			t.Errorf("write_chunks_placed %d of %d write chunks, payload_copies %d: want all placed and no copy", placed, writes, copies)
		}
	case "dev":
		if placed != 0 || copies < n {
			t.Errorf("write_chunks_placed %d, payload_copies %d through /dev/fuse: want 0 placed, each WRITE copied", placed, copies)
		}
	}
}
