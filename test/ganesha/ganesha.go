// Package ganesha runs NFS-Ganesha, the user-space NFS server (Debian's
// nfs-ganesha with its VFS back end), for the module's tests: inside a
// network and mount namespace of the test's own (package netns), with the
// rpcbind netns starts there, an rpc.statd for its lock manager, and a
// tmpfs export, so that nothing of the host's is used or changed.
//
// A test calls Rerun first; outside the namespace it runs the test again
// inside and returns false, inside it returns true and the server answers
// on 127.0.0.1, exporting Export.
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

// The paths of the server inside its namespace, under a tmpfs of its own.
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
// clients that held locks before a restart need.
func (c Config) config() string {
	protocols := "3"
	if c.NFSv4Only {
		protocols = "4"
	}
	return fmt.Sprintf(`NFS_CORE_PARAM { Protocols = %[1]s; }
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

// Setup is the shell script (for netns.Script) that starts rpc.statd and
// ganesha.nfsd in the namespace and waits until NFS answers over TCP (and
// the lock manager, with NFS version 3); both are killed when the script
// ends. The namespace needs a tmpfs on /var/lib (Private).
func Setup(c Config) string {
	var s strings.Builder
	fmt.Fprintf(&s, "mkdir -p /var/lib/nfs/sm /var/lib/nfs/sm.bak /var/lib/nfs/ganesha /run/ganesha %s\n", Export)
	s.WriteString("rpc.statd -F --no-notify & pids=\"$pids $!\"\n")
	fmt.Fprintf(&s, "cat > %s <<'EOF'\n%sEOF\n", conf, c.config())
	fmt.Fprintf(&s, "ganesha.nfsd -F -f %s -L %s -p /run/ganesha/ganesha.pid -N NIV_EVENT & pids=\"$pids $!\"\n", conf, LogFile)
	ready := "rpcinfo -T tcp 127.0.0.1 nfs 3 && rpcinfo -T tcp 127.0.0.1 nlockmgr 4"
	if c.NFSv4Only {
		ready = "rpcinfo -T tcp 127.0.0.1 nfs 4"
	}
	fmt.Fprintf(&s, `ready=
for i in $(seq 600); do
	if { %s; } >/dev/null 2>&1; then ready=1; break; fi
	sleep 0.05
done
if [ -z "$ready" ]; then echo "ganesha.nfsd did not answer within 30 s:"; cat %s; exit 1; fi
`, ready, LogFile)
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
