package server

import (
	"bytes"
	"errors"
	"fmt"
	"math/rand"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/rdmafs/rdmafs/nfs3"
	"github.com/rdmafs/rdmafs/sunrpc"
	"github.com/rdmafs/rdmafs/sunrpc/xdr"
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

func TestReaddir(t *testing.T) {
	root := exportDir(t)
	want := map[string]bool{".": true, "..": true}
	for i := 0; i < 50; i++ {
		name := fmt.Sprintf("entry-with-a-longish-name-%02d", i)
		os.WriteFile(filepath.Join(root, name), nil, 0o644)
		want[name] = true
	}
	_, addr := startServer(t, Options{Root: root, Export: trusted})
	c := dialServer(t, addr)
	rootFH := c.root()
	got := map[string]bool{}
	cookie, verf := uint64(0), make([]byte, 8)
	for pages := 0; ; pages++ {
		a := fhArg(rootFH)
		a.Uint64(cookie)
		a.Buf = append(a.Buf, verf...)
		a.Uint32(1024)
		r := c.nfs(nfs3.ProcReaddir, asRoot, a)
		if st := getStatus(r); st != nfs3.OK {
			t.Fatalf("READDIR: %d", st)
		}
		readPostOpAttr(r)
		verf = r.Fixed(8)
		for r.Uint32() != 0 {
			r.Uint64()
			name := string(r.Opaque(maxName))
			cookie = r.Uint64()
			if got[name] {
				t.Fatalf("%s listed twice", name)
			}
			got[name] = true
		}
		if r.Uint32() != 0 {
			break
		}
		if pages > 100 || r.Err() != nil {
			t.Fatalf("READDIR does not end: %v", r.Err())
		}
	}
	if len(got) != len(want) {
		t.Fatalf("READDIR listed %d names, want %d", len(got), len(want))
	}
}

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

func TestParallelCallsOnOneConnection(t *testing.T) {
	const n = 4
	root := exportDir(t)
	srv, err := New(Options{Root: root, Export: trusted, Workers: n, Logf: t.Logf})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Close() })
	// Every GETATTR waits in its worker until n of them are in service at
	// once; served one at a time they never would be.
	var mu sync.Mutex
	arrived := 0
	all := make(chan struct{})
	srv.testHook = func(_ *worker, c *call) {
		if c.rpc.proc != nfs3.ProcGetattr {
			return
		}
		mu.Lock()
		arrived++
		if arrived == n {
			close(all)
		}
		mu.Unlock()
		select {
		case <-all:
		case <-time.After(10 * time.Second):
		}
	}
	c := dialServer(t, serveOn(t, srv))
	rootFH := c.root()
	start := time.Now()
	for i := 0; i < n; i++ {
		c.send(nfs3.Program, nfs3.Version, nfs3.ProcGetattr, asRoot, fhArg(rootFH).Buf)
	}
	for i := 0; i < n; i++ {
		rep, err := c.readReply()
		if err != nil || rep.stat != uint32(sunrpc.Success) || getStatus(decoder(rep.body)) != nfs3.OK {
			t.Fatalf("reply %d: %+v %v", i, rep, err)
		}
	}
	select {
	case <-all:
	default:
		t.Fatalf("the %d calls were not in service at the same time", n)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Fatalf("calls took %v: served one after another", d)
	}
}

// A call whose service panics (a bug) gets SYSTEM_ERR; the session and its
// worker go on serving.
func TestPanicInCall(t *testing.T) {
	srv, err := New(Options{Root: exportDir(t), Export: trusted, Workers: 1, Logf: t.Logf})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Close() })
	const doomed = 0x7777
	srv.testHook = func(_ *worker, c *call) {
		if c.rpc.xid == doomed {
			panic("test: a bug in a procedure")
		}
	}
	c := dialServer(t, serveOn(t, srv))
	rootFH := c.root()
	c.sendRecord(encodeCall(doomed, nfs3.Program, nfs3.Version, nfs3.ProcGetattr, asRoot, fhArg(rootFH).Buf))
	if rep, err := c.readReply(); err != nil || rep.xid != doomed || rep.stat != uint32(sunrpc.SystemErr) {
		t.Fatalf("reply to the panicking call: %+v %v", rep, err)
	}
	for i := 0; i < 3; i++ {
		if st, _ := c.getattr(asRoot, rootFH); st != nfs3.OK {
			t.Fatalf("GETATTR after the panic: %d", st)
		}
	}
}

