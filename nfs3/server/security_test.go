package server

import (
	"bytes"
	"errors"
	"io"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/rdmafs/rdmafs/nfs3"
	"github.com/rdmafs/rdmafs/sunrpc"
)

// The tests of this file hold the server to knfsd's export defaults
// (exports(5): secure, root_squash) and options, and to its limits on what
// a client can make it hold.

func ptr(v uint32) *uint32 { return &v }

// TestExportDefaults: the zero Export is knfsd's default export. A client
// on an unreserved port gets nothing but NULL; root is nobody.
func TestExportDefaults(t *testing.T) {
	root := exportDir(t)
	secret := filepath.Join(root, "secret")
	os.WriteFile(secret, []byte("root only"), 0o600)
	group0 := filepath.Join(root, "group0")
	os.WriteFile(group0, []byte("group 0 only"), 0o060)
	_, addr := startServer(t, Options{Root: root})

	// secure: a call from an unreserved port is refused, as knfsd refuses
	// it (NFS3ERR_PERM) and mountd (MNT3ERR_ACCES).
	insecure := dialServer(t, addr)
	if st, _ := insecure.mount("/"); st != nfs3.MountErrAcces {
		t.Errorf("MNT from an unreserved port: %d, want ACCES", st)
	}
	rootFH := dialReserved(t, addr).root()
	if st, _ := insecure.getattr(asRoot, rootFH); st != nfs3.ErrPerm {
		t.Errorf("GETATTR from an unreserved port: %d, want PERM", st)
	}
	if st, _ := insecure.create(asRoot, rootFH, "planted", 0, 0o4755); st != nfs3.ErrPerm {
		t.Errorf("CREATE from an unreserved port: %d, want PERM", st)
	}
	if _, err := os.Lstat(filepath.Join(root, "planted")); err == nil {
		t.Fatal("a call from an unreserved port created a file")
	}
	if rep := insecure.call(nfs3.Program, nfs3.Version, nfs3.ProcNull, asRoot, nil); rep.stat != uint32(sunrpc.Success) {
		t.Errorf("NULL from an unreserved port: %+v", rep)
	}

	// root_squash: uid 0 and gid 0 (and group 0) are nobody.
	c := dialReserved(t, addr)
	secretFH := c.mustLookup(rootFH, "secret")
	if st, data, _ := c.read(asRoot, secretFH, 0, 100); st != nfs3.ErrAcces {
		t.Errorf("READ of a 0600 root file as uid 0: %d %q, want ACCES", st, data)
	}
	if st, _ := c.access(asRoot, secretFH, nfs3.AccessRead|nfs3.AccessModify); st != nfs3.OK {
		t.Errorf("ACCESS: %d", st)
	} else if _, got := c.access(asRoot, secretFH, nfs3.AccessRead|nfs3.AccessModify); got != 0 {
		t.Errorf("ACCESS of a 0600 root file as uid 0: %#x, want none", got)
	}
	g0 := c.mustLookup(rootFH, "group0")
	if st, _, _ := c.read(&sysCred{uid: 1000, gid: 1000, groups: []uint32{0}}, g0, 0, 100); st != nfs3.ErrAcces {
		t.Errorf("READ of a group-0 file by a member of group 0: %d, want ACCES", st)
	}
	st, fh := c.create(asRoot, rootFH, "made-by-root", 0, 0o4755)
	if st != nfs3.OK {
		t.Fatalf("CREATE as uid 0: %d", st)
	}
	if uid, gid := ownerOf(t, filepath.Join(root, "made-by-root")); uid != nobody || gid != nobody {
		t.Errorf("a file made as uid 0 belongs to %d:%d, want %d:%d", uid, gid, nobody, nobody)
	}
	if _, a := c.getattr(asRoot, fh); a.uid != nobody {
		t.Errorf("GETATTR: uid %d", a.uid)
	}
	if st, _ := c.mkdir(asNone, rootFH, "anon", 0o755); st != nfs3.OK {
		t.Fatalf("MKDIR with AUTH_NONE: %d", st)
	}
	if uid, gid := ownerOf(t, filepath.Join(root, "anon")); uid != nobody || gid != nobody {
		t.Errorf("a directory made with AUTH_NONE belongs to %d:%d", uid, gid)
	}
	// An id of -1 never means "unchanged".
	if st, _ := c.mkdir(&sysCred{uid: ^uint32(0), gid: ^uint32(0)}, rootFH, "minus1", 0o755); st != nfs3.OK {
		t.Fatalf("MKDIR as uid -1: %d", st)
	}
	if uid, _ := ownerOf(t, filepath.Join(root, "minus1")); uid != nobody {
		t.Errorf("a directory made as uid -1 belongs to %d", uid)
	}
	// Other users are themselves.
	if st, _ := c.create(asUser(1000), rootFH, "made-by-1000", 0, 0o644); st != nfs3.OK {
		t.Fatalf("CREATE as 1000: %d", st)
	}
	if uid, _ := ownerOf(t, filepath.Join(root, "made-by-1000")); uid != 1000 {
		t.Errorf("a file made as 1000 belongs to %d", uid)
	}
}

