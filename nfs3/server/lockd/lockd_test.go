package lockd

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"os/exec"
	"runtime"
	"strconv"
	"testing"
	"time"

	"github.com/rdmafs/rdmafs/nfs3"
	"github.com/rdmafs/rdmafs/nfs3/nlm"
	"github.com/rdmafs/rdmafs/sunrpc"
	"github.com/rdmafs/rdmafs/sunrpc/xdr"
	"github.com/rdmafs/rdmafs/test/netns"
)

// The host tests drive a real lock manager over loopback TCP with NLM4
// calls that nfs3/nlm encodes and sunrpc's client sends. The server calls
// back (GRANTED to a client's lockd, SM_NOTIFY to its statd) through the
// client host's rpcbind, so each test runs in a network and mount
// namespace of its own with an rpcbind of its own (loopback only, a
// private /run): the host's rpcbind and statd are never told anything.

// inNamespaceEnv marks the copy of the test binary that runs inside the
// namespace.
const inNamespaceEnv = "RDMAFS_LOCKD_TEST_NETNS"

// inNamespace runs the calling test again inside a namespace of its own
// with rpcbind, and returns false; inside, it returns true and the test
// goes on.
func inNamespace(t *testing.T) bool {
	t.Helper()
	return netns.Rerun(t, inNamespaceEnv, "")
}

// testServer is a lock manager served over TCP on loopback.
type testServer struct {
	lockd *Server
	rpc   *sunrpc.Server
	port  int
}

func startServer(t *testing.T, cfg Config) *testServer {
	t.Helper()
	if cfg.Name == "" {
		cfg.Name = "rdmafs-test-server"
	}
	cfg.Logf = t.Logf
	ld, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	rpc := sunrpc.NewServer(sunrpc.ServerConfig{})
	ld.Register(rpc)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go rpc.Serve(l)
	ts := &testServer{lockd: ld, rpc: rpc, port: l.Addr().(*net.TCPAddr).Port}
	t.Cleanup(ts.stop)
	return ts
}

func (ts *testServer) stop() {
	ts.rpc.Close()
	ts.lockd.Close()
}

// client is one client host's lockd calling the server.
type client struct {
	t    *testing.T
	name string
	rpc  *sunrpc.Client
	prog uint32
	vers uint32
}

func dial(t *testing.T, port int, name string) *client {
	rpc := sunrpc.NewClient(sunrpc.NewTCP(sunrpc.TCPConfig{Addr: net.JoinHostPort("127.0.0.1", strconv.Itoa(port)), MaxRecord: 1 << 20}),
		sunrpc.Config{Prog: nlm.Program, Vers: nlm.Version, Timeout: 5 * time.Second, Retrans: 1, Soft: true, ProcNames: nlm.ProcNames})
	t.Cleanup(func() { rpc.Close() })
	return &client{t: t, name: name, rpc: rpc}
}

func (c *client) call(proc uint32, args, res nlm.Message) error {
	call := c.rpc.NewCall(proc, nil)
	defer call.Release()
	e := call.Args()
	args.Encode(&e)
	call.SetArgs(e)
	if err := c.rpc.Do(context.Background(), call); err != nil {
		return err
	}
	if res == nil {
		return nil
	}
	return nlm.Unmarshal(call.Reply.Body, res)
}

func (c *client) mustCall(proc uint32, args, res nlm.Message) {
	c.t.Helper()
	if err := c.call(proc, args, res); err != nil {
		c.t.Fatalf("%s %s: %v", c.name, nlm.ProcNames[proc], err)
	}
}

func (c *client) lk(fh string, svid int32, off, length uint64) nlm.Lock {
	return nlm.Lock{CallerName: []byte(c.name), FH: []byte(fh), Owner: []byte(fmt.Sprintf("%d@%s", svid, c.name)),
		Svid: svid, Offset: off, Length: length}
}

type lockOpts struct{ excl, block, reclaim bool }

