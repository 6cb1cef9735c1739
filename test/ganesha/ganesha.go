// Package ganesha runs NFS-Ganesha, the user-space NFS server (Debian's
// nfs-ganesha with its VFS back end), for the module's tests, as another
// host would: in a network namespace of its own (with its own rpcbind and
// rpc.statd), reached from the test's namespace (package netns) over a
// veth pair, so that the test's side can run a lock manager of its own (the
// kernel client's lockd, or rdmafs's) and nothing of the host's is used or
// changed. The export is a tmpfs both sides see.
//
// A test calls Rerun first; outside the namespace it runs the test again
// inside and returns false, inside it returns true and the server answers
// on Addr, exporting Export.
package ganesha

import (
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/rdmafs/rdmafs/test/netns"
)

// Tools are the programs a Ganesha namespace needs beside netns.Tools.
var Tools = []string{"ganesha.nfsd", "rpc.statd"}

// Source is the export as a mount names it.
const Source = Addr + ":" + Export

// Addr is the server's address; the test's side is ClientAddr.
const (
	Addr       = "192.168.209.1"
	ClientAddr = "192.168.209.2"
)

// The paths of the server, under a tmpfs of the test's namespace.
const (
	dir = "/var/lib/rdmafs-ganesha"
	// Export is the exported directory, and the export's path in MOUNT.
	Export = dir + "/export"
	// LogFile is the server's log.
	LogFile = dir + "/ganesha.log"
	conf    = dir + "/ganesha.conf"
)

// Config says what the server offers.
type Config struct {
	// NFSv4Only exports with NFS version 4 alone, as several cloud NFS
	// services do: no MOUNT protocol, no NLM. The default is NFS
	// version 3 with MOUNT and NLM.
	NFSv4Only bool
}

// config is ganesha.conf: one VFS export of Export, read-write, root not
// squashed (the tests run as root), AUTH_SYS. Graceless: a new server
// grants locks at once instead of after a 90 s grace period, which only
// clients that held locks before a restart need. No RQUOTA: its fixed
// port, 875, is a reserved port that rpc.statd may have taken already
// (it binds one at random), and then Ganesha does not start.
func (c Config) config() string {
	protocols := "3"
	if c.NFSv4Only {
		protocols = "4"
	}
	return fmt.Sprintf(`NFS_CORE_PARAM { Protocols = %[1]s; Enable_RQUOTA = false; }
NFSV4 { Graceless = true; }
EXPORT {
	Export_Id = 1;
	Path = %[2]s;
	Pseudo = %[2]s;
	Protocols = %[1]s;
	Access_Type = RW;
	Squash = No_Root_Squash;
	SecType = sys;
	FSAL { Name = VFS; }
}
`, protocols, Export)
}

// Setup is the shell script (for netns.Script) that makes the server's
// namespace, joined to the test's by a veth pair, starts rpcbind,
// rpc.statd and ganesha.nfsd there, and waits until NFS answers over TCP
// (and the lock manager, with NFS version 3); they end when the script
// does. It starts an rpc.statd on the test's side too, which the kernel
// client's lock manager needs. The namespace needs a tmpfs on /var/lib
// (Private).
func Setup(c Config) string {
	var s strings.Builder
	fmt.Fprintf(&s, `mkdir -p %[1]s/server-sm/sm %[1]s/server-sm/sm.bak %[1]s/client-sm/sm %[1]s/client-sm/sm.bak /var/lib/nfs/ganesha %[2]s
ip link add rdmafs-gn0 type veth peer name rdmafs-gn1
ip addr add %[3]s/24 dev rdmafs-gn0
ip link set rdmafs-gn0 up
ip netns add rdmafs-ganesha
ip link set rdmafs-gn1 netns rdmafs-ganesha
rpc.statd -F --no-notify -P %[1]s/client-sm & pids="$pids $!"
cat > %[4]s <<'EOF'
%[5]sEOF
`, dir, Export, ClientAddr, conf, c.config())
	// The server's processes write to a file of their own, not to the
	// test's output, and end with its namespace's at the script's end.
	fmt.Fprintf(&s, `atexit="$atexit; ip netns pids rdmafs-ganesha | xargs -r kill"
ip netns exec rdmafs-ganesha sh -c '
set -e
mount -t tmpfs rdmafs-ganesha-run /run
mkdir /run/ganesha
ip link set lo up
ip addr add %[1]s/24 dev rdmafs-gn1
ip link set rdmafs-gn1 up
rpcbind -f -w &
for i in $(seq 100); do rpcinfo -p 127.0.0.1 >/dev/null 2>&1 && break; sleep 0.05; done
rpc.statd -F --no-notify -P %[2]s/server-sm &
for i in $(seq 100); do rpcinfo -T tcp 127.0.0.1 status 1 >/dev/null 2>&1 && break; sleep 0.05; done
exec ganesha.nfsd -F -f %[3]s -L %[4]s -p /run/ganesha/ganesha.pid -N NIV_EVENT
' >%[2]s/server.out 2>&1 &
`, Addr, dir, conf, LogFile)
	ready := fmt.Sprintf("rpcinfo -T tcp %[1]s nfs 3 && rpcinfo -T tcp %[1]s nlockmgr 4 && rpcinfo -T tcp 127.0.0.1 status 1", Addr)
	if c.NFSv4Only {
		ready = fmt.Sprintf("rpcinfo -T tcp %s nfs 4", Addr)
	}
	fmt.Fprintf(&s, `ready=
for i in $(seq 600); do
	if { %s; } >/dev/null 2>&1; then ready=1; break; fi
	sleep 0.05
done
if [ -z "$ready" ]; then echo "ganesha.nfsd did not answer within 30 s:"; cat %s %s/server.out; exit 1; fi
`, ready, LogFile, dir)
	return s.String()
}

// Private are the directories the namespace needs a tmpfs on.
var Private = []string{"/var/lib"}

// Need skips t unless it runs as root with Ganesha installed.
func Need(t testing.TB) {
	t.Helper()
	netns.Need(t, Tools...)
}

// Rerun runs the calling test again inside a namespace of its own where
// Ganesha serves Export as c says, and returns false; inside, where env is
// set, it returns true.
func Rerun(t *testing.T, env string, c Config) bool {
	t.Helper()
	if os.Getenv(env) == "" {
		Need(t)
	}
	return netns.Rerun(t, env, Setup(c), Private...)
}

// Log returns the server's log, for a failing test to show.
func Log() string {
	b, err := os.ReadFile(LogFile)
	if err != nil {
		return err.Error()
	}
	return string(b)
}