func TestGarbageInput(t *testing.T) {
	_, addr := startServer(t, Options{Root: exportDir(t), Export: trusted})
	rng := rand.New(rand.NewSource(2))
	random := make([]byte, 4096)
	rng.Read(random)
	withMark := func(n uint32, body []byte) []byte {
		b := make([]byte, 4, 4+len(body))
		putMark(b, int(n))
		return append(b, body...)
	}
	call := encodeCall(1, nfs3.Program, nfs3.Version, nfs3.ProcNull, asRoot, nil)
	cases := map[string][]byte{
		"random bytes":       random,
		"huge record":        withMark(1<<31-1, []byte("abcd")),
		"truncated header":   withMark(12, call[:12]),
		"reply, not call":    withMark(8, []byte{0, 0, 0, 1, 0, 0, 0, 1}),
		"lying cred length":  withMark(36, append(append([]byte{}, call[:28]...), 0, 0, 1, 0, 0, 0, 0, 0)),
		"empty record":       withMark(0, nil),
		"too many fragments": bytes.Repeat([]byte{0, 0, 0, 0}, maxFragments+1),
	}
	for name, input := range cases {
		t.Run(name, func(t *testing.T) {
			c := dialServer(t, addr)
			c.conn.Write(input)
			c.conn.SetReadDeadline(time.Now().Add(10 * time.Second))
			// The server may answer with error replies, but must end with
			// closing the connection.
			for {
				if _, err := readRecord(c.r, nil); err != nil {
					var ne interface{ Timeout() bool }
					if errors.As(err, &ne) && ne.Timeout() {
						t.Fatalf("connection still open after garbage")
					}
					break
				}
			}
			// The server survives: a fresh connection works.
			c2 := dialServer(t, addr)
			if rep := c2.call(nfs3.Program, nfs3.Version, nfs3.ProcNull, asRoot, nil); rep.stat != uint32(sunrpc.Success) {
				t.Fatalf("NULL after garbage: %+v", rep)
			}
		})
	}

	// Arguments that do not decode get GARBAGE_ARGS on a connection that
	// stays usable.
	c := dialServer(t, addr)
	rootFH := c.root()
	truncated := fhArg(rootFH).Buf
	for _, tc := range []struct {
		proc uint32
		args []byte
	}{
		{nfs3.ProcGetattr, []byte{0, 0, 0, 8, 1, 2}},
		{nfs3.ProcLookup, truncated},
		{nfs3.ProcRead, truncated},
		{nfs3.ProcWrite, append(append([]byte{}, truncated...), 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 5, 0, 0, 0, 0, 0x7f, 0xff, 0xff, 0xff)},
		{nfs3.ProcCreate, append(dirop(rootFH, "x").Buf, 0, 0, 0, 9)},
		{nfs3.ProcMknod, append(dirop(rootFH, "x").Buf, 0, 0, 0, 99)},
	} {
		rep := c.call(nfs3.Program, nfs3.Version, tc.proc, asRoot, tc.args)
		if rep.replyStat != sunrpc.MsgAccepted || rep.stat != uint32(sunrpc.GarbageArgs) {
			t.Errorf("proc %d with bad arguments: %+v", tc.proc, rep)
		}
	}
	if st, _ := c.getattr(asRoot, rootFH); st != nfs3.OK {
		t.Fatalf("GETATTR after bad arguments: %d", st)
	}
}