func (c *client) lock(fh string, svid int32, off, length uint64, o lockOpts) nlm.Stat {
	c.t.Helper()
	var res nlm.Res
	c.mustCall(nlm.ProcLock, &nlm.LockArgs{Cookie: []byte("c"), Block: o.block, Exclusive: o.excl,
		Lock: c.lk(fh, svid, off, length), Reclaim: o.reclaim, State: 1}, &res)
	if string(res.Cookie) != "c" {
		c.t.Fatalf("LOCK: cookie %q back, want %q", res.Cookie, "c")
	}
	return res.Stat
}

func (c *client) test(fh string, svid int32, off, length uint64, excl bool) nlm.TestRes {
	c.t.Helper()
	var res nlm.TestRes
	c.mustCall(nlm.ProcTest, &nlm.TestArgs{Cookie: []byte("t"), Exclusive: excl, Lock: c.lk(fh, svid, off, length)}, &res)
	return res
}

func (c *client) unlock(fh string, svid int32, off, length uint64) nlm.Stat {
	c.t.Helper()
	var res nlm.Res
	c.mustCall(nlm.ProcUnlock, &nlm.UnlockArgs{Cookie: []byte("u"), Lock: c.lk(fh, svid, off, length)}, &res)
	return res.Stat
}

func wantStat(t *testing.T, what string, got, want nlm.Stat) {
	t.Helper()
	if got != want {
		t.Fatalf("%s: %v, want %v", what, got, want)
	}
}

// TestNLMConflicts: two clients with different caller names lock one file;
// each sees the other's locks through TEST and LOCK, a shared lock is
// shared, and an unlock of part of a lock frees that part only.
func TestNLMConflicts(t *testing.T) {
	ts := startServer(t, Config{})
	a, b := dial(t, ts.port, "alpha"), dial(t, ts.port, "beta")
	wantStat(t, "alpha's exclusive lock of bytes 0-99", a.lock("f", 1, 0, 100, lockOpts{excl: true}), nlm.StatGranted)
	wantStat(t, "beta's shared lock of byte 50", b.lock("f", 7, 50, 1, lockOpts{}), nlm.StatDenied)
	res := b.test("f", 7, 0, 0, false)
	if res.Stat != nlm.StatDenied || !res.Holder.Exclusive || res.Holder.Svid != 1 || res.Holder.Offset != 0 ||
		res.Holder.Length != 100 || string(res.Holder.Owner) != "1@alpha" || string(res.Cookie) != "t" {
		t.Fatalf("beta's TEST: %+v, want alpha's exclusive 0+100 held by svid 1", res)
	}
	wantStat(t, "alpha's own TEST", a.test("f", 1, 0, 0, true).Stat, nlm.StatGranted)
	wantStat(t, "another process of alpha", a.lock("f", 2, 10, 1, lockOpts{}), nlm.StatDenied)
	wantStat(t, "beta on another file", b.lock("g", 7, 0, 0, lockOpts{excl: true}), nlm.StatGranted)

	wantStat(t, "alpha unlocks 40-59", a.unlock("f", 1, 40, 20), nlm.StatGranted)
	wantStat(t, "beta's shared lock of 40-59", b.lock("f", 7, 40, 20, lockOpts{}), nlm.StatGranted)
	wantStat(t, "beta's lock of 39-40", b.lock("f", 7, 39, 2, lockOpts{}), nlm.StatDenied)
	wantStat(t, "alpha's second shared lock of 45", a.lock("f", 3, 45, 1, lockOpts{}), nlm.StatGranted)
	wantStat(t, "alpha's exclusive lock of 45", a.lock("f", 3, 45, 1, lockOpts{excl: true}), nlm.StatDenied)
	// An unlock under another oh than the LOCK's, as a child process sends.
	l := a.lk("f", 1, 0, 0)
	l.Owner = []byte("999@alpha")
	var ures nlm.Res
	a.mustCall(nlm.ProcUnlock, &nlm.UnlockArgs{Lock: l}, &ures)
	wantStat(t, "alpha's unlock under another oh", ures.Stat, nlm.StatGranted)
	wantStat(t, "beta's exclusive lock of 100- after alpha's unlock", b.lock("f", 7, 100, 0, lockOpts{excl: true}), nlm.StatGranted)
	if st := ts.lockd.Stats(); st.Locks != 4 || st.Hosts != 2 {
		t.Fatalf("server holds %+v, want 4 locks of 2 hosts", st)
	}
}

