package host

import (
	"os"
	"path/filepath"
	"syscall"
	"testing"
)

// TestPermissionsAllowOther mounts with allow_other and has two users work
// in it: each call carries the caller's uid, gid and groups, so each sees
// their own permissions, as with the kernel client.
func TestPermissionsAllowOther(t *testing.T) {
	needHost(t)
	s := startServer(t, "", 0, "no_root_squash")
	os.Chmod(s.dir, 0o755)
	mnt := s.mount(t, "allow_other")
	os.Chmod(filepath.Dir(mnt), 0o755) // so that others reach the mount
	const alice, bob, staff = 2001, 2002, 3000

	// Alice's home: only she may write in it.
	home := filepath.Join(mnt, "alice")
	if err := os.Mkdir(home, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(home, alice, alice); err != nil {
		t.Fatal(err)
	}
	if en := asUser(t, alice, alice, nil, "create", filepath.Join(home, "mine")); en != 0 {
		t.Fatalf("alice creates in her directory: %v", en)
	}
	var st syscall.Stat_t
	if err := syscall.Stat(filepath.Join(s.dir, "alice", "mine"), &st); err != nil || st.Uid != alice || st.Gid != alice {
		t.Errorf("alice's new file on the server: uid %d gid %d (%v), want %d", st.Uid, st.Gid, err, alice)
	}
	if en := asUser(t, bob, bob, nil, "create", filepath.Join(home, "intruder")); en != syscall.EACCES {
		t.Errorf("bob creates in alice's directory: %v, want EACCES", en)
	}
	if en := asUser(t, bob, bob, nil, "unlink", filepath.Join(home, "mine")); en != syscall.EACCES {
		t.Errorf("bob removes alice's file: %v, want EACCES", en)
	}

	// A private file: alice reads and writes it, bob may do neither.
	private := filepath.Join(home, "private")
	write(t, private, "secret")
	os.Chown(private, alice, alice)
	os.Chmod(private, 0o600)
	for _, c := range []struct {
		uid  uint32
		op   string
		want syscall.Errno
	}{
		{alice, "read", 0}, {alice, "write", 0}, {alice, "access-w", 0},
		{bob, "read", syscall.EACCES}, {bob, "write", syscall.EACCES},
		{bob, "access-r", syscall.EACCES}, {bob, "access-w", syscall.EACCES},
	} {
		if en := asUser(t, c.uid, c.uid, nil, c.op, private); en != c.want {
			t.Errorf("uid %d %s of a 0600 file of alice's: %v, want %v", c.uid, c.op, en, c.want)
		}
	}

	// A group file: bob reads it through a supplementary group only.
	shared := filepath.Join(home, "shared")
	write(t, shared, "for staff")
	os.Chown(shared, alice, staff)
	os.Chmod(shared, 0o640)
	if en := asUser(t, bob, bob, []uint32{staff}, "read", shared); en != 0 {
		t.Errorf("bob (in group staff) reads a 0640 staff file: %v", en)
	}
	if en := asUser(t, bob, bob, nil, "read", shared); en != syscall.EACCES {
		t.Errorf("bob (not in staff) reads a 0640 staff file: %v, want EACCES", en)
	}
	if en := asUser(t, bob, bob, []uint32{staff}, "write", shared); en != syscall.EACCES {
		t.Errorf("bob (in group staff) writes a 0640 staff file: %v, want EACCES", en)
	}
}

// TestFixedIdentity: with uid= and gid=, every call goes out as that
// identity whoever makes it.
func TestFixedIdentity(t *testing.T) {
	needHost(t)
	s := startServer(t, "", 0)
	os.Chmod(s.dir, 0o777)
	mnt := s.mount(t, "uid=4321,gid=8765")
	p := filepath.Join(mnt, "f")
	write(t, p, "x")
	var st syscall.Stat_t
	if err := syscall.Stat(filepath.Join(s.dir, "f"), &st); err != nil || st.Uid != 4321 || st.Gid != 8765 {
		t.Errorf("file made as root with uid=4321,gid=8765: owner %d:%d (%v)", st.Uid, st.Gid, err)
	}
}