func TestRPCRefusals(t *testing.T) {
	_, addr := startServer(t, Options{Root: exportDir(t), Export: trusted})
	c := dialServer(t, addr)

	msg := encodeCall(7, nfs3.Program, nfs3.Version, nfs3.ProcNull, asRoot, nil)
	msg[11] = 3 // rpcvers
	c.sendRecord(msg)
	rep, err := c.readReply()
	if err != nil || rep.xid != 7 || rep.replyStat != sunrpc.MsgDenied || rep.stat != sunrpc.RejectRPCMismatch || !bytes.Equal(rep.body, []byte{0, 0, 0, 2, 0, 0, 0, 2}) {
		t.Errorf("rpcvers 3: %+v %v", rep, err)
	}

	for _, tc := range []struct {
		name              string
		prog, vers, proc  uint32
		stat              uint32
		low, high         uint32
		checkVersionRange bool
	}{
		{"unknown program", 100004, 2, 0, uint32(sunrpc.ProgUnavail), 0, 0, false},
		{"NFS v4", nfs3.Program, 4, 0, uint32(sunrpc.ProgMismatch), 3, 3, true},
		{"NFS v2", nfs3.Program, 2, 0, uint32(sunrpc.ProgMismatch), 3, 3, true},
		{"MOUNT v1", nfs3.MountProgram, 1, 0, uint32(sunrpc.ProgMismatch), 3, 3, true},
		{"NFS proc 22", nfs3.Program, nfs3.Version, 22, uint32(sunrpc.ProcUnavail), 0, 0, false},
		{"MOUNT proc 6", nfs3.MountProgram, nfs3.MountVersion, 6, uint32(sunrpc.ProcUnavail), 0, 0, false},
	} {
		rep := c.call(tc.prog, tc.vers, tc.proc, asRoot, nil)
		if rep.replyStat != sunrpc.MsgAccepted || rep.stat != tc.stat {
			t.Errorf("%s: %+v", tc.name, rep)
		}
		if tc.checkVersionRange {
			r := decoder(rep.body)
			if lo, hi := r.Uint32(), r.Uint32(); lo != tc.low || hi != tc.high {
				t.Errorf("%s: versions %d..%d", tc.name, lo, hi)
			}
		}
	}

	// Unsupported flavors and malformed AUTH_SYS bodies: AUTH_BADCRED.
	authCall := func(flavor uint32, body []byte) []byte {
		w := &xdr.Encoder{}
		w.Uint32(9)
		w.Uint32(sunrpc.MsgCall)
		w.Uint32(sunrpc.RPCVersion)
		w.Uint32(nfs3.Program)
		w.Uint32(nfs3.Version)
		w.Uint32(nfs3.ProcNull)
		w.Uint32(flavor)
		w.Opaque(body)
		w.Uint32(uint32(sunrpc.AuthNone))
		w.Uint32(0)
		return w.Buf
	}
	goodSys := encodeCall(1, 0, 0, 0, &sysCred{uid: 1, gid: 1, groups: []uint32{2}}, nil)[28:]
	goodSys = goodSys[4 : len(goodSys)-8]
	tooMany := &xdr.Encoder{}
	tooMany.Uint32(0)
	tooMany.Opaque([]byte("h"))
	tooMany.Uint32(1)
	tooMany.Uint32(1)
	tooMany.Uint32(17)
	for i := 0; i < 17; i++ {
		tooMany.Uint32(5)
	}
	for name, m := range map[string][]byte{
		"AUTH_DH":            authCall(3, nil),
		"RPCSEC_GSS":         authCall(6, []byte{0, 0, 0, 1}),
		"AUTH_SYS truncated": authCall(uint32(sunrpc.AuthSys), goodSys[:len(goodSys)-4]),
		"AUTH_SYS trailing":  authCall(uint32(sunrpc.AuthSys), append(append([]byte{}, goodSys...), 0, 0, 0, 0)),
		"AUTH_SYS 17 groups": authCall(uint32(sunrpc.AuthSys), tooMany.Buf),
	} {
		c.sendRecord(m)
		rep, err := c.readReply()
		if err != nil || rep.replyStat != sunrpc.MsgDenied || rep.stat != sunrpc.RejectAuthError || !bytes.Equal(rep.body, []byte{0, 0, 0, sunrpc.AuthBadCred}) {
			t.Errorf("%s: %+v %v", name, rep, err)
		}
	}
	c.sendRecord(authCall(uint32(sunrpc.AuthSys), goodSys))
	if rep, err := c.readReply(); err != nil || rep.stat != uint32(sunrpc.Success) {
		t.Errorf("well-formed AUTH_SYS: %+v %v", rep, err)
	}
}

