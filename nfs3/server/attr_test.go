package server

import (
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/rdmafs/rdmafs/nfs3"
	"github.com/rdmafs/rdmafs/sunrpc/xdr"
)

func TestSetattr(t *testing.T) {
	root := exportDir(t)
	path := filepath.Join(root, "f")
	os.WriteFile(path, []byte("0123456789"), 0o755)
	os.Chown(path, 1000, 1000)
	old := time.Unix(1_000_000_000, 0)
	os.Chtimes(path, old, old)
	_, addr := startServer(t, Options{Root: root, Export: trusted})
	c := dialServer(t, addr)
	fh := c.mustLookup(c.root(), "f")

	setattr := func(cr *sysCred, fill func(*xdr.Encoder), guard *[2]uint32) nfs3.Status {
		a := fhArg(fh)
		fill(a)
		if guard != nil {
			a.Uint32(1)
			a.Uint32(guard[0])
			a.Uint32(guard[1])
		} else {
			a.Uint32(0)
		}
		return c.status(nfs3.ProcSetattr, cr, a)
	}
	sattr := func(mode, size int64, atimeHow, mtimeHow nfs3.SetTime, t [2]uint32) func(*xdr.Encoder) {
		return func(a *xdr.Encoder) {
			a.Bool(mode >= 0)
			if mode >= 0 {
				a.Uint32(uint32(mode))
			}
			a.Uint32(0)
			a.Uint32(0)
			a.Bool(size >= 0)
			if size >= 0 {
				a.Uint64(uint64(size))
			}
			a.Uint32(uint32(atimeHow))
			if atimeHow == nfs3.ClientTime {
				a.Uint32(t[0])
				a.Uint32(t[1])
			}
			a.Uint32(uint32(mtimeHow))
			if mtimeHow == nfs3.ClientTime {
				a.Uint32(t[0])
				a.Uint32(t[1])
			}
		}
	}
	// setuid survives, and a change that only touches it is made.
	if st := setattr(asUser(1000), sattr(0o4755, -1, 0, 0, [2]uint32{}), nil); st != nfs3.OK {
		t.Fatalf("SETATTR mode 04755: %d", st)
	}
	if fi, _ := os.Stat(path); fi.Mode()&os.ModeSetuid == 0 || fi.Mode().Perm() != 0o755 {
		t.Errorf("on-disk mode %v, want setuid 0755", fi.Mode())
	}
	if _, a := c.getattr(asRoot, fh); a.mode&0o7777 != 0o4755 {
		t.Errorf("GETATTR mode %o, want 4755", a.mode&0o7777)
	}
	// mtime alone leaves atime alone.
	mt := [2]uint32{1_500_000_000, 5}
	if st := setattr(asUser(1000), sattr(-1, -1, nfs3.DontChange, nfs3.ClientTime, mt), nil); st != nfs3.OK {
		t.Fatalf("SETATTR mtime: %d", st)
	}
	var st syscall.Stat_t
	syscall.Stat(path, &st)
	if st.Mtim.Sec != 1_500_000_000 || st.Mtim.Nsec != 5 || st.Atim.Sec != old.Unix() {
		t.Errorf("times: atime %v mtime %v", st.Atim, st.Mtim)
	}
	// Someone else may not set explicit times, nor change the mode.
	if got := setattr(asUser(2000), sattr(-1, -1, nfs3.ClientTime, nfs3.ClientTime, mt), nil); got != nfs3.ErrPerm {
		t.Errorf("SETATTR times as a stranger: %d, want PERM", got)
	}
	if got := setattr(asUser(2000), sattr(0o777, -1, 0, 0, mt), nil); got != nfs3.ErrPerm {
		t.Errorf("SETATTR mode as a stranger: %d, want PERM", got)
	}
	// Size.
	if got := setattr(asUser(1000), sattr(-1, 4, 0, 0, mt), nil); got != nfs3.OK {
		t.Errorf("SETATTR size: %d", got)
	}
	if b, _ := os.ReadFile(path); string(b) != "0123" {
		t.Errorf("after truncate: %q", b)
	}
	// Guard: the ctime the client saw.
	_, a := c.getattr(asRoot, fh)
	if got := setattr(asUser(1000), sattr(0o700, -1, 0, 0, mt), &[2]uint32{1, 2}); got != nfs3.ErrNotSync {
		t.Errorf("SETATTR with a stale guard: %d, want NOT_SYNC", got)
	}
	if got := setattr(asUser(1000), sattr(0o700, -1, 0, 0, mt), &a.ctime); got != nfs3.OK {
		t.Errorf("SETATTR with the current guard: %d", got)
	}
}
