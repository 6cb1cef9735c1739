package server

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/rdmafs/rdmafs/nfs3"
)

func TestAccessAndCredentials(t *testing.T) {
	root := exportDir(t)
	secret := filepath.Join(root, "secret")
	if err := os.WriteFile(secret, []byte("s"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(secret, 1000, 1000); err != nil {
		t.Fatal(err)
	}
	_, addr := startServer(t, Options{Root: root, Export: trusted})
	c := dialServer(t, addr)
	rootFH := c.root()
	_, fh := c.lookup(asRoot, rootFH, "secret")

	const all = nfs3.AccessRead | nfs3.AccessLookup | nfs3.AccessModify | nfs3.AccessExtend | nfs3.AccessDelete | nfs3.AccessExecute
	const rw = nfs3.AccessRead | nfs3.AccessModify | nfs3.AccessExtend | nfs3.AccessDelete
	for _, tc := range []struct {
		who  *sysCred
		want uint32
	}{
		{asUser(1000), rw}, // a file: no LOOKUP, and no x bit
		{asUser(2000), 0},
		{asRoot, rw},
		{asNone, 0},
	} {
		if st, got := c.access(tc.who, fh, all); st != nfs3.OK || got != tc.want {
			t.Errorf("ACCESS as %+v: %d %#x, want %#x", tc.who, st, got, tc.want)
		}
	}
	if st, got := c.access(asUser(2000), rootFH, all); st != nfs3.OK || got != all {
		t.Errorf("ACCESS of the 0777 root as 2000: %d %#x", st, got)
	}
	if st, got := c.access(asUser(1000), fh, nfs3.AccessRead); st != nfs3.OK || got != nfs3.AccessRead {
		t.Errorf("ACCESS READ only: %d %#x", st, got)
	}

	// The kernel enforces the caller's rights.
	if res := c.write(asUser(2000), fh, 0, []byte("x"), nfs3.FileSync); res.status != nfs3.ErrAcces {
		t.Errorf("WRITE as 2000 to 1000's 0600 file: %d, want ACCES", res.status)
	}
	if st, _, _ := c.read(asUser(2000), fh, 0, 1); st != nfs3.ErrAcces {
		t.Errorf("READ as 2000: %d, want ACCES", st)
	}
	if res := c.write(asUser(1000), fh, 0, []byte("x"), nfs3.FileSync); res.status != nfs3.OK {
		t.Errorf("WRITE as the owner: %d", res.status)
	}
	// Supplementary groups count.
	os.Chmod(secret, 0o660)
	if res := c.write(&sysCred{uid: 2000, gid: 2000, groups: []uint32{1000}}, fh, 0, []byte("y"), nfs3.FileSync); res.status != nfs3.OK {
		t.Errorf("WRITE as a member of the file's group: %d", res.status)
	}

	// New files belong to the caller.
	st, newFH := c.create(asUser(1000), rootFH, "mine", 0, 0o644)
	if st != nfs3.OK {
		t.Fatalf("CREATE as 1000: %d", st)
	}
	if uid, gid := ownerOf(t, filepath.Join(root, "mine")); uid != 1000 || gid != 1000 {
		t.Errorf("file created as 1000 is owned by %d:%d", uid, gid)
	}
	if st, a := c.getattr(asUser(1000), newFH); st != nfs3.OK || a.uid != 1000 {
		t.Errorf("GETATTR: %d uid %d", st, a.uid)
	}
	if st, _ := c.mkdir(asNone, rootFH, "anon", 0o755); st != nfs3.OK {
		t.Fatalf("MKDIR as AUTH_NONE: %d", st)
	}
	if uid, gid := ownerOf(t, filepath.Join(root, "anon")); uid != nobody || gid != nobody {
		t.Errorf("directory made with AUTH_NONE owned by %d:%d", uid, gid)
	}

	// Like knfsd, the owner may write a file whose mode forbids it (cp and
	// git create read-only files and then write them).
	st, roFH := c.create(asUser(1000), rootFH, "readonly", 0, 0o444)
	if st != nfs3.OK {
		t.Fatalf("CREATE 0444: %d", st)
	}
	if res := c.write(asUser(1000), roFH, 0, []byte("ok"), nfs3.Unstable); res.status != nfs3.OK {
		t.Errorf("owner WRITE to own 0444 file: %d", res.status)
	}
	if res := c.write(asUser(2000), roFH, 0, []byte("no"), nfs3.Unstable); res.status != nfs3.ErrAcces {
		t.Errorf("WRITE to another's 0444 file: %d, want ACCES", res.status)
	}
}