func TestReaddirplusLargeDirectory(t *testing.T) {
	root := exportDir(t)
	const n = 20000
	big := filepath.Join(root, "big")
	if err := os.Mkdir(big, 0o755); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < n; i++ {
		f, err := os.Create(filepath.Join(big, fmt.Sprintf("file-%05d", i)))
		if err != nil {
			t.Fatal(err)
		}
		f.Close()
	}
	_, addr := startServer(t, Options{Root: root, Export: trusted})
	c := dialServer(t, addr)
	_, dirFH := c.lookup(asRoot, c.root(), "big")

	seen := make(map[string]int)
	cookie, verf := uint64(0), make([]byte, 8)
	pages := 0
	for eof := false; !eof; pages++ {
		if pages > n {
			t.Fatal("READDIRPLUS does not end")
		}
		var st nfs3.Status
		var ents []dirEntry
		st, ents, verf, eof = c.readdirplus(asRoot, dirFH, cookie, verf, 8192, 32768)
		if st != nfs3.OK {
			t.Fatalf("READDIRPLUS page %d (cookie %d): %d", pages, cookie, st)
		}
		if len(ents) == 0 && !eof {
			t.Fatalf("empty page %d before eof", pages)
		}
		for _, e := range ents {
			seen[e.name]++
			if e.name != "." && e.name != ".." && (e.attr == nil || len(e.fh) == 0) {
				t.Fatalf("entry %q without attributes or handle", e.name)
			}
			cookie = e.cookie
		}
	}
	for i := 0; i < n; i++ {
		name := fmt.Sprintf("file-%05d", i)
		if seen[name] != 1 {
			t.Fatalf("%s listed %d times", name, seen[name])
		}
		delete(seen, name)
	}
	delete(seen, ".")
	delete(seen, "..")
	if len(seen) != 0 {
		t.Fatalf("unexpected entries: %v", seen)
	}
	t.Logf("%d entries in %d pages", n, pages)
}

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

func (c *testClient) mustLookup(dir []byte, name string) []byte {
	c.t.Helper()
	st, fh := c.lookup(asRoot, dir, name)
	if st != nfs3.OK {
		c.t.Fatalf("LOOKUP %s: %d", name, st)
	}
	return fh
}

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

func TestFsinfoFsstatPathconf(t *testing.T) {
	_, addr := startServer(t, Options{Root: exportDir(t), Export: trusted})
	c := dialServer(t, addr)
	rootFH := c.root()

	r := c.nfs(nfs3.ProcFsinfo, asRoot, fhArg(rootFH))
	if st := getStatus(r); st != nfs3.OK {
		t.Fatalf("FSINFO: %d", st)
	}
	if readPostOpAttr(r) == nil {
		t.Error("FSINFO without attributes")
	}
	rtmax := r.Uint32()
	r.Uint32()
	r.Uint32()
	wtmax := r.Uint32()
	if rtmax != maxIO || wtmax != maxIO {
		t.Errorf("FSINFO rtmax %d wtmax %d", rtmax, wtmax)
	}

	r = c.nfs(nfs3.ProcFsstat, asRoot, fhArg(rootFH))
	if st := getStatus(r); st != nfs3.OK {
		t.Fatalf("FSSTAT: %d", st)
	}
	readPostOpAttr(r)
	if tbytes, fbytes := r.Uint64(), r.Uint64(); tbytes == 0 || fbytes > tbytes || tbytes == 1<<62 {
		t.Errorf("FSSTAT sizes %d %d", tbytes, fbytes)
	}

	r = c.nfs(nfs3.ProcPathconf, asRoot, fhArg(rootFH))
	if st := getStatus(r); st != nfs3.OK {
		t.Fatalf("PATHCONF: %d", st)
	}
	readPostOpAttr(r)
	r.Uint32()
	if nameMax := r.Uint32(); nameMax != 255 {
		t.Errorf("PATHCONF name_max %d", nameMax)
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

func TestSessionAfterClose(t *testing.T) {
	srv, _ := startServer(t, Options{Root: exportDir(t), Export: trusted})
	var replies [][]byte
	ss := srv.NewSession(func(r []byte) error { replies = append(replies, r); return nil })
	if err := ss.Call(encodeCall(5, nfs3.Program, nfs3.Version, 0, asRoot, nil)); err != nil || len(replies) != 1 {
		t.Fatalf("NULL through a session: %v, %d replies", err, len(replies))
	}
	if err := ss.Call([]byte("junk")); err == nil {
		t.Fatal("junk accepted")
	}
	srv.Close()
	if err := ss.Call(encodeCall(6, nfs3.Program, nfs3.Version, 0, asRoot, nil)); !errors.Is(err, ErrClosed) {
		t.Fatalf("Call after Close: %v", err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	if err := srv.Serve(l); !errors.Is(err, ErrClosed) {
		t.Fatalf("Serve after Close: %v", err)
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
