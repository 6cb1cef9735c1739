package fs

import (
	"os"
	"syscall"
	"testing"
	"time"

	"github.com/hanwen/go-fuse/v2/fuse"
)

// keepsCache opens node with flags and reports whether the open keeps the
// kernel's cached data (FOPEN_KEEP_CACHE); the handle stays open.
func (h *harness) keepsCache(node uint64, flags uint32) (fh uint64, keep bool) {
	h.t.Helper()
	fh, openFlags, en := h.open(node, flags)
	if en != 0 {
		h.t.Fatalf("open: %v", en)
	}
	return fh, openFlags&fuse.FOPEN_KEEP_CACHE != 0
}

// TestDataCacheSurvivesOwnChmod: a chmod through the client, whose reply
// shows the file as the cached data knew it, leaves the data cached, as
// the kernel client's weak cache consistency does; a chmod behind the
// client's back drops it at the next open.
func TestDataCacheSurvivesOwnChmod(t *testing.T) {
	h := newHarness(t, harnessConfig{})
	node, fh := h.mustCreate(rootNode, "f", 0o644)
	if en := h.write(node, fh, 0, []byte("data")); en != 0 {
		t.Fatal(en)
	}
	h.close(node, fh)
	fh, _ = h.keepsCache(node, syscall.O_RDONLY)
	h.close(node, fh)
	if _, en := h.setattr(node, fuse.SetAttrIn{SetAttrInCommon: fuse.SetAttrInCommon{Valid: fuse.FATTR_MODE, Mode: 0o600}}); en != 0 {
		t.Fatal(en)
	}
	fh, keep := h.keepsCache(node, syscall.O_RDONLY)
	h.close(node, fh)
	if !keep {
		t.Errorf("open after this client's chmod drops the cached data")
	}
	time.Sleep(10 * time.Millisecond) // a later ctime
	if err := os.Chmod(h.dir+"/f", 0o640); err != nil {
		t.Fatal(err)
	}
	fh, keep = h.keepsCache(node, syscall.O_RDONLY)
	h.close(node, fh)
	if keep {
		t.Errorf("open after a chmod on the server keeps the cached data")
	}
}

// TestDataCacheWhileOpenForWriting: a change seen while the file is open
// for writing leaves the cached data until an open that finds the file
// open nowhere else, as the kernel client defers its invalidation.
func TestDataCacheWhileOpenForWriting(t *testing.T) {
	h := newHarness(t, harnessConfig{})
	node, fh := h.mustCreate(rootNode, "f", 0o644)
	h.close(node, fh)
	w, _ := h.keepsCache(node, syscall.O_WRONLY)
	time.Sleep(10 * time.Millisecond)
	if err := os.Chmod(h.dir+"/f", 0o640); err != nil {
		t.Fatal(err)
	}
	h.fs.invalidate(h.fs.objectOf(t, "f"))
	if _, en := h.getattr(node); en != 0 {
		t.Fatal(en)
	}
	r, keep := h.keepsCache(node, syscall.O_RDONLY)
	if !keep {
		t.Errorf("open while the file is open for writing drops the cached data on a change")
	}
	h.close(node, r)
	h.close(node, w)
	r, keep = h.keepsCache(node, syscall.O_RDONLY)
	h.close(node, r)
	if keep {
		t.Errorf("the first open after the writer closed keeps the data cached through a change")
	}
	r, keep = h.keepsCache(node, syscall.O_RDONLY)
	h.close(node, r)
	if !keep {
		t.Errorf("the open after that drops the cached data again")
	}
}