// TestExportOptions: insecure, no_root_squash, all_squash, anonuid and
// anongid do what knfsd's do.
func TestExportOptions(t *testing.T) {
	root := exportDir(t)
	owner := func(name string) [2]uint32 {
		uid, gid := ownerOf(t, filepath.Join(root, name))
		return [2]uint32{uid, gid}
	}
	for _, tc := range []struct {
		name      string
		export    Export
		who       *sysCred
		wantOwner [2]uint32
	}{
		{"no_root_squash", Export{Insecure: true, NoRootSquash: true}, asRoot, [2]uint32{0, 0}},
		{"root_squash,anonuid=1234,anongid=4321", Export{Insecure: true, AnonUID: ptr(1234), AnonGID: ptr(4321)}, asRoot, [2]uint32{1234, 4321}},
		{"all_squash", Export{Insecure: true, AllSquash: true}, asUser(1000), [2]uint32{nobody, nobody}},
		{"all_squash,anonuid=7", Export{Insecure: true, AllSquash: true, AnonUID: ptr(7), AnonGID: ptr(8)}, &sysCred{uid: 1000, gid: 1000, groups: []uint32{5}}, [2]uint32{7, 8}},
		{"all_squash,no_root_squash", Export{Insecure: true, AllSquash: true, NoRootSquash: true}, asRoot, [2]uint32{nobody, nobody}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, addr := startServer(t, Options{Root: root, Export: tc.export})
			c := dialServer(t, addr) // insecure: any port
			name := "by-" + tc.name
			if st, _ := c.create(tc.who, c.root(), name, 0, 0o644); st != nfs3.OK {
				t.Fatalf("CREATE: %d", st)
			}
			if got := owner(name); got != tc.wantOwner {
				t.Errorf("owner %v, want %v", got, tc.wantOwner)
			}
		})
	}
}

// TestExportClients: a client not in the list gets no service (AUTH_ERROR
// for NFS, MNT3ERR_ACCES for MNT); EXPORT names the clients.
func TestExportClients(t *testing.T) {
	root := exportDir(t)
	others, _ := ParseClients("10.0.0.0/8+192.168.1.7")
	_, addr := startServer(t, Options{Root: root, Export: Export{Clients: others}})
	c := dialReserved(t, addr)
	if st, _ := c.mount("/"); st != nfs3.MountErrAcces {
		t.Errorf("MNT from 127.0.0.1, not a client: %d, want ACCES", st)
	}
	srv2, addr2 := startServer(t, Options{Root: root})
	rootFH := dialReserved(t, addr2).root()
	rep := c.call(nfs3.Program, nfs3.Version, nfs3.ProcGetattr, asRoot, fhArg(rootFH).Buf)
	if rep.replyStat != sunrpc.MsgDenied || rep.stat != sunrpc.RejectAuthError || !bytes.Equal(rep.body, []byte{0, 0, 0, sunrpc.AuthTooWeak}) {
		t.Errorf("GETATTR from 127.0.0.1, not a client: %+v, want AUTH_ERROR AUTH_TOOWEAK", rep)
	}
	rep = c.call(nfs3.MountProgram, nfs3.MountVersion, nfs3.MountProcExport, asRoot, nil)
	r := decoder(rep.body)
	if r.Uint32() != 1 || string(r.Opaque(nfs3.MountPathLen)) != "/" || r.Uint32() != 1 || string(r.Opaque(255)) != "10.0.0.0/8" ||
		r.Uint32() != 1 || string(r.Opaque(255)) != "192.168.1.7" || r.Uint32() != 0 || r.Uint32() != 0 || r.Err() != nil {
		t.Errorf("EXPORT: %x", rep.body)
	}
	_ = srv2

	mine, _ := ParseClients("127.0.0.0/8")
	_, addr3 := startServer(t, Options{Root: root, Export: Export{Clients: mine}})
	if st, _ := dialReserved(t, addr3).getattr(asUser(1000), rootFH); st != nfs3.OK {
		t.Errorf("GETATTR from a listed client: %d", st)
	}
}

