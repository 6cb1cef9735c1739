package server

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	"github.com/rdmafs/rdmafs/nfs3"
	"github.com/rdmafs/rdmafs/sunrpc"
)

func TestCreateWriteReadCommit(t *testing.T) {
	root := exportDir(t)
	_, addr := startServer(t, Options{Root: root, Export: trusted})
	c := dialServer(t, addr)
	rootFH := c.root()

	st, fh := c.create(asRoot, rootFH, "f", 0, 0o640)
	if st != nfs3.OK {
		t.Fatalf("CREATE: %d", st)
	}
	if st, fh2 := c.lookup(asRoot, rootFH, "f"); st != nfs3.OK || !bytes.Equal(fh, fh2) {
		t.Fatalf("LOOKUP: %d %x, want %x", st, fh2, fh)
	}
	w1 := c.write(asRoot, fh, 0, []byte("hello "), nfs3.Unstable)
	if w1.status != nfs3.OK || w1.count != 6 || w1.committed != nfs3.Unstable {
		t.Fatalf("WRITE UNSTABLE: %+v", w1)
	}
	w2 := c.write(asRoot, fh, 6, []byte("world"), nfs3.FileSync)
	if w2.status != nfs3.OK || w2.count != 5 || w2.committed != nfs3.FileSync || !bytes.Equal(w1.verf, w2.verf) {
		t.Fatalf("WRITE FILE_SYNC: %+v (first verifier %x)", w2, w1.verf)
	}
	if st, data, eof := c.read(asRoot, fh, 0, 100); st != nfs3.OK || string(data) != "hello world" || !eof {
		t.Fatalf("READ: %d %q eof=%v", st, data, eof)
	}
	if st, data, eof := c.read(asRoot, fh, 6, 2); st != nfs3.OK || string(data) != "wo" || eof {
		t.Fatalf("READ part: %d %q eof=%v", st, data, eof)
	}
	if st, verf := c.commit(asRoot, fh); st != nfs3.OK || !bytes.Equal(verf, w1.verf) {
		t.Fatalf("COMMIT: %d %x, want verifier %x", st, verf, w1.verf)
	}
	// One verifier for the whole server, whichever connection and worker.
	if w3 := dialServer(t, addr).write(asRoot, fh, 11, []byte("!"), nfs3.DataSync); w3.status != nfs3.OK || w3.committed != nfs3.DataSync || !bytes.Equal(w3.verf, w1.verf) {
		t.Fatalf("WRITE on another connection: %+v, want verifier %x", w3, w1.verf)
	}
	st, a := c.getattr(asRoot, fh)
	if st != nfs3.OK || a.typ != nfs3.TypeReg || a.mode&0o7777 != 0o640 || a.size != 12 {
		t.Fatalf("GETATTR: %d %+v", st, a)
	}
	if got, _ := os.ReadFile(filepath.Join(root, "f")); string(got) != "hello world!" {
		t.Fatalf("on disk: %q", got)
	}
	fi, _ := os.Stat(filepath.Join(root, "f"))
	if fi.Mode().Perm() != 0o640 {
		t.Fatalf("on-disk mode %v: the umask must not apply", fi.Mode())
	}
	// CREATE UNCHECKED of an existing file keeps its data; GUARDED refuses.
	if st, _ := c.create(asRoot, rootFH, "f", 0, 0o600); st != nfs3.OK {
		t.Fatalf("CREATE UNCHECKED existing: %d", st)
	}
	if fi, _ := os.Stat(filepath.Join(root, "f")); fi.Mode().Perm() != 0o640 {
		t.Fatalf("CREATE UNCHECKED changed the mode of the existing file to %v", fi.Mode())
	}
	if got, _ := os.ReadFile(filepath.Join(root, "f")); string(got) != "hello world!" {
		t.Fatalf("CREATE UNCHECKED truncated the file: %q", got)
	}
	if st, _ := c.create(asRoot, rootFH, "f", 1, 0o640); st != nfs3.ErrExist {
		t.Fatalf("CREATE GUARDED existing: %d", st)
	}
	if st, _ := c.create(asRoot, rootFH, "g", nfs3.Exclusive, -1); st != nfs3.ErrNotSupp {
		t.Fatalf("CREATE EXCLUSIVE: %d, want NOTSUPP (clients fall back to GUARDED)", st)
	}
	// MKDIR applies the mode exactly: no umask, setgid kept.
	if st, _ := c.mkdir(asRoot, rootFH, "shared", 0o2777); st != nfs3.OK {
		t.Fatalf("MKDIR: %d", st)
	}
	if fi, err := os.Stat(filepath.Join(root, "shared")); err != nil || fi.Mode().Perm() != 0o777 || fi.Mode()&os.ModeSetgid == 0 {
		t.Fatalf("MKDIR made %v, %v", fi.Mode(), err)
	}
}

// TestWriteCountMismatch: a WRITE whose count disagrees with the length of
// its data is GARBAGE_ARGS, as knfsd answers it (nfs3svc_decode_writeargs),
// and writes nothing; before, the server wrote the shorter of the two and
// answered OK.
func TestWriteCountMismatch(t *testing.T) {
	root := exportDir(t)
	_, addr := startServer(t, Options{Root: root, Export: trusted})
	c := dialServer(t, addr)
	rootFH := c.root()
	st, fh := c.create(asRoot, rootFH, "f", 0, 0o644)
	if st != nfs3.OK {
		t.Fatalf("CREATE: %d", st)
	}
	for _, count := range []uint32{3, 9, 1 << 20} {
		a := fhArg(fh)
		a.Uint64(0)
		a.Uint32(count)
		a.Uint32(uint32(nfs3.FileSync))
		a.Opaque([]byte("hello"))
		rep := c.call(nfs3.Program, nfs3.Version, nfs3.ProcWrite, asRoot, a.Buf)
		if rep.replyStat != sunrpc.MsgAccepted || rep.stat != uint32(sunrpc.GarbageArgs) {
			t.Errorf("WRITE of count %d with 5 bytes of data: %+v, want GARBAGE_ARGS", count, rep)
		}
	}
	if got, _ := os.ReadFile(filepath.Join(root, "f")); len(got) != 0 {
		t.Errorf("WRITEs refused as garbage left %q in the file", got)
	}
	if w := c.write(asRoot, fh, 0, []byte("hello"), nfs3.FileSync); w.status != nfs3.OK || w.count != 5 {
		t.Fatalf("WRITE whose count matches its data: %+v", w)
	}
}
