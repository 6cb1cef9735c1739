package server

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	"github.com/rdmafs/rdmafs/nfs3"
	"github.com/rdmafs/rdmafs/sunrpc"
)

func TestMountExportNull(t *testing.T) {
	root := exportDir(t)
	os.MkdirAll(filepath.Join(root, "sub", "dir"), 0o755)
	os.WriteFile(filepath.Join(root, "sub", "file"), nil, 0o644)
	os.Symlink("sub", filepath.Join(root, "link"))
	_, addr := startServer(t, Options{Root: root, Export: trusted})
	c := dialServer(t, addr)

	st, rootFH := c.mount("/")
	if st != 0 || len(rootFH) == 0 || len(rootFH) > nfs3.FHSize || len(rootFH)%4 != 0 {
		t.Fatalf("MNT /: status %d, handle %x", st, rootFH)
	}
	// Like mountd, any spelling of the root is the root, the empty path
	// too (libnfs sends it for nfs://host/file), and a directory below it
	// mounts too (its handle is the one LOOKUP gives).
	for _, p := range []string{"/.", "//", "/sub/..", ""} {
		if st, fh := c.mount(p); st != 0 || !bytes.Equal(fh, rootFH) {
			t.Errorf("MNT %q: status %d, handle %x, want the root's", p, st, fh)
		}
	}
	subFH := c.mustLookup(rootFH, "sub")
	dirFH := c.mustLookup(subFH, "dir")
	for _, p := range []string{"/sub/dir", "//sub/dir/", "/sub/./dir"} {
		if st, fh := c.mount(p); st != 0 || !bytes.Equal(fh, dirFH) {
			t.Errorf("MNT %q: status %d, handle %x, want %x", p, st, fh, dirFH)
		}
	}
	for p, want := range map[string]nfs3.MountStatus{
		"/nope":      nfs3.MountErrNoEnt,
		"x":          nfs3.MountErrNoEnt,
		"/sub/file":  nfs3.MountErrNotDir,
		"/link":      nfs3.MountErrAcces, // a symlink is never followed
		"/..":        nfs3.MountErrAcces, // nothing above the export
		"/sub/../..": nfs3.MountErrAcces,
	} {
		if st, _ := c.mount(p); st != want {
			t.Errorf("MNT %q: status %d, want %d", p, st, want)
		}
	}

	// EXPORT lists "/" with its clients: by default the server's own
	// address.
	rep := c.call(nfs3.MountProgram, nfs3.MountVersion, nfs3.MountProcExport, asRoot, nil)
	r := decoder(rep.body)
	if r.Uint32() != 1 || string(r.Opaque(nfs3.MountPathLen)) != "/" || r.Uint32() != 1 || string(r.Opaque(255)) != "127.0.0.1" ||
		r.Uint32() != 0 || r.Uint32() != 0 || r.Err() != nil || r.Offset() != len(rep.body) {
		t.Errorf("EXPORT: %x", rep.body)
	}
	if rep := c.call(nfs3.MountProgram, nfs3.MountVersion, nfs3.MountProcDump, asRoot, nil); rep.stat != uint32(sunrpc.Success) || !bytes.Equal(rep.body, []byte{0, 0, 0, 0}) {
		t.Errorf("DUMP: %+v", rep)
	}
	for _, prog := range []uint32{nfs3.Program, nfs3.MountProgram} {
		rep := c.call(prog, 3, 0, asNone, nil)
		if rep.replyStat != sunrpc.MsgAccepted || rep.stat != uint32(sunrpc.Success) || len(rep.body) != 0 {
			t.Errorf("NULL of %d: %+v", prog, rep)
		}
	}
}
