package lockd

import (
	"context"
	"net"
	"slices"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/rdmafs/rdmafs/nfs3"
	"github.com/rdmafs/rdmafs/nfs3/nlm"
	"github.com/rdmafs/rdmafs/sunrpc"
)

// peer is an NLM version 4 server for the client's tests: one whole-file
// write lock per file handle, held by a svid, with Linux lockd's answers
// (BLOCKED and a GRANTED_MSG callback for a queued request, DENIED
// otherwise, NLM4_DENIED_GRACE_PERIOD to all but reclaims in its grace
// period). As knfsd since Linux 6.13, it refuses (NLM4_FAILED) a call
// about a file that does not carry an AUTH_SYS credential: knfsd opens the
// file with it. It records what it was asked, and with which credential.
type peer struct {
	t    *testing.T
	srv  *sunrpc.Server
	port int

	mu       sync.Mutex
	holder   map[string]int32 // by file handle
	queued   []nlm.Lock       // blocked LOCKs, in order
	grace    bool
	cbPort   int // the client's callback service; 0: none
	calls    []string
	creds    map[string][]sunrpc.Cred // by procedure name as recorded
	reclaims []nlm.Lock
	grantRes []nlm.Stat
}

func startPeer(t *testing.T) *peer {
	p := &peer{t: t, holder: make(map[string]int32), creds: make(map[string][]sunrpc.Cred)}
	p.srv = sunrpc.NewServer(sunrpc.ServerConfig{})
	procs := make([]sunrpc.Proc, nlm.ProcGrantedRes+1)
	procs[nlm.ProcNull] = sunrpc.NullProc
	procs[nlm.ProcTest] = sunrpc.Proc{Serve: p.test}
	procs[nlm.ProcLock] = sunrpc.Proc{Serve: p.lock}
	procs[nlm.ProcCancel] = sunrpc.Proc{Serve: p.cancel}
	procs[nlm.ProcUnlock] = sunrpc.Proc{Serve: p.unlock}
	procs[nlm.ProcGrantedRes] = sunrpc.Proc{Serve: p.grantedRes}
	p.srv.Register(nlm.Program, nlm.Version, procs)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p.port = ln.Addr().(*net.TCPAddr).Port
	go p.srv.Serve(ln)
	t.Cleanup(func() { p.srv.Close() })
	return p
}

// record notes call r of procedure name, and reports whether it carries an
// AUTH_SYS credential.
func (p *peer) record(name string, r *sunrpc.Request) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.calls = append(p.calls, name)
	if r.Flavor != sunrpc.AuthSys {
		return false
	}
	p.creds[name] = append(p.creds[name], r.Cred)
	return true
}

func (p *peer) count(name string) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	n := 0
	for _, c := range p.calls {
		if c == name {
			n++
		}
	}
	return n
}

func reply(xid uint32, m nlm.Message) []byte {
	e := sunrpc.SuccessHeader(xid)
	m.Encode(e)
	return e.Buf
}

func (p *peer) test(r *sunrpc.Request) []byte {
	var a nlm.TestArgs
	if err := nlm.Unmarshal(r.Args, &a); err != nil {
		return sunrpc.AcceptedReply(r.Xid, sunrpc.GarbageArgs)
	}
	authSys := p.record("TEST", r)
	p.mu.Lock()
	defer p.mu.Unlock()
	res := nlm.TestRes{Cookie: a.Cookie}
	if !authSys {
		res.Stat = nlm.StatFailed
	} else if p.grace {
		res.Stat = nlm.StatDeniedGracePeriod
	} else if h, ok := p.holder[string(a.Lock.FH)]; ok && h != a.Lock.Svid {
		res.Stat = nlm.StatDenied
		res.Holder = nlm.Holder{Exclusive: true, Svid: h, Length: 0}
	}
	return reply(r.Xid, &res)
}

