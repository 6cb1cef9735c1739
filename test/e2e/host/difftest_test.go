package host

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/rdmafs/rdmafs/test/e2e/difftest"
)

// runCase runs one script in a new directory under each of two roots and
// returns both runs' results.
func runCase(t *testing.T, c difftest.Case, refRoot, testRoot, name string) (ref, got []difftest.Result) {
	t.Helper()
	var results [2][]difftest.Result
	for i, root := range []string{refRoot, testRoot} {
		dir := filepath.Join(root, []string{"ref-", "test-"}[i]+name)
		if err := os.Mkdir(dir, 0o777); err != nil {
			t.Fatal(err)
		}
		os.Chmod(dir, 0o777)
		run, err := difftest.NewRun(dir, difftest.Users)
		if err != nil {
			t.Fatal(err)
		}
		results[i] = run.Script(c.Ops)
		run.Close()
	}
	return results[0], results[1]
}

// nfs3Times: NFSv3 carries times as unsigned 32-bit seconds; a local file
// system keeps the times set outside that range (the kernel client clamps
// them as rdmafs does: the guest's differential test checks that).
var nfs3Times = difftest.Known{
	Name: "times outside NFSv3's 32-bit range are clamped",
	Match: func(op difftest.Op, a, b difftest.Result) bool {
		if a.Stat == nil || b.Stat == nil || a.Stat.Set == b.Stat.Set {
			return false
		}
		x, y := *a.Stat, *b.Stat
		x.Set, y.Set, x.Changed, y.Changed, x.Ino, y.Ino = "", "", "", "", 0, 0
		x.Atime, y.Atime, x.Mtime, y.Mtime, x.Ctime, y.Ctime = difftest.Time{}, difftest.Time{}, difftest.Time{}, difftest.Time{}, difftest.Time{}, difftest.Time{}
		return x == y
	},
}

// TestDiffLocal runs the scripted cases of the differential test on rdmafs
// mounts over TCP and RDMA and, as the reference, directly on the exported
// directory. The mounts cache no attributes (noac), as a local file system
// has none to cache. The random scripts run in the guest only, against the
// kernel client: a local file system is no oracle for what NFS does later
// than it (a file unlinked while open keeps a hidden name until its last
// close, when the directory changes again; written data reaches the server
// at a flush, when its times change).
func TestDiffLocal(t *testing.T) {
	needHost(t)
	for _, proto := range []struct {
		name  string
		serve []string
	}{{"tcp", nil}, {"rdma", rdmaServe}} {
		t.Run(proto.name, func(t *testing.T) {
			s := startServer(t, "", 0, append([]string{"no_root_squash"}, proto.serve...)...)
			os.Chmod(s.dir, 0o755)
			os.Chmod(filepath.Dir(s.dir), 0o755)
			mnt := s.mount(t, "noac")
			os.Chmod(filepath.Dir(mnt), 0o755)
			for i, c := range difftest.Cases() {
				ref, got := runCase(t, c, s.dir, mnt, fmt.Sprintf("case%d", i))
				diffs, _ := difftest.Compare(c.Ops, ref, got, []difftest.Known{nfs3Times})
				if len(diffs) > 0 {
					t.Error(difftest.Report(c.Name, c.Ops, ref, got, diffs, false))
				}
			}
		})
	}
}
