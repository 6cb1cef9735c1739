package server

import (
	"bytes"
	"math/rand"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/rdmafs/rdmafs/nfs3"
	"github.com/rdmafs/rdmafs/sunrpc"
)

func TestHandleSurvivesRestart(t *testing.T) {
	root := exportDir(t)
	if err := os.MkdirAll(filepath.Join(root, "d"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(root, "d", "f"), []byte("data"), 0o644); err != nil {
		t.Fatal(err)
	}
	srv1, err := New(Options{Root: root, Export: trusted, Logf: t.Logf})
	if err != nil {
		t.Fatal(err)
	}
	c := dialServer(t, serveOn(t, srv1))
	rootFH := c.root()
	_, dirFH := c.lookup(asRoot, rootFH, "d")
	st, fileFH := c.lookup(asRoot, dirFH, "f")
	if st != nfs3.OK {
		t.Fatalf("LOOKUP: %d", st)
	}
	v1 := c.write(asRoot, fileFH, 4, []byte("!"), nfs3.Unstable).verf
	srv1.Close()

	// A rename while the server is down: handles name inodes, not paths.
	if err := os.Rename(filepath.Join(root, "d"), filepath.Join(root, "e")); err != nil {
		t.Fatal(err)
	}
	_, addr := startServer(t, Options{Root: root, Export: trusted})
	c2 := dialServer(t, addr)
	if st, fh := c2.mount("/"); st != 0 || !bytes.Equal(fh, rootFH) {
		t.Fatalf("root handle changed over a restart: %x vs %x", fh, rootFH)
	}
	if st, a := c2.getattr(asRoot, fileFH); st != nfs3.OK || a.size != 5 {
		t.Fatalf("GETATTR with a handle from before the restart: %d %+v", st, a)
	}
	if st, data, _ := c2.read(asRoot, fileFH, 0, 10); st != nfs3.OK || string(data) != "data!" {
		t.Fatalf("READ after restart: %d %q", st, data)
	}
	if st, _ := c2.getattr(asRoot, dirFH); st != nfs3.OK {
		t.Fatalf("GETATTR of the renamed directory: %d", st)
	}
	if v2 := c2.write(asRoot, fileFH, 5, []byte("?"), nfs3.Unstable).verf; bytes.Equal(v1, v2) {
		t.Fatalf("write verifier %x did not change over a restart", v1)
	}
}

func TestStaleHandles(t *testing.T) {
	root := exportDir(t)
	_, addr := startServer(t, Options{Root: root, Export: trusted})
	c := dialServer(t, addr)
	rootFH := c.root()

	_, fh := c.create(asRoot, rootFH, "doomed", 0, 0o644)
	if err := os.Remove(filepath.Join(root, "doomed")); err != nil {
		t.Fatal(err)
	}
	if st, _ := c.getattr(asRoot, fh); st != nfs3.ErrStale {
		t.Errorf("GETATTR of a deleted file: %d, want STALE", st)
	}

	outside := t.TempDir()
	os.WriteFile(filepath.Join(outside, "x"), nil, 0o644)
	srvOut, err := New(Options{Root: outside, Export: trusted})
	if err != nil {
		t.Fatal(err)
	}
	outFH, err := srvOut.handleAt(srvOut.rootfd, "x")
	srvOut.Close()
	if err != nil {
		t.Fatal(err)
	}

	rng := rand.New(rand.NewSource(1))
	random := make([]byte, 16)
	rng.Read(random)
	badVersion := append([]byte{}, rootFH...)
	badVersion[0] = 7
	padded := append(append([]byte{}, rootFH...), 0, 0, 0, 0)
	bad := map[string][]byte{
		"empty":        {},
		"random":       random,
		"bad version":  badVersion,
		"extra bytes":  padded,
		"all ones":     bytes.Repeat([]byte{0xff}, nfs3.FHSize),
		"short":        rootFH[:6],
		"other export": outFH,
	}
	for name, h := range bad {
		if st, _ := c.getattr(asRoot, h); st != nfs3.ErrStale {
			t.Errorf("GETATTR, %s handle: %d, want STALE", name, st)
		}
		if st, _ := c.access(asRoot, h, 0x3f); st != nfs3.ErrStale {
			t.Errorf("ACCESS, %s handle: %d, want STALE", name, st)
		}
		if st, _, _ := c.read(asRoot, h, 0, 10); st != nfs3.ErrStale {
			t.Errorf("READ, %s handle: %d, want STALE", name, st)
		}
	}
	// A handle longer than NFS3_FHSIZE does not even decode.
	rep := c.call(nfs3.Program, nfs3.Version, nfs3.ProcGetattr, asRoot, fhArg(make([]byte, nfs3.FHSize+4)).Buf)
	if rep.replyStat != sunrpc.MsgAccepted || rep.stat != uint32(sunrpc.GarbageArgs) {
		t.Errorf("GETATTR with a 68-byte handle: %+v, want GARBAGE_ARGS", rep)
	}
}

// A file handle the kernel opens "disconnected" (its dentry was evicted, so
// /proc shows no path) is placed inside the export by the directory and
// name it was given out under, and after a restart by searching the tree.
func TestDisconnectedHandle(t *testing.T) {
	if testing.Short() {
		t.Skip("drops the kernel's dentry cache")
	}
	root := exportDir(t)
	os.MkdirAll(filepath.Join(root, "a", "b"), 0o755)
	os.WriteFile(filepath.Join(root, "a", "b", "f"), []byte("x"), 0o644)
	srv1, addr := startServer(t, Options{Root: root, Export: trusted})
	c := dialServer(t, addr)
	fh := c.mustLookup(c.mustLookup(c.mustLookup(c.root(), "a"), "b"), "f")
	evict := func(s *Server) {
		t.Helper()
		if err := os.WriteFile("/proc/sys/vm/drop_caches", []byte("2"), 0); err != nil {
			t.Skipf("cannot drop caches: %v", err)
		}
		h, _ := decodeHandle(fh)
		fd, err := unix.OpenByHandleAt(s.rootfd, h, unix.O_PATH)
		if err != nil {
			t.Fatal(err)
		}
		defer unix.Close(fd)
		if p, err := readlinkFD(fd); err == nil && strings.HasPrefix(p, s.rootPrefix) {
			t.Skip("the kernel kept the file's dentry")
		}
	}
	evict(srv1)
	if st, data, _ := c.read(asRoot, fh, 0, 10); st != nfs3.OK || string(data) != "x" {
		t.Fatalf("READ of a disconnected file, by its hint: %d %q", st, data)
	}
	srv1.Close()
	srv2, addr := startServer(t, Options{Root: root, Export: trusted})
	evict(srv2)
	if st, a := dialServer(t, addr).getattr(asRoot, fh); st != nfs3.OK || a.size != 1 {
		t.Fatalf("GETATTR of a disconnected file after a restart, by search: %d %+v", st, a)
	}
}
