package nlm

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/rdmafs/rdmafs/nfs3"
	"github.com/rdmafs/rdmafs/sunrpc"
	"github.com/rdmafs/rdmafs/sunrpc/xdr"
	"github.com/rdmafs/rdmafs/test/netns"
)

// statdDirEnv carries the state directory of the test's rpc.statd to the
// copy of the test that runs beside it in its network namespace.
const statdDirEnv = "RDMAFS_NLM_TEST_STATD_DIR"

// TestNSMClientWithStatd calls a real rpc.statd (nfs-utils) with every
// NSMClient procedure and checks what statd does with them: SM_STAT gives
// the state number statd keeps on disk, SM_MON records the monitored host
// in statd's directory and SM_UNMON or SM_UNMON_ALL drops it, and SM_NOTIFY
// of a monitored host's restart makes statd call the my_id of SM_MON back
// with the host, its new state and SM_MON's private bytes.
//
// rpcbind and statd are the test's own, in a network and mount namespace of
// their own (loopback only, a private /run), so the host's are not touched;
// the test runs itself again inside that namespace to reach them.
func TestNSMClientWithStatd(t *testing.T) {
	dir := os.Getenv(statdDirEnv)
	if dir == "" {
		runBesideStatd(t)
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, err := DialNSM(ctx, nfs3.DialConfig{Host: "127.0.0.1", ReservedPort: true, Timeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()

	state, err := c.Stat(ctx, "localhost")
	if err != nil {
		t.Fatal(err)
	}
	onDisk, err := os.ReadFile(filepath.Join(dir, "state"))
	if err != nil || len(onDisk) != 4 {
		t.Fatalf("statd's state file: %v, %d bytes", err, len(onDisk))
	}
	if want := int32(binary.NativeEndian.Uint32(onDisk)); state != want || state%2 != 1 {
		t.Errorf("SM_STAT: state %d, statd's state file has %d (and a host that is up has an odd state)", state, want)
	}

	// The callback: a lock manager's NSM_NOTIFY procedure, which statd finds
	// through rpcbind and calls over UDP.
	cb, err := net.ListenUDP("udp4", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	defer cb.Close()
	if err := pmapSetUDP(ctx, Program, 3, cb.LocalAddr().(*net.UDPAddr).Port); err != nil {
		t.Fatal(err)
	}
	me := SMMyID{MyName: []byte("127.0.0.1"), Prog: Program, Vers: 3, Proc: ProcSMNotify}
	mon := SMMon{MonID: SMMonID{MonName: []byte("127.0.0.1"), MyID: me},
		Priv: [16]byte{0xde, 0xad, 0xbe, 0xef, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 0xff}}
	monitored := func() []string {
		t.Helper()
		ents, err := os.ReadDir(filepath.Join(dir, "sm"))
		if err != nil {
			t.Fatal(err)
		}
		var names []string
		for _, e := range ents {
			names = append(names, e.Name())
		}
		return names
	}

	if st, err := c.Mon(ctx, &mon); err != nil || st != state {
		t.Fatalf("SM_MON: state %d, %v; want state %d", st, err, state)
	}
	if m := monitored(); len(m) != 1 {
		t.Fatalf("after SM_MON statd monitors %q, want one host", m)
	}
	if err := c.Notify(ctx, &SMStatChange{MonName: []byte("127.0.0.1"), State: 41}); err != nil {
		t.Fatal(err)
	}
	status := receiveCallback(t, cb)
	if string(status.MonName) != "127.0.0.1" || status.State != 41 || status.Priv != mon.Priv {
		t.Errorf("statd's callback: %s state %d priv %x; want 127.0.0.1 state 41 priv %x",
			status.MonName, status.State, status.Priv, mon.Priv)
	}

	if st, err := c.Unmon(ctx, &mon.MonID); err != nil || st != state {
		t.Fatalf("SM_UNMON: state %d, %v", st, err)
	}
	if m := monitored(); len(m) != 0 {
		t.Errorf("after SM_UNMON statd still monitors %q", m)
	}
	if _, err := c.Mon(ctx, &mon); err != nil {
		t.Fatal(err)
	}
	if st, err := c.UnmonAll(ctx, &me); err != nil || st != state {
		t.Fatalf("SM_UNMON_ALL: state %d, %v", st, err)
	}
	if m := monitored(); len(m) != 0 {
		t.Errorf("after SM_UNMON_ALL statd still monitors %q", m)
	}
}

// runBesideStatd starts rpcbind and rpc.statd in a namespace of their own
// and runs this test again there.
func runBesideStatd(t *testing.T) {
	netns.Need(t, "rpc.statd")
	dir := t.TempDir()
	for _, sub := range []string{"sm", "sm.bak"} {
		if err := os.Mkdir(filepath.Join(dir, sub), 0o700); err != nil {
			t.Fatal(err)
		}
	}
	script := netns.Script(`rpc.statd -F -L -d -P "$` + statdDirEnv + `" >"$` + statdDirEnv + `.log" 2>&1 & pids="$pids $!"
for i in $(seq 100); do rpcinfo -p 127.0.0.1 | grep -q status && break; sleep 0.05; done
"$0" -test.run '^TestNSMClientWithStatd$' -test.count=1 -test.v
`)
	cmd := netns.Command(script, os.Args[0])
	cmd.Env = append(os.Environ(), statdDirEnv+"="+dir)
	out, err := cmd.CombinedOutput()
	if err != nil {
		log, _ := os.ReadFile(dir + ".log")
		t.Fatalf("%v: %s\nrpc.statd: %s", err, out, log)
	}
	if !bytes.Contains(out, []byte("--- PASS: TestNSMClientWithStatd")) {
		t.Fatalf("the test did not run beside statd:\n%s", out)
	}
}

// pmapSetUDP registers prog and vers over UDP at port with the local
// rpcbind.
func pmapSetUDP(ctx context.Context, prog, vers uint32, port int) error {
	rpc := sunrpc.NewClient(sunrpc.NewTCP(sunrpc.TCPConfig{
		Addr: net.JoinHostPort("127.0.0.1", strconv.Itoa(nfs3.PortmapPort)), ReservedPort: true}),
		sunrpc.Config{Prog: nfs3.PortmapProgram, Vers: nfs3.PortmapVersion, Timeout: 5 * time.Second, Soft: true,
			ProcNames: nfs3.PortmapProcNames})
	defer rpc.Close()
	call := rpc.NewCall(nfs3.PortmapProcSet, nil)
	defer call.Release()
	e := call.Args()
	e.Uint32(prog)
	e.Uint32(vers)
	e.Uint32(17) // IPPROTO_UDP
	e.Uint32(uint32(port))
	call.SetArgs(e)
	if err := rpc.Do(ctx, call); err != nil {
		return fmt.Errorf("PMAPPROC_SET: %w", err)
	}
	if d := xdr.NewDecoder(call.Reply.Body); !d.Bool() {
		return fmt.Errorf("rpcbind refused to register program %d version %d on UDP port %d", prog, vers, port)
	}
	return nil
}

// receiveCallback reads the call statd makes to the lock manager and
// returns its arguments.
func receiveCallback(t *testing.T, conn *net.UDPConn) SMStatus {
	t.Helper()
	buf := make([]byte, 64<<10)
	conn.SetReadDeadline(time.Now().Add(15 * time.Second))
	n, err := conn.Read(buf)
	if err != nil {
		t.Fatalf("no callback from statd: %v", err)
	}
	d := xdr.NewDecoder(buf[:n])
	d.Uint32() // xid
	mtype, rpcvers, prog, vers, proc := d.Uint32(), d.Uint32(), d.Uint32(), d.Uint32(), d.Uint32()
	for range 2 { // credential and verifier
		d.Uint32()
		d.Opaque(400)
	}
	if d.Err() != nil || mtype != 0 || rpcvers != 2 || prog != Program || vers != 3 || proc != ProcSMNotify {
		t.Fatalf("statd's callback: %v: message type %d, RPC version %d, program %d version %d procedure %d",
			d.Err(), mtype, rpcvers, prog, vers, proc)
	}
	var s SMStatus
	if err := Unmarshal(d.Rest(), &s); err != nil {
		t.Fatal(err)
	}
	for i := range buf[:n] {
		buf[i] = 0 // s must not depend on the datagram's buffer
	}
	return s
}
