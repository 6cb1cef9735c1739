package lockd

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/rdmafs/rdmafs/nfs3/nlm"
	"net"
)

// TestSMNotifyFromSMNotify: nfs-utils' sm-notify, as a rebooted client
// host runs it, finds the server's NSM through rpcbind (over UDP, the only
// way it sends) and tells it of the reboot; the server drops that host's
// locks, and another client then takes the lock they held.
func TestSMNotifyFromSMNotify(t *testing.T) {
	if !inNamespace(t) {
		return
	}
	smNotify, err := exec.LookPath("sm-notify")
	if err != nil {
		t.Skip("sm-notify is not installed (nfs-common)")
	}
	ts := startServer(t, Config{})
	udp, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer udp.Close()
	go ts.lockd.ServeUDP(udp)
	pmapSet(t, nlm.NSMProgram, nlm.NSMVersion, ipProtoUDP, udp.LocalAddr().(*net.UDPAddr).Port)

	// The client host is 127.0.0.1, by its address: sm-notify names the
	// rebooted host as -v gives it.
	a, b := dial(t, ts.port, "127.0.0.1"), dial(t, ts.port, "beta")
	wantStat(t, "the client's lock", a.lock("f", 1, 0, 0, lockOpts{excl: true}), nlm.StatGranted)
	wantStat(t, "beta's lock", b.lock("f", 2, 0, 0, lockOpts{excl: true}), nlm.StatDenied)

	// The client's statd directory records the server as a peer to tell,
	// as its rpc.statd writes it after SM_MON (addr prog vers proc priv
	// mon_name my_name).
	dir := t.TempDir()
	for _, sub := range []string{"sm", "sm.bak"} {
		if err := os.Mkdir(filepath.Join(dir, sub), 0o700); err != nil {
			t.Fatal(err)
		}
	}
	record := "0100007f 000186b5 00000003 00000010 00000000000000000000000000000000 127.0.0.1 127.0.0.1\n"
	if err := os.WriteFile(filepath.Join(dir, "sm", "127.0.0.1"), []byte(record), 0o600); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, smNotify, "-d", "-f", "-P", dir, "-v", "127.0.0.1").CombinedOutput()
	t.Logf("sm-notify: %v\n%s", err, out)
	if err != nil {
		t.Fatal(err)
	}
	if st := ts.lockd.Stats(); st.Locks != 0 {
		t.Fatalf("after sm-notify the server holds %+v, want no lock", st)
	}
	wantStat(t, "beta's lock after the reboot", b.lock("f", 2, 0, 0, lockOpts{excl: true}), nlm.StatGranted)
}
