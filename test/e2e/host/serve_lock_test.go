package host

import (
	"context"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/rdmafs/rdmafs/nfs3"
	"github.com/rdmafs/rdmafs/nfs3/nlm"
	"github.com/rdmafs/rdmafs/sunrpc"
)

// TestServeLocks runs `rdmafs serve` with its lock manager and checks,
// over real NLM4 calls to the port rpcbind gives for NLM, what two
// clients see: each other's locks and, after serve restarts on its
// statedir, a grace period in which only reclaims are granted. When serve
// stops, its registrations go. (A blocked lock's GRANTED call to the
// client's lockd is nfs3/server/lockd's test: here the clients share
// serve's address, and so its rpcbind's one NLM.) serve and rpcbind
// run in a network and mount namespace of the test's own, so that the
// host's rpcbind and statd hear nothing.
func TestServeLocks(t *testing.T) {
	if !inLockNamespace(t) {
		return
	}

	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	state := filepath.Join(t.TempDir(), "lockd")
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "f"), []byte("locked"), 0o644); err != nil {
		t.Fatal(err)
	}
	srv := startServer(t, dir, 0, "statedir="+state, "grace_time=3")
	cfg := nfs3.DialConfig{Host: "127.0.0.1", ReservedPort: true, Timeout: 5 * time.Second}
	os.Chmod(dir, 0o755)
	fh := lookupHandle(t, ctx, srv.port, "f")

	for _, pv := range [][2]uint32{{nlm.Program, nlm.Version}, {nlm.NSMProgram, nlm.NSMVersion}} {
		if port := registered(t, ctx, pv[0], pv[1]); port != srv.port {
			t.Fatalf("rpcbind gives program %d at port %d, want serve's %d", pv[0], port, srv.port)
		}
	}
	a, b := dialNLM(t, ctx, "alpha"), dialNLM(t, ctx, "beta")
	a.want("alpha locks", a.lock(fh, 1, 0, 0, true, false, false), nlm.StatGranted)
	b.want("beta where alpha holds", b.lock(fh, 2, 10, 1, false, false, false), nlm.StatDenied)
	a.want("alpha unlocks byte 10", a.unlock(fh, 1, 10, 1), nlm.StatGranted)
	b.want("beta on byte 10", b.lock(fh, 2, 10, 1, false, false, false), nlm.StatGranted)
	a.want("alpha on beta's lock", a.lock(fh, 1, 10, 1, true, false, false), nlm.StatDenied)

	srv.stop()
	for _, pv := range [][2]uint32{{nlm.Program, nlm.Version}, {nlm.NSMProgram, nlm.NSMVersion}} {
		if port, err := nfs3.GetPort(ctx, cfg, pv[0], pv[1]); err == nil {
			t.Fatalf("program %d still registered at port %d after serve stopped", pv[0], port)
		}
	}
	start := time.Now()
	startServer(t, dir, srv.port, "statedir="+state, "grace_time=3")
	a, b = dialNLM(t, ctx, "alpha"), dialNLM(t, ctx, "beta")
	a.want("alpha in the grace period", a.lock(fh, 1, 0, 1, true, false, false), nlm.StatDeniedGracePeriod)
	b.want("beta's reclaim", b.lock(fh, 2, 10, 1, false, false, true), nlm.StatGranted)
	time.Sleep(time.Until(start.Add(3500 * time.Millisecond)))
	a.want("alpha after the grace period", a.lock(fh, 1, 0, 1, true, false, false), nlm.StatGranted)
	a.want("alpha on beta's reclaimed lock", a.lock(fh, 1, 10, 1, true, false, false), nlm.StatDenied)
}

// nlmClient calls serve's NLM as one client host.
type nlmClient struct {
	t    *testing.T
	ctx  context.Context
	name string
	rpc  *sunrpc.Client
	cred *sunrpc.Cred // of the calls (AUTH_SYS); nil: AUTH_NONE
}

