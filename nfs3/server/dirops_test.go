package server

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/rdmafs/rdmafs/nfs3"
)

func TestLinkMknodSymlinkRename(t *testing.T) {
	root := exportDir(t)
	os.WriteFile(filepath.Join(root, "f"), []byte("x"), 0o644)
	_, addr := startServer(t, Options{Root: root, Export: trusted})
	c := dialServer(t, addr)
	rootFH := c.root()
	fh := c.mustLookup(rootFH, "f")

	// LINK.
	a := fhArg(fh)
	a.Opaque(rootFH)
	a.Opaque([]byte("g"))
	if st := c.status(nfs3.ProcLink, asRoot, a); st != nfs3.OK {
		t.Fatalf("LINK: %d", st)
	}
	if fi, err := os.Stat(filepath.Join(root, "g")); err != nil || fi.Sys().(*syscall.Stat_t).Nlink != 2 {
		t.Fatalf("after LINK: %v", err)
	}
	if st, fh2 := c.lookup(asRoot, rootFH, "g"); st != nfs3.OK || !bytes.Equal(fh, fh2) {
		t.Errorf("the new name has another handle")
	}

	// MKNOD of a FIFO, and READ of it answers at once instead of blocking.
	m := dirop(rootFH, "fifo")
	m.Uint32(uint32(nfs3.TypeFifo))
	writeSattr(m, 0o640)
	r := c.nfs(nfs3.ProcMknod, asUser(1000), m)
	if st := getStatus(r); st != nfs3.OK || r.Uint32() != 1 {
		t.Fatalf("MKNOD fifo: %d", st)
	}
	fifoFH := r.Opaque(nfs3.FHSize)
	if fi, err := os.Lstat(filepath.Join(root, "fifo")); err != nil || fi.Mode()&os.ModeNamedPipe == 0 || fi.Mode().Perm() != 0o640 {
		t.Fatalf("MKNOD made %v, %v", fi.Mode(), err)
	}
	if st, _, _ := c.read(asRoot, fifoFH, 0, 10); st != nfs3.ErrInval {
		t.Errorf("READ of a FIFO: %d, want INVAL", st)
	}
	m = dirop(rootFH, "chr")
	m.Uint32(uint32(nfs3.TypeChr))
	writeSattr(m, 0o600)
	m.Uint32(1)
	m.Uint32(3)
	if st := c.status(nfs3.ProcMknod, asUser(1000), m); st != nfs3.ErrPerm {
		t.Errorf("MKNOD of a device as a user: %d, want PERM", st)
	}
	if st := c.status(nfs3.ProcMknod, asRoot, m); st != nfs3.OK {
		t.Errorf("MKNOD of a device as root: %d", st)
	}
	if fi, err := os.Lstat(filepath.Join(root, "chr")); err != nil || fi.Mode()&os.ModeCharDevice == 0 {
		t.Errorf("MKNOD chr made %v, %v", fi, err)
	}

	// A symlink out of the export is stored, never followed.
	s := dirop(rootFH, "esc")
	writeSattr(s, -1)
	s.Opaque([]byte("/etc"))
	if st := c.status(nfs3.ProcSymlink, asRoot, s); st != nfs3.OK {
		t.Fatalf("SYMLINK: %d", st)
	}
	escFH := c.mustLookup(rootFH, "esc")
	// A long target and the caller's ownership.
	long := strings.Repeat("0123456789/", 370)
	s = dirop(rootFH, "long")
	writeSattr(s, 0o777)
	s.Opaque([]byte(long))
	if st := c.status(nfs3.ProcSymlink, asUser(1000), s); st != nfs3.OK {
		t.Fatalf("SYMLINK with a %d-byte target: %d", len(long), st)
	}
	if got, err := os.Readlink(filepath.Join(root, "long")); err != nil || got != long {
		t.Errorf("long symlink target: %d bytes, %v", len(got), err)
	}
	if uid, _ := ownerOf(t, filepath.Join(root, "long")); uid != 1000 {
		t.Errorf("symlink made as 1000 owned by %d", uid)
	}
	r = c.nfs(nfs3.ProcReadlink, asRoot, fhArg(escFH))
	if st := getStatus(r); st != nfs3.OK {
		t.Fatalf("READLINK: %d", st)
	}
	readPostOpAttr(r)
	if target := string(r.Opaque(4096)); target != "/etc" {
		t.Errorf("READLINK: %q", target)
	}
	if st, _ := c.lookup(asRoot, escFH, "passwd"); st != nfs3.ErrNotDir {
		t.Errorf("LOOKUP through a symlink: %d, want NOTDIR", st)
	}
	if st, _ := c.create(asRoot, escFH, "planted", 0, 0o644); st == nfs3.OK {
		t.Errorf("CREATE through a symlink succeeded")
	}
	if _, err := os.Stat("/etc/planted"); err == nil {
		t.Fatalf("a file was created outside the export")
	}
	if st, _ := c.getattr(asRoot, escFH); st != nfs3.OK {
		t.Errorf("GETATTR of a symlink: %d", st)
	}
	if st, _, _ := c.read(asRoot, escFH, 0, 10); st != nfs3.ErrInval {
		t.Errorf("READ of a symlink: %d, want INVAL", st)
	}

	// RENAME keeps handles valid.
	d := dirop(rootFH, "f")
	sub := filepath.Join(root, "sub")
	os.Mkdir(sub, 0o755)
	subFH := c.mustLookup(rootFH, "sub")
	d.Opaque(subFH)
	d.Opaque([]byte("moved"))
	if st := c.status(nfs3.ProcRename, asRoot, d); st != nfs3.OK {
		t.Fatalf("RENAME: %d", st)
	}
	if st, data, _ := c.read(asRoot, fh, 0, 10); st != nfs3.OK || string(data) != "x" {
		t.Errorf("READ after RENAME: %d %q", st, data)
	}
	if st, fh2 := c.lookup(asRoot, subFH, "moved"); st != nfs3.OK || !bytes.Equal(fh, fh2) {
		t.Errorf("handle changed over RENAME")
	}
}
