package host

import (
	"context"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/rdmafs/rdmafs/test/e2e/e2etest"
)

// Every way to unmount a hard mount whose server is dead returns within
// seconds and leaves nothing mounted (README, "When the server is gone"):
// umount(8) stats and statfs()es the mount point before it unmounts,
// which rdmafs answers from the last values seen once the server has not
// answered for a major timeout; umount -f aborts the FUSE connection;
// umount -l and fusermount3 -u do not ask the file system anything.

// unmountWays are the commands a user would try, the mount point last.
var unmountWays = [][]string{
	{"umount"},
	{"umount", "-f"},
	{"umount", "-l"},
	{"fusermount3", "-u"},
}

func TestUnmountDeadHardMountEveryWay(t *testing.T) {
	needHost(t)
	// timeo=5 (0.5 s), retrans=1: a major timeout 1.5 s after the first
	// unanswered call (the second try waits twice as long).
	const opts = "hard,timeo=5,retrans=1"
	const within = 10 * time.Second
	for _, proto := range []string{"tcp", "rdma"} {
		for _, way := range unmountWays {
			name := proto + "/" + strings.Join(way, "_")
			t.Run(name, func(t *testing.T) {
				var s *server
				if proto == "rdma" {
					s = startServer(t, "", 0, append(rdmaServe, "no_root_squash")...)
				} else {
					s = startServer(t, "", 0, "no_root_squash")
				}
				mnt := s.mount(t, opts)
				writeRandom(t, filepath.Join(mnt, "f"), 1, 4096)
				if out, err := exec.Command("stat", "-f", mnt).CombinedOutput(); err != nil {
					t.Fatalf("stat -f %s: %v: %s", mnt, err, out)
				}
				s.kill()

				ctx, cancel := context.WithTimeout(context.Background(), 3*within)
				defer cancel()
				args := append(way[1:len(way):len(way)], mnt)
				start := time.Now()
				out, err := exec.CommandContext(ctx, way[0], args...).CombinedOutput()
				took := time.Since(start)
				if err != nil {
					t.Fatalf("%s %s on a dead hard mount (%s): %v after %v: %s", way[0], strings.Join(args, " "), proto, err, took.Round(time.Millisecond), out)
				}
				if took > within {
					t.Errorf("%s %s on a dead hard mount (%s) took %v; want under %v", way[0], strings.Join(args, " "), proto, took.Round(time.Millisecond), within)
				}
				if e2etest.Mounted(mnt) {
					t.Errorf("%s still in /proc/mounts after %s %s returned", mnt, way[0], strings.Join(args, " "))
				}
				t.Logf("%s %s: %v", way[0], strings.Join(args, " "), took.Round(time.Millisecond))
			})
		}
	}
}
