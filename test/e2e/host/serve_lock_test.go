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
	m, err := nfs3.DialMount(ctx, nfs3.DialConfig{Host: "127.0.0.1", Port: srv.port, ReservedPort: true, Timeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	root, _, err := m.Mnt(ctx, &sunrpc.Cred{}, "/")
	m.Close()
	if err != nil {
		t.Fatal(err)
	}
	fh := string(root.Bytes())

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
		sunrpc.Config{Prog: nlm.Program, Vers: nlm.Version, Timeout: 5 * time.Second, Retrans: 1, Soft: true, ProcNames: nlm.ProcNames})
	t.Cleanup(func() { rpc.Close() })
	return &nlmClient{t: t, ctx: ctx, name: name, rpc: rpc}
}

func (c *nlmClient) call(proc uint32, args, res nlm.Message) {
	c.t.Helper()
	call := c.rpc.NewCall(proc, nil)
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