func (p *peer) lock(r *sunrpc.Request) []byte {
	var a nlm.LockArgs
	if err := nlm.Unmarshal(r.Args, &a); err != nil {
		return sunrpc.AcceptedReply(r.Xid, sunrpc.GarbageArgs)
	}
	name := "LOCK"
	if a.Block {
		name = "LOCK(block)"
	}
	if a.Reclaim {
		name = "LOCK(reclaim)"
	}
	authSys := p.record(name, r)
	p.mu.Lock()
	defer p.mu.Unlock()
	res := nlm.Res{Cookie: a.Cookie}
	fh := string(a.Lock.FH)
	switch h, held := p.holder[fh]; {
	case !authSys:
		res.Stat = nlm.StatFailed
	case p.grace && !a.Reclaim:
		res.Stat = nlm.StatDeniedGracePeriod
	case a.Reclaim:
		p.reclaims = append(p.reclaims, a.Lock)
		p.holder[fh] = a.Lock.Svid
	case !held || h == a.Lock.Svid:
		p.holder[fh] = a.Lock.Svid
	case a.Block:
		res.Stat = nlm.StatBlocked
		p.queued = append(p.queued, a.Lock)
	default:
		res.Stat = nlm.StatDenied
	}
	return reply(r.Xid, &res)
}

func (p *peer) cancel(r *sunrpc.Request) []byte {
	var a nlm.CancelArgs
	if err := nlm.Unmarshal(r.Args, &a); err != nil {
		return sunrpc.AcceptedReply(r.Xid, sunrpc.GarbageArgs)
	}
	authSys := p.record("CANCEL", r)
	p.mu.Lock()
	defer p.mu.Unlock()
	res := nlm.Res{Cookie: a.Cookie, Stat: nlm.StatDenied}
	if !authSys {
		return reply(r.Xid, &nlm.Res{Cookie: a.Cookie, Stat: nlm.StatFailed})
	}
	for i, q := range p.queued {
		if q.Svid == a.Lock.Svid && string(q.FH) == string(a.Lock.FH) {
			p.queued = append(p.queued[:i], p.queued[i+1:]...)
			res.Stat = nlm.StatGranted
			break
		}
	}
	return reply(r.Xid, &res)
}

// unlock releases the file and grants it to the first queued LOCK, with
// GRANTED_MSG to the client's callback service.
func (p *peer) unlock(r *sunrpc.Request) []byte {
	var a nlm.UnlockArgs
	if err := nlm.Unmarshal(r.Args, &a); err != nil {
		return sunrpc.AcceptedReply(r.Xid, sunrpc.GarbageArgs)
	}
	authSys := p.record("UNLOCK", r)
	p.mu.Lock()
	defer p.mu.Unlock()
	if !authSys {
		return reply(r.Xid, &nlm.Res{Cookie: a.Cookie, Stat: nlm.StatFailed})
	}
	fh := string(a.Lock.FH)
	if p.holder[fh] == a.Lock.Svid {
		delete(p.holder, fh)
	}
	if _, held := p.holder[fh]; !held && len(p.queued) > 0 && p.cbPort != 0 {
		next := p.queued[0]
		p.queued = p.queued[1:]
		p.holder[fh] = next.Svid
		go p.grant(next)
	}
	return reply(r.Xid, &nlm.Res{Cookie: a.Cookie})
}

func (p *peer) grant(l nlm.Lock) {
	t := sunrpc.NewTCP(sunrpc.TCPConfig{Addr: net.JoinHostPort("127.0.0.1", itoa(int32(p.cbPort))), MaxRecord: 4096})
	c := sunrpc.NewClient(t, sunrpc.Config{Prog: nlm.Program, Vers: nlm.Version, Timeout: 5 * time.Second, Retrans: 1, Soft: true, ProcNames: nlm.ProcNames})
	defer c.Close()
	call := c.NewCall(nlm.ProcGrantedMsg, nil)
	defer call.Release()
	e := call.Args()
	args := nlm.TestArgs{Cookie: []byte("grant"), Exclusive: true, Lock: l}
	args.Encode(&e)
	call.SetArgs(e)
	if err := c.Do(context.Background(), call); err != nil {
		p.t.Errorf("GRANTED_MSG: %v", err)
	}
}

