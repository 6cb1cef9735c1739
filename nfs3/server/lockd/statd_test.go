package lockd

import (
	"context"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/rdmafs/rdmafs/nfs3"
	"github.com/rdmafs/rdmafs/nfs3/nlm"
	"github.com/rdmafs/rdmafs/sunrpc/xdr"
)

// TestNLMRestartTellsStatd: a restarted server's SM_NOTIFY reaches the
// rpc.statd (nfs-utils) of a client that holds locks, which then calls its
// lock manager back, as a kernel client's statd calls its lockd to reclaim:
// the callback names the server as the client monitored it, with the
// server's new state number.
func TestNLMRestartTellsStatd(t *testing.T) {
	if !inNamespace(t) {
		return
	}
	nsm, _ := startStatd(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	// The client's lockd: monitors the server through its statd, and
	// hears of its restart on NLM version 3's SM_NOTIFY over UDP.
	cb, err := net.ListenUDP("udp4", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	defer cb.Close()
	pmapSet(t, nlm.Program, 3, ipProtoUDP, cb.LocalAddr().(*net.UDPAddr).Port)
	mon := nlm.SMMon{MonID: nlm.SMMonID{MonName: []byte("127.0.0.1"),
		MyID: nlm.SMMyID{MyName: []byte("127.0.0.1"), Prog: nlm.Program, Vers: 3, Proc: nlm.ProcSMNotify}},
		Priv: [16]byte{1, 2, 3}}
	if _, err := nsm.Mon(ctx, &mon); err != nil {
		t.Fatal(err)
	}

	dir := filepath.Join(t.TempDir(), "state")
	first := startServer(t, Config{StateDir: dir, Name: "127.0.0.1"})
	wantStat(t, "the client's lock", dial(t, first.port, "alpha").lock("f", 1, 0, 0, lockOpts{excl: true}), nlm.StatGranted)
	first.stop()
	second := startServer(t, Config{StateDir: dir, Name: "127.0.0.1"})

	buf := make([]byte, 64<<10)
	cb.SetReadDeadline(time.Now().Add(20 * time.Second))
	n, err := cb.Read(buf)
	if err != nil {
		t.Fatalf("statd did not call the client's lock manager back: %v", err)
	}
	d := xdr.NewDecoder(buf[:n])
	d.Uint32() // xid
	mtype, rpcvers, prog, vers, proc := d.Uint32(), d.Uint32(), d.Uint32(), d.Uint32(), d.Uint32()
	for range 2 { // credential and verifier
		d.Uint32()
		d.Opaque(400)
	}
	if d.Err() != nil || mtype != 0 || rpcvers != 2 || prog != nlm.Program || vers != 3 || proc != nlm.ProcSMNotify {
		t.Fatalf("statd's callback: %v: type %d, RPC %d, program %d version %d procedure %d", d.Err(), mtype, rpcvers, prog, vers, proc)
	}
	var st nlm.SMStatus
	if err := nlm.Unmarshal(d.Rest(), &st); err != nil {
		t.Fatal(err)
	}
	if string(st.MonName) != "127.0.0.1" || st.State != second.lockd.NSMState() || st.Priv != mon.Priv {
		t.Fatalf("statd's callback: %q state %d priv %x, want 127.0.0.1 state %d priv %x",
			st.MonName, st.State, st.Priv, second.lockd.NSMState(), mon.Priv)
	}
}

// startStatd runs nfs-utils' rpc.statd in the test's namespace, and
// returns a client of it and its state directory.
func startStatd(t *testing.T) (*nlm.NSMClient, string) {
	t.Helper()
	statd, err := exec.LookPath("rpc.statd")
	if err != nil {
		t.Skip("rpc.statd is not installed (nfs-common)")
	}
	sdir := t.TempDir()
	for _, sub := range []string{"sm", "sm.bak"} {
		if err := os.Mkdir(filepath.Join(sdir, sub), 0o700); err != nil {
			t.Fatal(err)
		}
	}
	cmd := exec.Command(statd, "-F", "-L", "-P", sdir)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for {
		nsm, err := nlm.DialNSM(ctx, nfs3.DialConfig{Host: "127.0.0.1", ReservedPort: true, Timeout: time.Second})
		if err == nil {
			t.Cleanup(func() { nsm.Close() })
			return nsm, sdir
		}
		if ctx.Err() != nil {
			t.Fatalf("rpc.statd did not register: %v", err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestNLMHostStatd: where the host's rpc.statd holds NSM, the server asks
// it to monitor each client host by address; when statd hears of that
// host's reboot (the SM_NOTIFY its sm-notify sends), it calls the server
// back on NLM version 3 over UDP, and the host's locks go.
func TestNLMHostStatd(t *testing.T) {
	if !inNamespace(t) {
		return
	}
	nsm, sdir := startStatd(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	ts := startServer(t, Config{HostStatd: true})
	udp, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer udp.Close()
	go ts.lockd.ServeUDP(udp)
	pmapSet(t, nlm.Program, 3, ipProtoUDP, udp.LocalAddr().(*net.UDPAddr).Port)

	a, b := dial(t, ts.port, "alpha"), dial(t, ts.port, "beta")
	wantStat(t, "alpha's lock", a.lock("f", 1, 0, 0, lockOpts{excl: true}), nlm.StatGranted)
	for {
		// statd files the host under its canonical name (localhost).
		ents, _ := os.ReadDir(filepath.Join(sdir, "sm"))
		if len(ents) == 1 {
			break
		}
		if ctx.Err() != nil {
			t.Fatalf("statd was not asked to monitor the client host: it monitors %v", ents)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if err := nsm.Notify(ctx, &nlm.SMStatChange{MonName: []byte("127.0.0.1"), State: 9}); err != nil {
		t.Fatal(err)
	}
	for ts.lockd.Stats().Locks != 0 {
		if ctx.Err() != nil {
			t.Fatal("the client's locks stayed after statd heard of its reboot")
		}
		time.Sleep(20 * time.Millisecond)
	}
	wantStat(t, "beta after alpha's reboot", b.lock("f", 2, 0, 0, lockOpts{excl: true}), nlm.StatGranted)
}
