package server

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rdmafs/rdmafs/nfs3"
)

func TestErrorStatuses(t *testing.T) {
	root := exportDir(t)
	os.MkdirAll(filepath.Join(root, "full", "sub"), 0o755)
	os.WriteFile(filepath.Join(root, "file"), nil, 0o644)
	_, addr := startServer(t, Options{Root: root, Export: trusted})
	c := dialServer(t, addr)
	rootFH := c.root()
	_, fileFH := c.lookup(asRoot, rootFH, "file")

	check := func(what string, got, want nfs3.Status) {
		t.Helper()
		if got != want {
			t.Errorf("%s: status %d, want %d", what, got, want)
		}
	}
	st, _ := c.lookup(asRoot, rootFH, "missing")
	check("LOOKUP missing", st, nfs3.ErrNoEnt)
	st, _ = c.lookup(asRoot, rootFH, "a/b")
	check("LOOKUP with a slash", st, nfs3.ErrAcces)
	st, _ = c.lookup(asRoot, rootFH, strings.Repeat("n", 256))
	check("LOOKUP 256-byte name", st, nfs3.ErrNameTooLong)
	st, _ = c.lookup(asRoot, fileFH, "x")
	check("LOOKUP in a file", st, nfs3.ErrNotDir)
	check("RMDIR non-empty", c.status(nfs3.ProcRmdir, asRoot, dirop(rootFH, "full")), nfs3.ErrNotEmpty)
	check("RMDIR a file", c.status(nfs3.ProcRmdir, asRoot, dirop(rootFH, "file")), nfs3.ErrNotDir)
	check("REMOVE a directory", c.status(nfs3.ProcRemove, asRoot, dirop(rootFH, "full")), nfs3.ErrIsDir)
	check("REMOVE missing", c.status(nfs3.ProcRemove, asRoot, dirop(rootFH, "missing")), nfs3.ErrNoEnt)
	st, _ = c.mkdir(asRoot, rootFH, "file", 0o755)
	check("MKDIR over a file", st, nfs3.ErrExist)
	st, _ = c.mkdir(asUser(2000), c.mustLookup(rootFH, "full"), "x", 0o755)
	check("MKDIR without permission", st, nfs3.ErrAcces)
	rename := func(from, to string) nfs3.Status {
		a := dirop(rootFH, from)
		a.Opaque(rootFH)
		a.Opaque([]byte(to))
		return c.status(nfs3.ProcRename, asRoot, a)
	}
	os.Mkdir(filepath.Join(root, "empty"), 0o755)
	check("RENAME onto a non-empty directory", rename("empty", "full"), nfs3.ErrNotEmpty)
	check("RENAME a directory onto a file", rename("empty", "file"), nfs3.ErrNotDir)
	check("RENAME a directory into itself", rename("full", "full/sub/x"), nfs3.ErrAcces)
	st, data, _ := c.read(asRoot, rootFH, 0, 10)
	check("READ a directory", st, nfs3.ErrIsDir)
	_ = data
	if res := c.write(asRoot, rootFH, 0, []byte("x"), nfs3.Unstable); res.status != nfs3.ErrInval && res.status != nfs3.ErrIsDir {
		t.Errorf("WRITE a directory: %d", res.status)
	}
	if st, _ := c.getattr(asRoot, fileFH); st != nfs3.OK {
		t.Fatalf("GETATTR: %d", st)
	}
}