// TestNLMFreeAll: FREE_ALL drops every lock of the host it names, and no
// other's; SM_NOTIFY to the server's NSM, over TCP or UDP, drops the locks
// of the host it names (and of the hosts at its address).
func TestNLMFreeAll(t *testing.T) {
	ts := startServer(t, Config{})
	a, b := dial(t, ts.port, "alpha"), dial(t, ts.port, "beta")
	for i := range uint64(10) {
		wantStat(t, "alpha's lock", a.lock("f", int32(i), i*10, 5, lockOpts{excl: true}), nlm.StatGranted)
	}
	wantStat(t, "beta's lock", b.lock("g", 1, 0, 0, lockOpts{excl: true}), nlm.StatGranted)
	a.mustCall(nlm.ProcFreeAll, &nlm.Notify{Name: []byte("alpha"), State: 3}, nil)
	wantStat(t, "beta's lock where alpha held one", b.lock("f", 1, 0, 0, lockOpts{excl: true}), nlm.StatGranted)
	wantStat(t, "alpha on beta's file", a.lock("g", 1, 0, 0, lockOpts{}), nlm.StatDenied)
	if st := ts.lockd.Stats(); st.Locks != 2 || st.Hosts != 1 {
		t.Fatalf("after FREE_ALL the server holds %+v, want beta's 2 locks", st)
	}

	// beta reboots: its statd's SM_NOTIFY.
	nsm := sunrpc.NewClient(sunrpc.NewTCP(sunrpc.TCPConfig{Addr: net.JoinHostPort("127.0.0.1", strconv.Itoa(ts.port))}),
		sunrpc.Config{Prog: nlm.NSMProgram, Vers: nlm.NSMVersion, Timeout: 5 * time.Second, Retrans: 1, Soft: true})
	defer nsm.Close()
	nc := &client{t: t, name: "beta's statd", rpc: nsm}
	nc.mustCall(nlm.NSMProcNotify, &nlm.SMStatChange{MonName: []byte("BETA"), State: 5}, nil)
	if st := ts.lockd.Stats(); st.Locks != 0 || st.Hosts != 0 {
		t.Fatalf("after beta's SM_NOTIFY the server holds %+v, want nothing", st)
	}
	wantStat(t, "alpha's lock where beta held one", a.lock("f", 1, 0, 0, lockOpts{excl: true}), nlm.StatGranted)

	// alpha reboots: sm-notify sends SM_NOTIFY over UDP.
	udp, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer udp.Close()
	go ts.lockd.ServeUDP(udp)
	smNotifyUDP(t, udp.LocalAddr().String(), "alpha")
	if st := ts.lockd.Stats(); st.Locks != 0 || st.Hosts != 0 {
		t.Fatalf("after alpha's SM_NOTIFY over UDP the server holds %+v, want nothing", st)
	}
}

