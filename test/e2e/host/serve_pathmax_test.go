package host

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/rdmafs/rdmafs/test/e2e/e2etest"
	"golang.org/x/sys/unix"
)

// TestServeBeyondPathMaxReads: a file whose path on the server is longer
// than PATH_MAX, read again and again after the server's caches are
// dropped, reads at once. The server places such a file inside the export
// by the hint its LOOKUP left (the directory's handle and the name); a
// hint that kept a view of the call's record, which later calls
// overwrote, named the file as its own directory, and each open of it
// recursed down to the end of the server's descriptors and searched the
// export at every level: 20 reads took minutes and logged thousands of
// "reconnected ... by a search" lines.
func TestServeBeyondPathMaxReads(t *testing.T) {
	needHost(t)
	s := startServer(t, "", 0, "no_root_squash")
	mnt := s.mount(t)
	const depth = 34 // 34 × 128 bytes, beyond PATH_MAX (4096)
	fd, err := unix.Open(mnt, unix.O_PATH|unix.O_DIRECTORY, 0)
	if err != nil {
		t.Fatal(err)
	}
	for i := range depth {
		name := strings.Repeat(string(rune('a'+i%26)), 127)
		if err := unix.Mkdirat(fd, name, 0o755); err != nil {
			t.Fatalf("mkdir at depth %d (%d bytes below the mount): %v", i, i*128, err)
		}
		next, err := unix.Openat(fd, name, unix.O_PATH|unix.O_DIRECTORY, 0)
		unix.Close(fd)
		if err != nil {
			t.Fatalf("open at depth %d: %v", i, err)
		}
		fd = next
	}
	dir := fd
	closed := false
	defer func() {
		if !closed {
			unix.Close(dir)
		}
	}()
	data := bytes.Repeat([]byte("beyond PATH_MAX "), 1000)
	f, err := unix.Openat(dir, "file", unix.O_CREAT|unix.O_WRONLY|unix.O_TRUNC, 0o644)
	if err != nil {
		t.Fatalf("create at %d bytes: %v", depth*128, err)
	}
	if n, err := unix.Write(f, data); err != nil || n != len(data) {
		t.Fatalf("write: %d %v", n, err)
	}
	if err := unix.Close(f); err != nil {
		t.Fatalf("close: %v", err)
	}
	e2etest.DropCaches(t)

	const reads = 20
	done := 0
	start := time.Now()
	for i := range reads {
		f, err := unix.Openat(dir, "file", unix.O_RDONLY, 0)
		if err != nil {
			t.Fatalf("read %d: open: %v", i, err)
		}
		got := make([]byte, 2*len(data))
		n, err := unix.Read(f, got)
		unix.Close(f)
		if err != nil || !bytes.Equal(got[:n], data) {
			t.Fatalf("read %d: %d bytes, %v; want the %d written", i, n, err, len(data))
		}
		done++
		if time.Since(start) > 30*time.Second {
			break
		}
	}
	took := time.Since(start)
	unix.Close(dir)
	closed = true
	e2etest.Unmount(t, mnt)
	s.stop() // its log is whole once it has exited
	searches := strings.Count(s.log.String(), "by a search of the export")
	t.Logf("%d reads in %v; the server searched the export %d times", done, took, searches)
	if done < reads || took > 5*time.Second {
		t.Errorf("%d of %d reads of a file beyond PATH_MAX in %v", done, reads, took)
	}
	// Each handle of the file went out with a hint (CREATE, LOOKUP): a
	// search means a hint was lost or held the wrong directory.
	if searches > 0 {
		t.Errorf("the server searched the export %d times for a file it gave out by LOOKUP and CREATE", searches)
	}
}
