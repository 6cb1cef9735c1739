package server

import (
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rdmafs/rdmafs/nfs3"
	"golang.org/x/sys/unix"
)

// deepDirs makes a chain of n directories, each named by a letter repeated
// 127 times, under root, and returns their names. Made through descriptors,
// as the chain is longer than PATH_MAX.
func deepDirs(t *testing.T, root string, n int) []string {
	t.Helper()
	fd, err := unix.Open(root, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for i := range n {
		name := strings.Repeat(string(rune('a'+i%26)), 127)
		if err := unix.Mkdirat(fd, name, 0o755); err != nil {
			t.Fatalf("mkdir at depth %d: %v", i, err)
		}
		next, err := unix.Openat(fd, name, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
		unix.Close(fd)
		if err != nil {
			t.Fatalf("open at depth %d: %v", i, err)
		}
		fd = next
		names = append(names, name)
	}
	unix.Close(fd)
	return names
}

// TestHintOwnsItsHandle: a file deeper than PATH_MAX is placed inside the
// export by the hint its LOOKUP left (the directory's handle and the
// name). The directory's handle came in a call record the server reuses
// for a later call; the hint must keep its own copy. Kept as a view of
// the record, a later call (a GETATTR of the file itself, whose handle
// lies where the directory's lay) turned the hint into "the file is in
// itself": every open of the handle opened it again through its hint,
// down to the end of the descriptors, and then searched the tree at every
// level. The calls run on one P, so the record of a call goes back to the
// very pool slot the next call's record comes from.
func TestHintOwnsItsHandle(t *testing.T) {
	root := exportDir(t)
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1))
	var searches atomic.Int32
	_, addr := startServer(t, Options{Root: root, Export: trusted, Logf: func(f string, a ...any) {
		if strings.Contains(f, "by a search") {
			searches.Add(1)
			return
		}
		t.Logf(f, a...)
	}})
	names := deepDirs(t, root, 34)
	c := dialServer(t, addr)
	dir := c.root()
	for _, name := range names {
		dir = c.mustLookup(dir, name)
	}
	if st, _ := c.create(asRoot, dir, "file", nfs3.Unchecked, 0o644); st != nfs3.OK {
		t.Fatalf("CREATE at the bottom: %d", st)
	}
	if w := c.write(asRoot, c.mustLookup(dir, "file"), 0, []byte("deep"), nfs3.FileSync); w.status != nfs3.OK {
		t.Fatalf("WRITE at the bottom: %d", w.status)
	}

	const reads = 20
	_ = c.conn.SetDeadline(time.Now().Add(20 * time.Second))
	start := time.Now()
	// As a user, whom the server serves from no cached open file: every
	// call opens the handle.
	user := asUser(1000)
	fh := c.mustLookup(dir, "file")
	for i := range reads {
		if st, a := c.getattr(user, fh); st != nfs3.OK || a.size != 4 {
			t.Fatalf("GETATTR %d of the file beyond PATH_MAX: %d %+v", i, st, a)
		}
		if st, data, _ := c.read(user, fh, 0, 10); st != nfs3.OK || string(data) != "deep" {
			t.Fatalf("READ %d of the file beyond PATH_MAX: %d %q", i, st, data)
		}
	}
	took := time.Since(start)
	if n := searches.Load(); n > 0 {
		t.Errorf("%d searches of the export for a file whose LOOKUP left a hint", n)
	}
	if took > 5*time.Second {
		t.Errorf("%d GETATTR and READ of a file beyond PATH_MAX took %v", reads, took)
	}
}