// smNotifyUDP sends SM_NOTIFY of name's restart in one datagram, as
// sm-notify does, and waits for the reply.
func smNotifyUDP(t *testing.T, addr, name string) {
	t.Helper()
	conn, err := net.Dial("udp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	e := xdr.Encoder{}
	for _, w := range []uint32{0x5eed, 0, 2, nlm.NSMProgram, nlm.NSMVersion, nlm.NSMProcNotify, 0, 0, 0, 0} {
		e.Uint32(w) // xid, CALL, RPC version 2, the procedure, AUTH_NONE credential and verifier
	}
	(&nlm.SMStatChange{MonName: []byte(name), State: 7}).Encode(&e)
	if _, err := conn.Write(e.Buf); err != nil {
		t.Fatal(err)
	}
	conn.SetReadDeadline(time.Now().Add(5 * time.Second))
	buf := make([]byte, 512)
	n, err := conn.Read(buf)
	if err != nil {
		t.Fatalf("no reply to SM_NOTIFY over UDP: %v", err)
	}
	d := xdr.NewDecoder(buf[:n])
	xid, mtype, stat := d.Uint32(), d.Uint32(), d.Uint32()
	d.Uint32() // verifier
	d.Opaque(400)
	if accept := d.Uint32(); d.Err() != nil || xid != 0x5eed || mtype != 1 || stat != 0 || accept != 0 {
		t.Fatalf("reply to SM_NOTIFY over UDP: xid %#x type %d stat %d accept %d (%v)", xid, mtype, stat, accept, d.Err())
	}
}

// TestNLMBounds: a client that floods the server with locks, blocked
// requests and caller names is refused (NLM4_DENIED_NOLOCKS) past its
// bounds, the server's state stays within them, and another client still
// locks.
func TestNLMBounds(t *testing.T) {
	ts := startServer(t, Config{MaxLocksPerHost: 100, MaxBlockedPerHost: 4, MaxHosts: 8, MaxLocks: 300})
	a, b := dial(t, ts.port, "alpha"), dial(t, ts.port, "flood")
	wantStat(t, "alpha's lock", a.lock("f", 1, 0, 1, lockOpts{excl: true}), nlm.StatGranted)
	var before runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	refused := 0
	for i := range uint64(5000) {
		// Disjoint ranges on many files with the longest handles: the
		// costliest locks to keep.
		fh := string(bytes.Repeat([]byte{byte(i % 251)}, 1000)) + strconv.Itoa(int(i%50))
		switch st := b.lock(fh, int32(i), i*2, 1, lockOpts{excl: true}); st {
		case nlm.StatGranted:
		case nlm.StatDeniedNoLocks:
			refused++
		default:
			t.Fatalf("flood lock %d: %v", i, st)
		}
	}
	if refused != 5000-100 {
		t.Fatalf("%d of 5000 locks refused, want all but the host's 100", refused)
	}
	var after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&after)
	// 100 locks with handles of 1 KB cost some 100 KB; 5000 would cost 5 MB.
	if grown := int64(after.HeapAlloc) - int64(before.HeapAlloc); grown > 1<<20 {
		t.Errorf("the heap grew by %d bytes under the flood", grown)
	}
	for i := range 10 {
		st := b.lock("f", int32(i), 0, 1, lockOpts{block: true})
		if want := nlm.StatBlocked; i >= 4 {
			want = nlm.StatDeniedNoLocks
			wantStat(t, fmt.Sprintf("blocked lock %d", i), st, want)
		}
	}
	for i := range 20 {
		c := dial(t, ts.port, fmt.Sprintf("host%d", i))
		st := c.lock("h", 1, uint64(i), 1, lockOpts{})
		if want := nlm.StatGranted; i >= 6 { // alpha, flood and 6 more
			want = nlm.StatDeniedNoLocks
			wantStat(t, fmt.Sprintf("host %d", i), st, want)
		}
	}
	st := ts.lockd.Stats()
	if st.Locks != 1+100+6 || st.Blocked != 4 || st.Hosts != 8 {
		t.Fatalf("the server holds %+v, want 107 locks, 4 blocked, 8 hosts", st)
	}
	wantStat(t, "alpha's second lock", a.lock("f", 1, 10, 1, lockOpts{excl: true}), nlm.StatGranted)
}

