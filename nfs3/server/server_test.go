package server

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rdmafs/rdmafs/nfs3"
)

func TestReadOnlyServer(t *testing.T) {
	root := exportDir(t)
	os.WriteFile(filepath.Join(root, "f"), []byte("x"), 0o666)
	_, addr := startServer(t, Options{Root: root, Export: trusted, ReadOnly: true})
	c := dialServer(t, addr)
	rootFH := c.root()
	fh := c.mustLookup(rootFH, "f")
	if res := c.write(asRoot, fh, 0, []byte("y"), nfs3.FileSync); res.status != nfs3.ErrROFS {
		t.Errorf("WRITE: %d, want ROFS", res.status)
	}
	if st, _ := c.create(asRoot, rootFH, "new", 0, 0o644); st != nfs3.ErrROFS {
		t.Errorf("CREATE: %d, want ROFS", st)
	}
	if st := c.status(nfs3.ProcRemove, asRoot, dirop(rootFH, "f")); st != nfs3.ErrROFS {
		t.Errorf("REMOVE: %d, want ROFS", st)
	}
	if st, got := c.access(asRoot, fh, 0x3f); st != nfs3.OK || got != nfs3.AccessRead {
		t.Errorf("ACCESS: %d %#x, want READ only", st, got)
	}
	if st, data, _ := c.read(asRoot, fh, 0, 10); st != nfs3.OK || string(data) != "x" {
		t.Errorf("READ: %d %q", st, data)
	}
}

func TestNewRejectsBadRoots(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("the server needs root")
	}
	dir := t.TempDir()
	file := filepath.Join(dir, "file")
	os.WriteFile(file, nil, 0o644)
	for _, root := range []string{"", filepath.Join(dir, "missing"), file} {
		if _, err := New(Options{Root: root, Export: trusted}); err == nil {
			t.Errorf("New(%q) succeeded", root)
		}
	}
	// /proc does not support file handles.
	if _, err := New(Options{Root: "/proc/self", Export: trusted}); err == nil || !strings.Contains(err.Error(), "handle") {
		t.Errorf("New(/proc/self): %v", err)
	}
}
