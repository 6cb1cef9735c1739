package fs

import (
	"fmt"
	"testing"
	"time"

	"github.com/hanwen/go-fuse/v2/fuse"
)

// TestReaddirSeek lists a directory in small pages, seeks back into the
// middle and reads on: the listing from there is the same.
func TestReaddirSeek(t *testing.T) {
	h := newHarness(t, harnessConfig{opts: Options{RSize: 4096,
		ACRegMin: time.Second, ACRegMax: time.Second, ACDirMin: time.Second, ACDirMax: time.Second}})
	for i := range 300 {
		h.writeServerFile(fmt.Sprintf("entry-%03d", i), nil, 0o644)
	}
	ctx := h.ctx()
	fh, _, en := h.fs.root.OpendirHandle(ctx, 0)
	if en != 0 {
		t.Fatal(en)
	}
	d := fh.(*dirHandle)
	var first []string
	offs := map[string]uint64{}
	for {
		e, en := d.Readdirent(ctx)
		if en != 0 {
			t.Fatal(en)
		}
		if e == nil {
			break
		}
		first = append(first, e.Name)
		offs[e.Name] = e.Off
	}
	if len(first) != 302 {
		t.Fatalf("%d names, want 300 and . and ..", len(first))
	}
	from := first[150]
	if en := d.Seekdir(ctx, offs[from]); en != 0 {
		t.Fatal(en)
	}
	var again []string
	for {
		e, en := d.Readdirent(ctx)
		if en != 0 {
			t.Fatal(en)
		}
		if e == nil {
			break
		}
		again = append(again, e.Name)
	}
	if fmt.Sprint(again) != fmt.Sprint(first[151:]) {
		t.Errorf("after seekdir to the offset of %s: %d names, want the %d after it", from, len(again), len(first[151:]))
	}
}

// TestFsyncOfDirectory: fsync(2) of a directory succeeds, as on the kernel
// client, whose directory changes are all on the server already.
func TestFsyncOfDirectory(t *testing.T) {
	h := newHarness(t, harnessConfig{})
	in := fuse.OpenIn{InHeader: h.header(rootNode)}
	var out fuse.OpenOut
	if st := h.raw.OpenDir(nil, &in, &out); !st.Ok() {
		t.Fatal(st)
	}
	fin := fuse.FsyncIn{InHeader: h.header(rootNode), Fh: out.Fh}
	if st := h.raw.FsyncDir(nil, &fin); !st.Ok() {
		t.Errorf("fsync of a directory: %v", st)
	}
	h.raw.ReleaseDir(&fuse.ReleaseIn{InHeader: h.header(rootNode), Fh: out.Fh})
}