// TestNLMBlockedGranted: a blocking LOCK that conflicts is queued
// (NLM4_BLOCKED), and when the lock in its way goes, the server grants it
// and calls GRANTED on the client's lockd, which it finds through the
// client's rpcbind. A CANCELed request is not granted.
func TestNLMBlockedGranted(t *testing.T) {
	if !inNamespace(t) {
		return
	}
	granted, _ := startClientLockd(t)
	ts := startServer(t, Config{})
	a, b := dial(t, ts.port, "alpha"), dial(t, ts.port, "beta")
	wantStat(t, "alpha's lock", a.lock("f", 1, 0, 0, lockOpts{excl: true}), nlm.StatGranted)
	wantStat(t, "beta's blocking lock", b.lock("f", 2, 100, 10, lockOpts{excl: true, block: true}), nlm.StatBlocked)
	wantStat(t, "beta's retransmission", b.lock("f", 2, 100, 10, lockOpts{excl: true, block: true}), nlm.StatBlocked)
	wantStat(t, "beta's second blocking lock", b.lock("f", 3, 0, 1, lockOpts{block: true}), nlm.StatBlocked)
	var cres nlm.Res
	b.mustCall(nlm.ProcCancel, &nlm.CancelArgs{Block: true, Lock: b.lk("f", 3, 0, 1)}, &cres)
	wantStat(t, "CANCEL", cres.Stat, nlm.StatGranted)
	select {
	case g := <-granted:
		t.Fatalf("GRANTED before the unlock: %+v", g)
	case <-time.After(200 * time.Millisecond):
	}
	wantStat(t, "alpha's unlock", a.unlock("f", 1, 0, 0), nlm.StatGranted)
	select {
	case g := <-granted:
		if string(g.Lock.CallerName) != "beta" || g.Lock.Svid != 2 || g.Lock.Offset != 100 || g.Lock.Length != 10 ||
			!g.Exclusive || string(g.Cookie) != "c" || string(g.Lock.FH) != "f" {
			t.Fatalf("GRANTED %+v, want beta's exclusive lock 100+10 of f with its cookie", g)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("no GRANTED after the unlock")
	}
	select {
	case g := <-granted:
		t.Fatalf("GRANTED of the canceled request: %+v", g)
	case <-time.After(300 * time.Millisecond):
	}
	res := a.test("f", 1, 0, 0, true)
	if res.Stat != nlm.StatDenied || res.Holder.Svid != 2 || res.Holder.Offset != 100 {
		t.Fatalf("after GRANTED alpha's TEST: %+v, want beta's lock 100+10", res)
	}
	wantStat(t, "alpha's shared lock of 0", a.lock("f", 1, 0, 1, lockOpts{}), nlm.StatGranted)
}

// resCall is a call of a _RES procedure the client's lockd received.
type resCall struct {
	proc uint32
	args []byte
}

// startClientLockd serves NLM v4's GRANTED and the _RES procedures as a
// client's lockd does, on a port it registers with the namespace's
// rpcbind, and returns what they are called with.
func startClientLockd(t *testing.T) (<-chan nlm.TestArgs, <-chan resCall) {
	t.Helper()
	granted := make(chan nlm.TestArgs, 16)
	results := make(chan resCall, 16)
	rpc := sunrpc.NewServer(sunrpc.ServerConfig{})
	procs := make([]sunrpc.Proc, nlm.ProcGrantedRes+1)
	procs[0] = sunrpc.NullProc
	for proc := nlm.ProcTestRes; proc <= nlm.ProcUnlockRes; proc++ {
		procs[proc] = sunrpc.Proc{Front: func(r *sunrpc.Request) []byte {
			results <- resCall{r.Proc, append([]byte(nil), r.Args...)}
			return sunrpc.AcceptedReply(r.Xid, sunrpc.Success)
		}}
	}
	procs[nlm.ProcGranted] = sunrpc.Proc{Front: func(r *sunrpc.Request) []byte {
		var a nlm.TestArgs
		if err := nlm.Unmarshal(r.Args, &a); err != nil {
			return sunrpc.AcceptedReply(r.Xid, sunrpc.GarbageArgs)
		}
		granted <- a
		w := sunrpc.SuccessHeader(r.Xid)
		(&nlm.Res{Cookie: a.Cookie, Stat: nlm.StatGranted}).Encode(w)
		return w.Buf
	}}
	rpc.Register(nlm.Program, nlm.Version, procs)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go rpc.Serve(l)
	t.Cleanup(func() { rpc.Close() })
	pmapSet(t, nlm.Program, nlm.Version, nfs3.IPProtoTCP, l.Addr().(*net.TCPAddr).Port)
	return granted, results
}

// TestNLMAsyncMsg: the _MSG forms are answered at once with no result,
// and their results come back as calls of the client's _RES procedures,
// with the request's cookie: TEST_MSG's the conflicting holder, LOCK_MSG's,
// CANCEL_MSG's and UNLOCK_MSG's their status.
func TestNLMAsyncMsg(t *testing.T) {
	if !inNamespace(t) {
		return
	}
	_, results := startClientLockd(t)
	ts := startServer(t, Config{})
	a, b := dial(t, ts.port, "alpha"), dial(t, ts.port, "beta")
	wantStat(t, "alpha's lock", a.lock("f", 1, 0, 10, lockOpts{excl: true}), nlm.StatGranted)
	next := func(wantProc uint32) []byte {
		t.Helper()
		select {
		case c := <-results:
			if c.proc != wantProc {
				t.Fatalf("%s called, want %s", nlm.ProcNames[c.proc], nlm.ProcNames[wantProc])
			}
			return c.args
		case <-time.After(10 * time.Second):
			t.Fatalf("no %s", nlm.ProcNames[wantProc])
		}
		return nil
	}
	msg := func(proc uint32, args nlm.Message) {
		t.Helper()
		call := b.rpc.NewCall(proc, nil)
		defer call.Release()
		e := call.Args()
		args.Encode(&e)
		call.SetArgs(e)
		if err := b.rpc.Do(context.Background(), call); err != nil {
			t.Fatalf("%s: %v", nlm.ProcNames[proc], err)
		}
		if len(call.Reply.Body) != 0 {
			t.Fatalf("%s: a reply of %d bytes, want none", nlm.ProcNames[proc], len(call.Reply.Body))
		}
	}

	msg(nlm.ProcTestMsg, &nlm.TestArgs{Cookie: []byte("t1"), Exclusive: true, Lock: b.lk("f", 2, 5, 1)})
	var tres nlm.TestRes
	if err := nlm.Unmarshal(next(nlm.ProcTestRes), &tres); err != nil {
		t.Fatal(err)
	}
	if string(tres.Cookie) != "t1" || tres.Stat != nlm.StatDenied || tres.Holder.Svid != 1 || tres.Holder.Length != 10 {
		t.Fatalf("TEST_RES %+v, want alpha's lock 0+10 with cookie t1", tres)
	}
	for _, c := range []struct {
		proc uint32
		args nlm.Message
		want nlm.Stat
	}{
		{nlm.ProcLockMsg, &nlm.LockArgs{Cookie: []byte("c"), Exclusive: true, Lock: b.lk("f", 2, 5, 1)}, nlm.StatDenied},
		{nlm.ProcLockMsg, &nlm.LockArgs{Cookie: []byte("c"), Exclusive: true, Lock: b.lk("f", 2, 20, 1)}, nlm.StatGranted},
		{nlm.ProcCancelMsg, &nlm.CancelArgs{Cookie: []byte("c"), Lock: b.lk("f", 2, 5, 1)}, nlm.StatGranted},
		{nlm.ProcUnlockMsg, &nlm.UnlockArgs{Cookie: []byte("c"), Lock: b.lk("f", 2, 20, 1)}, nlm.StatGranted},
	} {
		msg(c.proc, c.args)
		var res nlm.Res
		if err := nlm.Unmarshal(next(c.proc+5), &res); err != nil {
			t.Fatal(err)
		}
		if string(res.Cookie) != "c" || res.Stat != c.want {
			t.Fatalf("%s after %s: %+v, want %v", nlm.ProcNames[c.proc+5], nlm.ProcNames[c.proc], res, c.want)
		}
	}
	wantStat(t, "alpha on byte 20 after beta's UNLOCK_MSG", a.lock("f", 1, 20, 1, lockOpts{excl: true}), nlm.StatGranted)
}

// pmapSet registers prog and vers over proto at port with the
// namespace's rpcbind.
func pmapSet(t *testing.T, prog, vers, proto uint32, port int) {
	t.Helper()
	rpc := sunrpc.NewClient(sunrpc.NewTCP(sunrpc.TCPConfig{
		Addr: net.JoinHostPort("127.0.0.1", strconv.Itoa(nfs3.PortmapPort)), ReservedPort: true}),
		sunrpc.Config{Prog: nfs3.PortmapProgram, Vers: nfs3.PortmapVersion, Timeout: 5 * time.Second, Soft: true})
	defer rpc.Close()
	call := rpc.NewCall(nfs3.PortmapProcSet, nil)
	defer call.Release()
	e := call.Args()
	e.Uint32(prog)
	e.Uint32(vers)
	e.Uint32(proto)
	e.Uint32(uint32(port))
	call.SetArgs(e)
	if err := rpc.Do(context.Background(), call); err != nil {
		t.Fatalf("PMAPPROC_SET: %v", err)
	}
	if d := xdr.NewDecoder(call.Reply.Body); !d.Bool() {
		t.Fatalf("rpcbind refused program %d version %d on port %d", prog, vers, port)
	}
}

// TestNLMHostsByNameAndAddress: two machines with one node name (cloned
// virtual machines) are two hosts, as Linux's lockd tells them apart by
// caller_name and address: their processes' locks conflict, and FREE_ALL
// of the name drops both.
func TestNLMHostsByNameAndAddress(t *testing.T) {
	if !inNamespace(t) {
		return
	}
	ts := startServer(t, Config{})
	// The server answers at a second address of the namespace's loopback
	// too, and a client reaching it there calls from there.
	if out, err := exec.Command("ip", "addr", "add", "10.9.9.2/32", "dev", "lo").CombinedOutput(); err != nil {
		t.Fatalf("ip addr add: %v: %s", err, out)
	}
	l, err := net.Listen("tcp", net.JoinHostPort("10.9.9.2", strconv.Itoa(ts.port)))
	if err != nil {
		t.Fatal(err)
	}
	go ts.rpc.Serve(l)
	one := dial(t, ts.port, "twin")
	two := &client{t: t, name: "twin", rpc: sunrpc.NewClient(sunrpc.NewTCP(sunrpc.TCPConfig{Addr: l.Addr().String()}),
		sunrpc.Config{Prog: nlm.Program, Vers: nlm.Version, Timeout: 5 * time.Second, Retrans: 1, Soft: true})}
	defer two.rpc.Close()
	wantStat(t, "the first twin's lock", one.lock("f", 1, 0, 0, lockOpts{excl: true}), nlm.StatGranted)
	wantStat(t, "the second twin's lock, same svid", two.lock("f", 1, 0, 0, lockOpts{excl: true}), nlm.StatDenied)
	wantStat(t, "the second twin's own file", two.lock("g", 1, 0, 0, lockOpts{excl: true}), nlm.StatGranted)
	if st := ts.lockd.Stats(); st.Hosts != 2 || st.Locks != 2 {
		t.Fatalf("the server holds %+v, want 2 hosts with a lock each", st)
	}
	one.mustCall(nlm.ProcFreeAll, &nlm.Notify{Name: []byte("twin"), State: 3}, nil)
	if st := ts.lockd.Stats(); st.Hosts != 0 || st.Locks != 0 {
		t.Fatalf("after FREE_ALL of the name the server holds %+v", st)
	}
}
