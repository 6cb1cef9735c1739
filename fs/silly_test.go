package fs

import (
	"os"
	"strings"
	"syscall"
	"testing"

	"github.com/hanwen/go-fuse/v2/fuse"
)

// TestSillyRename: a file unlinked while open is renamed to a hidden name
// and stays readable through its handle; its last close removes it.
func TestSillyRename(t *testing.T) {
	h := newHarness(t, harnessConfig{})
	node, fh := h.mustCreate(rootNode, "f", 0o644)
	if en := h.write(node, fh, 0, []byte("still here")); en != 0 {
		t.Fatal(en)
	}
	if en := h.flush(node, fh); en != 0 {
		t.Fatal(en)
	}
	// Written to after the flush: not on its way to being released.
	if en := h.write(node, fh, 10, []byte("!")); en != 0 {
		t.Fatal(en)
	}
	if en := h.unlink(rootNode, "f"); en != 0 {
		t.Fatal(en)
	}
	names, _ := os.ReadDir(h.dir)
	if len(names) != 1 || names[0].Name()[:4] != ".nfs" {
		t.Fatalf("the server's directory after unlinking an open file: %v", names)
	}
	if got, en := h.read(node, fh, 0, 100); en != 0 || string(got) != "still here!" {
		t.Errorf("read through the handle after unlink: %q (%v)", got, en)
	}
	h.close(node, fh)
	if names, _ := os.ReadDir(h.dir); len(names) != 0 {
		t.Errorf("the server's directory after the last close: %v", names)
	}
	if _, _, en := h.lookup(rootNode, "f"); en != syscall.ENOENT {
		t.Errorf("lookup of the unlinked name: %v", en)
	}
}

// TestSillyRemoveAsUnlinker: the hidden name of a file unlinked while open
// is removed, at the last close, as whoever unlinked it, as the kernel
// client does; if that user may no longer change the directory, the
// hidden name stays, whoever closes the file.
func TestSillyRemoveAsUnlinker(t *testing.T) {
	h := newHarness(t, harnessConfig{})
	a := h.as(alice, alice)
	dir, en := a.mkdir(rootNode, "d", 0o755)
	if en != 0 {
		t.Fatal(en)
	}
	node, fh := h.mustCreate(dir, "f", 0o644) // root's open file
	if en := a.unlink(dir, "f"); en != 0 {
		t.Fatalf("the directory's owner unlinks root's open file: %v", en)
	}
	if _, en := a.setattr(dir, fuse.SetAttrIn{SetAttrInCommon: fuse.SetAttrInCommon{Valid: fuse.FATTR_MODE, Mode: 0o555}}); en != 0 {
		t.Fatal(en)
	}
	h.close(node, fh)
	names, _ := os.ReadDir(h.dir + "/d")
	if len(names) != 1 || !strings.HasPrefix(names[0].Name(), ".nfs") {
		t.Errorf("the server's directory after root's close, which the unlinker may no longer change: %v, want the hidden name", names)
	}
}
