package lockd

import (
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/rdmafs/rdmafs/nfs3"
	"github.com/rdmafs/rdmafs/nfs3/nlm"
	"github.com/rdmafs/rdmafs/sunrpc"
)

// TestNLMGracePeriod restarts the server on its state directory: the
// clients that held locks are told (SM_NOTIFY to their statd, with the
// server's new, odd, state number); during the grace period only reclaims
// are granted; after it reclaims are refused and what was not reclaimed is
// free. A server whose clients all freed their locks restarts without a
// grace period.
func TestNLMGracePeriod(t *testing.T) {
	if !inNamespace(t) {
		return
	}
	notified := startClientStatd(t)
	dir := filepath.Join(t.TempDir(), "state")
	const grace = 2 * time.Second
	first := startServer(t, Config{StateDir: dir, GraceTime: grace})
	if first.lockd.InGrace() {
		t.Fatal("a first start keeps a grace period")
	}
	state1 := first.lockd.NSMState()
	a, b := dial(t, first.port, "alpha"), dial(t, first.port, "beta")
	wantStat(t, "alpha's lock", a.lock("f", 1, 0, 0, lockOpts{excl: true}), nlm.StatGranted)
	wantStat(t, "beta's lock", b.lock("g", 1, 0, 0, lockOpts{excl: true}), nlm.StatGranted)
	first.stop()

	second := startServer(t, Config{StateDir: dir, GraceTime: grace})
	start := time.Now()
	if !second.lockd.InGrace() {
		t.Fatal("no grace period after a restart with clients that held locks")
	}
	if st := second.lockd.NSMState(); st != state1+2 || st%2 != 1 {
		t.Fatalf("NSM state %d after %d, want the next odd number", st, state1)
	}
	for range 2 { // alpha and beta, both at 127.0.0.1
		select {
		case ch := <-notified:
			if string(ch.MonName) != "rdmafs-test-server" || ch.State != state1+2 {
				t.Fatalf("SM_NOTIFY %q state %d, want rdmafs-test-server state %d", ch.MonName, ch.State, state1+2)
			}
		case <-time.After(10 * time.Second):
			t.Fatal("the clients' statd was not told of the restart")
		}
	}
	a, b = dial(t, second.port, "alpha"), dial(t, second.port, "beta")
	c := dial(t, second.port, "gamma")
	wantStat(t, "a new lock in the grace period", c.lock("h", 1, 0, 0, lockOpts{}), nlm.StatDeniedGracePeriod)
	wantStat(t, "TEST in the grace period", c.test("f", 1, 0, 0, true).Stat, nlm.StatDeniedGracePeriod)
	wantStat(t, "alpha's lock, not a reclaim", a.lock("f", 1, 0, 0, lockOpts{excl: true}), nlm.StatDeniedGracePeriod)
	wantStat(t, "alpha's reclaim", a.lock("f", 1, 0, 0, lockOpts{excl: true, reclaim: true}), nlm.StatGranted)
	wantStat(t, "alpha's UNLOCK in the grace period", a.unlock("f", 1, 0, 0), nlm.StatDeniedGracePeriod)
	time.Sleep(time.Until(start.Add(grace + 200*time.Millisecond)))
	if second.lockd.InGrace() {
		t.Fatal("still in the grace period after it")
	}
	wantStat(t, "a reclaim after the grace period", b.lock("g", 1, 0, 0, lockOpts{excl: true, reclaim: true}), nlm.StatDeniedNoLocks)
	wantStat(t, "gamma on alpha's reclaimed lock", c.lock("f", 1, 0, 0, lockOpts{}), nlm.StatDenied)
	wantStat(t, "gamma where beta did not reclaim", c.lock("g", 1, 0, 0, lockOpts{excl: true}), nlm.StatGranted)

	// Everyone frees everything: the next start has no grace period.
	for _, cl := range []*client{a, b, c} {
		cl.mustCall(nlm.ProcFreeAll, &nlm.Notify{Name: []byte(cl.name), State: 3}, nil)
	}
	second.stop()
	if b, err := os.ReadFile(filepath.Join(dir, "clients")); err != nil || len(b) != 0 {
		t.Fatalf("the state directory still records clients: %q, %v", b, err)
	}
	third := startServer(t, Config{StateDir: dir, GraceTime: grace})
	if third.lockd.InGrace() {
		t.Fatal("a grace period after a restart with no client holding locks")
	}
	wantStat(t, "a lock at once", dial(t, third.port, "alpha").lock("f", 1, 0, 0, lockOpts{}), nlm.StatGranted)
}

// startClientStatd serves NSM's SM_NOTIFY as a client host's statd does,
// registered with the namespace's rpcbind, and returns what it is told.
func startClientStatd(t *testing.T) <-chan nlm.SMStatChange {
	t.Helper()
	notified := make(chan nlm.SMStatChange, 16)
	rpc := sunrpc.NewServer(sunrpc.ServerConfig{})
	procs := make([]sunrpc.Proc, nlm.NSMProcNotify+1)
	for i := range procs {
		procs[i] = sunrpc.Proc{Front: procUnavail}
	}
	procs[0] = sunrpc.NullProc
	procs[nlm.NSMProcNotify] = sunrpc.Proc{Front: func(r *sunrpc.Request) []byte {
		var a nlm.SMStatChange
		if err := nlm.Unmarshal(r.Args, &a); err != nil {
			return sunrpc.AcceptedReply(r.Xid, sunrpc.GarbageArgs)
		}
		notified <- a
		return sunrpc.AcceptedReply(r.Xid, sunrpc.Success)
	}}
	rpc.Register(nlm.NSMProgram, nlm.NSMVersion, procs)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go rpc.Serve(l)
	t.Cleanup(func() { rpc.Close() })
	pmapSet(t, nlm.NSMProgram, nlm.NSMVersion, nfs3.IPProtoTCP, l.Addr().(*net.TCPAddr).Port)
	return notified
}

// TestNLMIdleHostsForgotten: a client that holds nothing and took nothing
// for HostExpiry is no longer recorded, so a restart after it keeps no
// grace period; one that holds a lock stays recorded.
func TestNLMIdleHostsForgotten(t *testing.T) {
	if !inNamespace(t) {
		return
	}
	dir := filepath.Join(t.TempDir(), "state")
	const expiry = 200 * time.Millisecond
	ts := startServer(t, Config{StateDir: dir, HostExpiry: expiry})
	a, b := dial(t, ts.port, "alpha"), dial(t, ts.port, "beta")
	wantStat(t, "alpha's lock", a.lock("f", 1, 0, 0, lockOpts{excl: true}), nlm.StatGranted)
	wantStat(t, "beta's lock", b.lock("g", 1, 0, 0, lockOpts{excl: true}), nlm.StatGranted)
	wantStat(t, "alpha's unlock", a.unlock("f", 1, 0, 0), nlm.StatGranted)
	time.Sleep(3 * expiry)
	if b, err := os.ReadFile(filepath.Join(dir, "clients")); err != nil || string(b) != "\"beta\" 127.0.0.1\n" {
		t.Fatalf("the state directory records %q (%v), want beta alone", b, err)
	}
	wantStat(t, "beta's unlock", b.unlock("g", 1, 0, 0), nlm.StatGranted)
	time.Sleep(3 * expiry)
	ts.stop()
	if again := startServer(t, Config{StateDir: dir, HostExpiry: expiry}); again.lockd.InGrace() {
		t.Fatal("a grace period after a restart when no client held locks")
	}
}