// lookupHandle returns the handle of name in the export's root, served
// at port, looked up by root (squashed, so the root must be searchable).
func lookupHandle(t *testing.T, ctx context.Context, port int, name string) string {
	t.Helper()
	mc, c := nfsClients(t, port, true)
	root, _, err := mc.Mnt(ctx, rootCred, "/")
	if err != nil {
		t.Fatal(err)
	}
	var res nfs3.LookupResult
	if err := c.Lookup(ctx, rootCred, &root, name, &res); err != nil {
		t.Fatalf("LOOKUP %s: %v", name, err)
	}
	return string(res.FH.Bytes())
}

// registered waits until serve, which registers with rpcbind once it
// serves, has registered prog and vers over TCP, and returns the port.
func registered(t *testing.T, ctx context.Context, prog, vers uint32) int {
	t.Helper()
	for {
		port, err := nfs3.GetPort(ctx, nfs3.DialConfig{Host: "127.0.0.1", Timeout: 5 * time.Second}, prog, vers)
		if err == nil {
			return port
		}
		if ctx.Err() != nil {
			t.Fatal(err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// dialNLM finds NLM through rpcbind, as a client's lockd does.
func dialNLM(t *testing.T, ctx context.Context, name string) *nlmClient {
	t.Helper()
	port := registered(t, ctx, nlm.Program, nlm.Version)
	rpc := sunrpc.NewClient(sunrpc.NewTCP(sunrpc.TCPConfig{Addr: net.JoinHostPort("127.0.0.1", strconv.Itoa(port)), ReservedPort: true}),
		sunrpc.Config{Prog: nlm.Program, Vers: nlm.Version, Auth: sunrpc.Auth{Flavor: sunrpc.AuthSys, Machine: name},
			Timeout: 5 * time.Second, Retrans: 1, Soft: true, ProcNames: nlm.ProcNames})
	t.Cleanup(func() { rpc.Close() })
	return &nlmClient{t: t, ctx: ctx, name: name, rpc: rpc}
}

func (c *nlmClient) call(proc uint32, args, res nlm.Message) {
	c.t.Helper()
	call := c.rpc.NewCall(proc, c.cred)
	defer call.Release()
	e := call.Args()
	args.Encode(&e)
	call.SetArgs(e)
	if err := c.rpc.Do(c.ctx, call); err != nil {
		c.t.Fatalf("%s: %s: %v", c.name, nlm.ProcNames[proc], err)
	}
	if err := nlm.Unmarshal(call.Reply.Body, res); err != nil {
		c.t.Fatalf("%s: %s: %v", c.name, nlm.ProcNames[proc], err)
	}
}

func (c *nlmClient) lk(fh string, svid int32, off, length uint64) nlm.Lock {
	return nlm.Lock{CallerName: []byte(c.name), FH: []byte(fh), Owner: []byte(c.name), Svid: svid, Offset: off, Length: length}
}

func (c *nlmClient) lock(fh string, svid int32, off, length uint64, excl, block, reclaim bool) nlm.Stat {
	c.t.Helper()
	var res nlm.Res
	c.call(nlm.ProcLock, &nlm.LockArgs{Block: block, Exclusive: excl, Lock: c.lk(fh, svid, off, length), Reclaim: reclaim}, &res)
	return res.Stat
}

func (c *nlmClient) test(fh string, svid int32, off, length uint64, excl bool) nlm.Stat {
	c.t.Helper()
	var res nlm.TestRes
	c.call(nlm.ProcTest, &nlm.TestArgs{Exclusive: excl, Lock: c.lk(fh, svid, off, length)}, &res)
	return res.Stat
}

func (c *nlmClient) unlock(fh string, svid int32, off, length uint64) nlm.Stat {
	c.t.Helper()
	var res nlm.Res
	c.call(nlm.ProcUnlock, &nlm.UnlockArgs{Lock: c.lk(fh, svid, off, length)}, &res)
	return res.Stat
}

func (c *nlmClient) want(what string, got, want nlm.Stat) {
	c.t.Helper()
	if got != want {
		c.t.Fatalf("%s: %v, want %v", what, got, want)
	}
}

// TestServeLockNeedsTheFile: serve's lock manager takes a lock only on a
// file of the export that the caller may read or owns, as knfsd's does
// (nlm_fopen): a client of the export cannot lock, and so hold up every
// program that locks, a file it may not open, nor make the server keep
// locks on handles that name nothing. The calls come as a client's lockd
// sends them, with the credential of the process that opened the file.
// An UNLOCK, which only takes back the caller's own, is not checked.
func TestServeLockNeedsTheFile(t *testing.T) {
	if !inLockNamespace(t) {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	dir := t.TempDir()
	os.Chmod(dir, 0o755)
	for name, mode := range map[string]os.FileMode{"secret": 0o600, "public": 0o644, "theirs": 0o200, "gone": 0o644} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte("x"), mode); err != nil {
			t.Fatal(err)
		}
		os.Chmod(filepath.Join(dir, name), mode)
	}
	os.Chown(filepath.Join(dir, "theirs"), 1000, 1000)
	os.Mkdir(filepath.Join(dir, "sub"), 0o755)
	srv := startServer(t, dir, 0)
	fh := map[string]string{}
	for _, name := range []string{"secret", "public", "theirs", "gone", "sub"} {
		fh[name] = lookupHandle(t, ctx, srv.port, name)
	}
	// A handle of the export's filesystem that the export never gave out
	// would do as well; one with its bytes changed is no handle at all.
	bogus := []byte(fh["public"])
	bogus[len(bogus)-1] ^= 0xff

	user := dialNLM(t, ctx, "user")
	user.cred = &sunrpc.Cred{UID: 1000, GID: 1000}
	user.want("a lock on a file the caller may read", user.lock(fh["public"], 1, 0, 0, false, false, false), nlm.StatGranted)
	user.want("a lock on a file the caller owns but may not read", user.lock(fh["theirs"], 1, 0, 0, true, false, false), nlm.StatGranted)
	user.want("a lock on a file the caller may not read", user.lock(fh["secret"], 1, 0, 0, true, false, false), nlm.StatFailed)
	user.want("a TEST of a file the caller may not read", user.test(fh["secret"], 1, 0, 0, true), nlm.StatFailed)
	user.want("a lock on a directory", user.lock(fh["sub"], 1, 0, 0, false, false, false), nlm.StatFailed)
	user.want("a lock on a handle that names nothing", user.lock(string(bogus), 1, 0, 0, false, false, false), nlm.StatStaleFH)

	root := dialNLM(t, ctx, "root")
	root.cred = &sunrpc.Cred{}
	root.want("root, squashed, on a file only root may read", root.lock(fh["secret"], 2, 0, 0, true, false, false), nlm.StatFailed)

	// A lock on a file that its holder may no longer read, or that is
	// removed, can still be released, and so stops standing in the way.
	other := dialNLM(t, ctx, "other")
	other.cred = &sunrpc.Cred{UID: 1000, GID: 1000}
	os.Chmod(filepath.Join(dir, "public"), 0o600)
	user.want("an UNLOCK of a file its holder may no longer read", user.unlock(fh["public"], 1, 0, 0), nlm.StatGranted)
	os.Chmod(filepath.Join(dir, "public"), 0o644)
	other.want("an exclusive lock after that UNLOCK", other.lock(fh["public"], 2, 0, 0, true, false, false), nlm.StatGranted)
	user.want("a lock on the file to be removed", user.lock(fh["gone"], 1, 0, 0, true, false, false), nlm.StatGranted)
	os.Remove(filepath.Join(dir, "gone"))
	user.want("an UNLOCK of a file removed on the server", user.unlock(fh["gone"], 1, 0, 0), nlm.StatGranted)
	user.want("a lock on a file removed on the server", user.lock(fh["gone"], 1, 0, 0, true, false, false), nlm.StatStaleFH)
}