func TestAllows(t *testing.T) {
	a := netip.MustParseAddr
	var def Export
	for _, tc := range []struct {
		remote, local string
		want          bool
	}{
		{"127.0.0.1", "127.0.0.1", true},
		{"127.0.0.2", "127.0.0.1", true}, // loopback is this host
		{"10.1.2.3", "10.1.2.3", true},   // a host's own address
		{"10.1.2.4", "10.1.2.3", false},  // another host
		{"::ffff:127.0.0.1", "127.0.0.1", true},
		{"192.0.2.1", "0.0.0.0", false}, // not an address of this host
	} {
		if got := def.allows(a(tc.remote), a(tc.local)); got != tc.want {
			t.Errorf("default export, %s to %s: %v, want %v", tc.remote, tc.local, got, tc.want)
		}
	}
	cl, err := ParseClients("10.0.0.0/8+2001:db8::1+192.168.0.5")
	if err != nil {
		t.Fatal(err)
	}
	e := Export{Clients: cl}
	for remote, want := range map[string]bool{"10.9.9.9": true, "11.0.0.1": false, "2001:db8::1": true, "2001:db8::2": false, "192.168.0.5": true, "127.0.0.1": false} {
		if got := e.allows(a(remote), a("10.0.0.1")); got != want {
			t.Errorf("clients=10.0.0.0/8+2001:db8::1+192.168.0.5, %s: %v, want %v", remote, got, want)
		}
	}
	if star, _ := ParseClients("*"); !slices.Equal((&Export{Clients: star}).clientNames(a("127.0.0.1")), []string{"*"}) {
		t.Errorf("clients=* lists as %q", (&Export{Clients: star}).clientNames(a("127.0.0.1")))
	}
	for _, bad := range []string{"", "10.0.0.0/33", "host.example", "1.2.3.4+", "*x"} {
		if _, err := ParseClients(bad); err == nil {
			t.Errorf("ParseClients(%q) accepted", bad)
		}
	}
}

// closedWithin reports whether the server closes c within d (reading and
// discarding whatever it sends).
func closedWithin(c *testClient, d time.Duration) bool {
	c.conn.SetReadDeadline(time.Now().Add(d))
	_, err := io.Copy(io.Discard, c.r)
	var ne net.Error
	return !(errors.As(err, &ne) && ne.Timeout())
}

// TestRecordLimits: a fragment longer than the largest valid call ends the
// connection at its header, before anything of it is read; the largest
// valid WRITE goes through.
func TestRecordLimits(t *testing.T) {
	root := exportDir(t)
	_, addr := startServer(t, Options{Root: root, Export: trusted})
	for _, claim := range []int{maxRecord + 1, 4 << 20, 1<<31 - 1} {
		c := dialServer(t, addr)
		var hdr [4]byte
		sunrpc.PutRecordMark(hdr[:], claim)
		c.conn.Write(hdr[:])
		if !closedWithin(c, 5*time.Second) {
			t.Errorf("a %d-byte fragment header left the connection open", claim)
		}
	}
	c := dialServer(t, addr)
	_, fh := c.create(asRoot, c.root(), "big", 0, 0o644)
	data := bytes.Repeat([]byte{0xa5}, maxIO)
	if w := c.write(asRoot, fh, 0, data, nfs3.Unstable); w.status != nfs3.OK || w.count != maxIO {
		t.Fatalf("WRITE of %d bytes: %+v", maxIO, w)
	}
	if got, _ := os.ReadFile(filepath.Join(root, "big")); !bytes.Equal(got, data) {
		t.Fatalf("the server has %d bytes", len(got))
	}
}

// TestConnectionLimit: at MaxConns, a new connection makes the least
// recently active one go.
func TestConnectionLimit(t *testing.T) {
	_, addr := startServer(t, Options{Root: exportDir(t), Export: trusted, MaxConns: 2})
	null := func(c *testClient) bool {
		c.conn.SetDeadline(time.Now().Add(5 * time.Second))
		c.sendRecord(encodeCall(1, nfs3.Program, nfs3.Version, nfs3.ProcNull, asRoot, nil))
		_, err := c.readReply()
		return err == nil
	}
	c1 := dialServer(t, addr)
	c2 := dialServer(t, addr)
	if !null(c1) || !null(c2) {
		t.Fatal("NULL on the first two connections")
	}
	time.Sleep(10 * time.Millisecond)
	null(c2) // c1 is now the least recently active
	c3 := dialServer(t, addr)
	if !null(c3) {
		t.Fatal("NULL on the third connection")
	}
	if !closedWithin(c1, 5*time.Second) {
		t.Error("the least recently active connection is still open")
	}
	if !null(c2) {
		t.Error("the more recently active connection was closed")
	}
}

// TestIdleTimeout: a connection that sends nothing is closed after the idle
// timeout; one with a call in service is not.
func TestIdleTimeout(t *testing.T) {
	srv, err := New(Options{Root: exportDir(t), Export: trusted, IdleTimeout: 300 * time.Millisecond, Logf: t.Logf})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Close() })
	srv.testHook = func(_ *worker, c *call) {
		if c.xid == 0x5105 {
			time.Sleep(time.Second)
		}
	}
	addr := serveOn(t, srv)
	idle := dialServer(t, addr)
	if !closedWithin(idle, 5*time.Second) {
		t.Fatal("an idle connection is still open after 5 s")
	}
	busy := dialServer(t, addr)
	rootFH := busy.root()
	start := time.Now()
	busy.sendRecord(encodeCall(0x5105, nfs3.Program, nfs3.Version, nfs3.ProcGetattr, asRoot, fhArg(rootFH).Buf))
	busy.conn.SetReadDeadline(time.Now().Add(5 * time.Second))
	if rep, err := busy.readReply(); err != nil || rep.xid != 0x5105 {
		t.Fatalf("a slow call's reply after %v: %+v %v", time.Since(start), rep, err)
	}
}