func (p *peer) grantedRes(r *sunrpc.Request) []byte {
	var a nlm.Res
	if err := nlm.Unmarshal(r.Args, &a); err != nil {
		return sunrpc.AcceptedReply(r.Xid, sunrpc.GarbageArgs)
	}
	p.mu.Lock()
	p.grantRes = append(p.grantRes, a.Stat)
	p.mu.Unlock()
	return sunrpc.SuccessHeader(r.Xid).Buf
}

// dial returns a client of p; with callbacks, its callback service runs
// (not registered with any portmapper: p knows its port).
func (p *peer) dial(t *testing.T, callbacks bool) *Client {
	c, err := Dial(context.Background(), Config{
		Dial: nfs3.DialConfig{Host: "127.0.0.1", Auth: testAuth, Timeout: 5 * time.Second}, Port: p.port,
		CallerName: "testhost", Logf: t.Logf,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	if callbacks {
		cb, err := c.startCallbacks()
		if err != nil {
			t.Fatal(err)
		}
		c.mu.Lock()
		c.callbacks = true
		c.mu.Unlock()
		p.mu.Lock()
		p.cbPort = cb.port
		p.mu.Unlock()
	}
	return c
}

var whole = Range{0, MaxOffset}
var fh = []byte("file-handle")

// testAuth is how the tests' clients authenticate, as rdmafs's do.
var testAuth = sunrpc.Auth{Flavor: sunrpc.AuthSys, Machine: "testhost"}

// alice is the credential of the open file the tests lock through.
var alice = &sunrpc.Cred{UID: 1000, GID: 1000, Groups: []uint32{1000, 27}}

// waitLock runs a waiting Lock of owner in the background.
func waitLock(ctx context.Context, c *Client, owner uint64, interrupted Interrupted) chan error {
	done := make(chan error, 1)
	go func() { done <- c.Lock(ctx, alice, fh, owner, Holder{}, whole, true, true, interrupted) }()
	return done
}

// holdThenRelease has owner 1 take the lock, owner 2 wait for it, and
// owner 1 release it after a while; it returns how long owner 2 then took.
func holdThenRelease(t *testing.T, c *Client) time.Duration {
	if err := c.Lock(context.Background(), alice, fh, 1, Holder{}, whole, true, false, nil); err != nil {
		t.Fatalf("owner 1 LOCK: %v", err)
	}
	if err := c.Lock(context.Background(), alice, fh, 2, Holder{}, whole, true, false, nil); Errno(err) != syscall.EAGAIN {
		t.Fatalf("owner 2 LOCK without waiting while owner 1 holds it: %v (errno %v), want EAGAIN", err, Errno(err))
	}
	done := waitLock(context.Background(), c, 2, nil)
	select {
	case err := <-done:
		t.Fatalf("owner 2 got the lock (%v) while owner 1 held it", err)
	case <-time.After(1500 * time.Millisecond):
	}
	released := time.Now()
	if err := c.Unlock(context.Background(), alice, fh, 1, whole); err != nil {
		t.Fatalf("owner 1 UNLOCK: %v", err)
	}
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("owner 2's waiting LOCK: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("owner 2 still waiting 10 s after the release")
	}
	if !c.Held(fh, 2) || c.Held(fh, 1) {
		t.Errorf("after the handover: owner 1 holds %v, owner 2 %v; want only owner 2", c.Held(fh, 1), c.Held(fh, 2))
	}
	return time.Since(released)
}

// TestLockGrantedCallback: with a callback service the server can reach,
// a waiting lock is queued on the server and granted by its GRANTED_MSG at
// once after the release, not at the next poll (30 s), and the client
// answers GRANTED_RES with NLM4_GRANTED.
func TestLockGrantedCallback(t *testing.T) {
	p := startPeer(t)
	c := p.dial(t, true)
	if d := holdThenRelease(t, c); d > time.Second {
		t.Errorf("granted %v after the release, want well within a second", d)
	}
	if p.count("LOCK(block)") != 1 {
		t.Errorf("%d queued LOCKs, want 1 (calls: %v)", p.count("LOCK(block)"), p.calls)
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		p.mu.Lock()
		res := append([]nlm.Stat(nil), p.grantRes...)
		p.mu.Unlock()
		if len(res) == 1 && res[0] == nlm.StatGranted {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("GRANTED_RES: %v, want one NLM4_GRANTED", res)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestLockPollsWithoutCallback: when the server cannot call back, a
// waiting lock is never queued on the server (whose GRANTED would go
// astray) and still gets the lock within about a second of its release.
func TestLockPollsWithoutCallback(t *testing.T) {
	p := startPeer(t)
	c := p.dial(t, false)
	if d := holdThenRelease(t, c); d > 1500*time.Millisecond {
		t.Errorf("granted %v after the release, want about a second at most", d)
	}
	if n := p.count("LOCK(block)"); n != 0 {
		t.Errorf("%d LOCKs asked to be queued without a callback service, want 0", n)
	}
}

// TestLockInterruptCancels: a waiting lock whose caller gets a signal ends
// with EINTR and withdraws its queued request (CANCEL), so the lock is not
// granted to it later; a signal the caller does not take (interrupted
// false: the Go runtime's SIGURG) does not end the wait.
func TestLockInterruptCancels(t *testing.T) {
	p := startPeer(t)
	c := p.dial(t, true)
	if err := c.Lock(context.Background(), alice, fh, 1, Holder{}, whole, true, false, nil); err != nil {
		t.Fatal(err)
	}
	ctx, interrupt := context.WithCancel(context.Background())
	var mu sync.Mutex
	signalled := false
	done := waitLock(ctx, c, 2, func() bool { mu.Lock(); defer mu.Unlock(); return signalled })
	time.Sleep(200 * time.Millisecond)
	interrupt() // the FUSE interrupt, for a signal the caller ignores
	select {
	case err := <-done:
		t.Fatalf("the wait ended (%v) on an interrupt with no signal to take", err)
	case <-time.After(500 * time.Millisecond):
	}
	mu.Lock()
	signalled = true
	mu.Unlock()
	select {
	case err := <-done:
		if Errno(err) != syscall.EINTR {
			t.Fatalf("interrupted wait: %v (errno %v), want EINTR", err, Errno(err))
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the wait did not end 5 s after its caller got a signal")
	}
	if p.count("CANCEL") != 1 {
		t.Errorf("%d CANCELs, want 1 (calls %v)", p.count("CANCEL"), p.calls)
	}
	if err := c.Unlock(context.Background(), alice, fh, 1, whole); err != nil {
		t.Fatal(err)
	}
	p.mu.Lock()
	h, held := p.holder[string(fh)]
	p.mu.Unlock()
	if held {
		t.Errorf("after the release, svid %d holds the file: the cancelled request was granted", h)
	}
	if c.Held(fh, 2) {
		t.Error("the client counts the cancelled lock as held")
	}
}

// TestLockReclaimInGrace: after the server restarts (it forgot its locks
// and answers NLM4_DENIED_GRACE_PERIOD), the client reclaims the locks it
// holds, with their ranges, and the call then goes through.
func TestLockReclaimInGrace(t *testing.T) {
	p := startPeer(t)
	c := p.dial(t, false)
	r := Range{100, 199}
	if err := c.Lock(context.Background(), alice, fh, 1, Holder{}, r, true, false, nil); err != nil {
		t.Fatal(err)
	}
	p.mu.Lock()
	p.holder = make(map[string]int32) // restarted: it forgot
	p.grace = true
	p.mu.Unlock()
	go func() {
		time.Sleep(time.Second)
		p.mu.Lock()
		p.grace = false
		p.mu.Unlock()
	}()
	if _, err := c.Test(context.Background(), alice, fh, 2, whole, true); err != nil {
		t.Fatalf("TEST across the grace period: %v", err)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(p.reclaims) != 1 || p.reclaims[0].Offset != 100 || p.reclaims[0].Length != 100 {
		t.Fatalf("reclaims %+v, want owner 1's lock at 100, 100 bytes", p.reclaims)
	}
	if p.holder[string(fh)] != p.reclaims[0].Svid {
		t.Errorf("after the reclaim the server has holder %d, want the reclaimer %d", p.holder[string(fh)], p.reclaims[0].Svid)
	}
	if got := p.creds["LOCK(reclaim)"]; len(got) != 1 || !sameCred(got[0], alice) {
		t.Errorf("the reclaim carried credentials %+v, want those the lock was taken with, %+v", got, *alice)
	}
}

func sameCred(a sunrpc.Cred, b *sunrpc.Cred) bool {
	return a.UID == b.UID && a.GID == b.GID && slices.Equal(a.Groups, b.Groups)
}

// TestLockCallsCarryTheFilesCredential: each call about a file carries the
// credential of the file it is made through, as the kernel's client sends
// (nfs_file_cred), and so succeeds on a server that opens the file with it
// and refuses AUTH_NONE (knfsd since Linux 6.13).
func TestLockCallsCarryTheFilesCredential(t *testing.T) {
	p := startPeer(t)
	c := p.dial(t, false)
	bob := &sunrpc.Cred{UID: 1001, GID: 1001}
	ctx := context.Background()
	if err := c.Lock(ctx, alice, fh, 1, Holder{}, whole, true, false, nil); err != nil {
		t.Fatalf("LOCK: %v (errno %v)", err, Errno(err))
	}
	if _, err := c.Test(ctx, bob, fh, 2, whole, true); err != nil {
		t.Fatalf("TEST: %v (errno %v)", err, Errno(err))
	}
	if err := c.Unlock(ctx, alice, fh, 1, whole); err != nil {
		t.Fatalf("UNLOCK: %v (errno %v)", err, Errno(err))
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, want := range []struct {
		proc string
		cred *sunrpc.Cred
	}{{"LOCK", alice}, {"TEST", bob}, {"UNLOCK", alice}} {
		if got := p.creds[want.proc]; len(got) != 1 || !sameCred(got[0], want.cred) {
			t.Errorf("%s carried credentials %+v, want %+v", want.proc, got, *want.cred)
		}
	}
}

// TestRecoverStaleAfterCrash: the locks and the queued request of an
// rdmafs that died (its journal's flock is free) are dropped on the server
// by the next client of that server from this host, and only those: a
// live client's journal is left alone.
func TestRecoverStaleAfterCrash(t *testing.T) {
	p := startPeer(t)
	dir := t.TempDir()
	dial := func() *Client {
		c, err := Dial(context.Background(), Config{
			Dial: nfs3.DialConfig{Host: "127.0.0.1", Auth: testAuth, Timeout: 5 * time.Second}, Port: p.port,
			CallerName: "testhost", StateDir: dir, Logf: t.Logf,
		})
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	live := dial()
	defer live.Close()
	liveFH := []byte("live-file")
	if err := live.Lock(context.Background(), alice, liveFH, 7, Holder{}, whole, true, false, nil); err != nil {
		t.Fatal(err)
	}

	dead := dial()
	defer dead.Close()
	dead.mu.Lock()
	dead.callbacks = true // its waiting locks are queued on the server
	dead.mu.Unlock()
	if err := dead.Lock(context.Background(), alice, fh, 1, Holder{}, Range{0, 9}, true, false, nil); err != nil {
		t.Fatal(err)
	}
	other := []byte("other-file")
	if err := live.Lock(context.Background(), alice, other, 8, Holder{}, whole, true, false, nil); err != nil {
		t.Fatal(err)
	}
	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	waitDone := make(chan error, 1)
	go func() {
		waitDone <- dead.Lock(ctx, alice, other, 2, Holder{}, whole, true, true, func() bool { return false })
	}()
	deadline := time.Now().Add(5 * time.Second)
	for p.count("LOCK(block)") == 0 {
		if time.Now().After(deadline) {
			t.Fatal("the dead client's waiting LOCK never reached the server")
		}
		time.Sleep(10 * time.Millisecond)
	}
	// The process dies: its journal's flock goes with its descriptor,
	// nothing is unlocked.
	dead.journal.f.Close()
	dead.journal = nil

	next := dial()
	defer next.Close()
	n, err := next.RecoverStale(context.Background())
	if err != nil {
		t.Fatalf("RecoverStale: %v", err)
	}
	if n != 2 {
		t.Errorf("RecoverStale dropped %d locks, want 2 (the dead client's lock and its queued request)", n)
	}
	if p.count("CANCEL") != 1 {
		t.Errorf("%d CANCELs, want 1 for the queued request", p.count("CANCEL"))
	}
	p.mu.Lock()
	_, deadHolds := p.holder[string(fh)]
	_, liveHolds := p.holder[string(liveFH)]
	queued := len(p.queued)
	p.mu.Unlock()
	if deadHolds || queued != 0 {
		t.Errorf("after recovery the server still has the dead client's lock (%v) or %d queued requests", deadHolds, queued)
	}
	if !liveHolds {
		t.Error("recovery dropped the live client's lock")
	}
	p.mu.Lock()
	for _, proc := range []string{"CANCEL", "UNLOCK"} {
		for _, got := range p.creds[proc] {
			if !sameCred(got, alice) {
				t.Errorf("recovery's %s carried credentials %+v, want those of the file the lock was taken through, %+v", proc, got, *alice)
			}
		}
	}
	p.mu.Unlock()
	if err := next.Lock(context.Background(), alice, fh, 3, Holder{}, whole, true, false, nil); err != nil {
		t.Errorf("LOCK of the dead client's file after recovery: %v", err)
	}
}

// TestTestNamesLocalHolder: a TEST in the way of an fcntl lock of another
// owner of this client is answered from what the client holds, with that
// holder's pid and range, without asking the server (the kernel client's
// do_getlk); one in the way of a flock(2) lock (which the kernel does not
// keep among its fcntl locks) is the server's to answer, pid 0.
func TestTestNamesLocalHolder(t *testing.T) {
	p := startPeer(t)
	c := p.dial(t, false)
	ctx := context.Background()
	if err := c.Lock(ctx, alice, fh, 1, Holder{Pid: 4242, Posix: true}, Range{10, 29}, true, false, nil); err != nil {
		t.Fatal(err)
	}
	got, err := c.Test(ctx, alice, fh, 2, Range{0, MaxOffset}, false)
	if err != nil || got == nil || *got != (Conflict{Range: Range{10, 29}, Exclusive: true, Pid: 4242}) || p.count("TEST") != 0 {
		t.Errorf("TEST over owner 1's fcntl lock: %+v, %v, %d TESTs sent; want bytes 10-29, exclusive, pid 4242, none sent", got, err, p.count("TEST"))
	}
	if got, err := c.Test(ctx, alice, fh, 1, Range{0, MaxOffset}, true); err != nil || got != nil {
		t.Errorf("TEST by the holder itself: %+v, %v; want none in the way", got, err)
	}
	if err := c.Unlock(ctx, alice, fh, 1, whole); err != nil {
		t.Fatal(err)
	}
	if err := c.Lock(ctx, alice, fh, 3, Holder{Pid: 4343}, whole, true, false, nil); err != nil {
		t.Fatal(err)
	}
	sent := p.count("TEST")
	got, err = c.Test(ctx, alice, fh, 2, whole, false)
	if err != nil || got == nil || got.Pid != 0 || p.count("TEST") != sent+1 {
		t.Errorf("TEST over owner 3's flock lock: %+v, %v, %d TESTs sent; want the server's answer, pid 0", got, err, p.count("TEST")-sent)
	}
}
