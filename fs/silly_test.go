package fs

import (
	"os"
	"syscall"
	"testing"
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
