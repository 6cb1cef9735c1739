package guest

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/rdmafs/rdmafs/test/e2e/difftest"
	"github.com/rdmafs/rdmafs/test/e2e/exerciser"
	"github.com/rdmafs/rdmafs/test/seed"
)

// The client's conformance, with the kernel NFS client as the oracle: the
// same scripts of system calls, as root and as two users, on a kernel NFS
// mount and on rdmafs mounts of the same knfsd export, must give the same
// results, but for the differences listed in knownDifferences (and in
// test/e2e/README.md, with their reasons).

// knownDifferences are the intended differences between rdmafs and the
// kernel client; test/e2e/README.md gives the reason of each.
var knownDifferences = []difftest.Known{hiddenLink, writeToUnsearchableDir, failedInUnwritableDir, pageFillRefused, cachedReadWithoutPermission}

// hiddenLink: rdmafs hides every name of an open file that is removed
// while the file has other links; the kernel client hides only the name
// the file was opened through (a dentry in use) and removes the others.
// Link counts and listings differ from then on until the last close, and
// what a script does meanwhile (rmdir of the directory, a stat's times)
// can leave the runs apart after it: the rest of the script is not
// compared.
var hiddenLink = difftest.Known{
	Name:     "a removed name of an open file with other links is hidden until the last close",
	Diverges: func(op difftest.Op, a, b difftest.Result) bool { return a.Event == difftest.UnlinkedOpenLink },
}

// writeToUnsearchableDir: access(W_OK) of a directory whose mode bits deny
// the caller search permission. The kernel client asks the server, which
// refuses (knfsd grants no change to a directory that cannot be searched);
// with default_permissions FUSE answers from the mode bits itself, never
// asking rdmafs. Creating or removing a name there still fails as on the
// kernel client: the name's lookup needs search permission.
var writeToUnsearchableDir = difftest.Known{
	Name: "access(W_OK) of a directory the caller may not search follows the mode bits",
	Match: func(op difftest.Op, a, b difftest.Result) bool {
		return a.Event == difftest.WriteToUnsearchableDir && a.Errno == "EACCES" && b.Errno == ""
	},
}

// failedInUnwritableDir: a change of a name in a directory the caller may
// not write fails on both, with EACCES on rdmafs, where the kernel client,
// which leaves that check to the server, may fail first for a reason it
// sees itself (rmdir of a file: ENOTDIR). With default_permissions FUSE
// checks the directory's mode bits before anything else, as a local file
// system does.
var failedInUnwritableDir = difftest.Known{
	Name: "a change in a directory the caller may not write fails with EACCES first",
	Match: func(op difftest.Op, a, b difftest.Result) bool {
		return a.Event == difftest.FailedInUnwritableDir && a.Errno != "" && b.Errno == "EACCES"
	},
}

// pageFillRefused: a write through a read-write descriptor to a file the
// caller may no longer read. The kernel client first reads a page it does
// not hold (read-modify-write), which the server refuses, so whether the
// write fails with EACCES depends on what its page cache kept; a write
// that went into the cache then fails to reach the server, and later
// fsyncs of the file report it. The kernel client differs from itself
// here, run to run: when the results differ, the rest of the script is
// not compared.
var pageFillRefused = difftest.Known{
	Name: "a write to a file the caller may not read depends on the kernel client's page cache",
	Diverges: func(op difftest.Op, a, b difftest.Result) bool {
		return a.Event == difftest.WriteWithoutRead && a.String() != b.String()
	},
}

// cachedReadWithoutPermission: a read through a descriptor of a file the
// caller may no longer read. Both clients answer from their page cache as
// far as it holds the range, and the server refuses the rest; the pages
// each holds differ (FUSE's readahead is not the NFS client's), so one may
// read more than the other, or nothing (EACCES).
var cachedReadWithoutPermission = difftest.Known{
	Name: "a read of a file the caller may no longer read returns what the page cache holds",
	Match: func(op difftest.Op, a, b difftest.Result) bool {
		cached := func(r difftest.Result) bool { return r.Errno == "EACCES" || r.Errno == "" && r.Ret <= op.Len }
		return a.Event == difftest.ReadWithoutRead && cached(a) && cached(b)
	},
}

// shared makes a directory under the export that every user may work in,
// through the mount mnt, and returns its path relative to the export.
func shared(t *testing.T, mnt, rel string) string {
	t.Helper()
	p := filepath.Join(mnt, rel)
	if err := os.MkdirAll(p, 0o777); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(p, 0o777); err != nil {
		t.Fatal(err)
	}
	return rel
}

// reach lets every user walk to the mount point mnt.
func reach(t *testing.T, mnt string) {
	t.Helper()
	for d := mnt; d != "/"; d = filepath.Dir(d) {
		if err := os.Chmod(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
}

// runScript runs c in a new directory rel under mnt.
func runScript(t *testing.T, c difftest.Case, mnt, rel string) []difftest.Result {
	t.Helper()
	shared(t, mnt, rel)
	run, err := difftest.NewRun(filepath.Join(mnt, rel), difftest.Users)
	if err != nil {
		t.Fatal(err)
	}
	defer run.Close()
	return run.Script(c.Ops)
}

// diffSeedEnv names the seed of a test's random scripts or operations:
// it replays one; diffSeedEnv=random draws a new one (make e2e-soak does,
// to look for new differences); unset, the test uses the seed it has in
// `make e2e` (below), so that CI checks the same scripts every time and a
// failure there is a change in rdmafs, not a new draw.
const diffSeedEnv = "RDMAFS_DIFF_SEED"

// fullReport, from RDMAFS_DIFF_TRACE=1, makes a differing script's report
// show every step, not only those before each difference: what a replay
// needs to tell how the runs' states parted.
var fullReport = os.Getenv("RDMAFS_DIFF_TRACE") == "1"

// The seeds of `make e2e`, each drawn once and seen to pass.
const (
	kernelClientSeed = 1796062771435026640
	serveSeed        = 1796062800712805210
	exerciserSeed    = 1796062829546641150
)

// TestDifferentialKernelClient runs the scripted cases and random scripts
// on the kernel client's mount and on rdmafs mounts over TCP and RDMA, and
// compares every result.
func TestDifferentialKernelClient(t *testing.T) {
	e := lab(t)
	ref := mountKernel(t, e, "tcp")
	under := map[string]string{
		"rdmafs over tcp":  mountRdmafs(t, e, "proto=tcp,vers=3"),
		"rdmafs over rdma": mountRdmafs(t, e, "proto=rdma,vers=3"),
	}
	differential(t, ref, under, knownDifferences, kernelClientSeed)
}

// TestDifferentialServe runs the same scripts through the kernel client on
// knfsd and on `rdmafs serve` (over TCP and RDMA), exported as knfsd
// exports here (no_root_squash, insecure), and compares every result: the
// server's fidelity, with knfsd as the oracle.
func TestDifferentialServe(t *testing.T) {
	e := lab(t)
	bin := rdmafsBin(t, e)
	ref := mountKernel(t, e, "tcp")
	dir := t.TempDir()
	if err := os.Chmod(dir, 0o777); err != nil {
		t.Fatal(err)
	}
	port := startServe(t, e, bin, dir, serveRDMAPort, "no_root_squash,insecure")
	under := map[string]string{
		"rdmafs serve over tcp":  mountKernelOnServe(t, e, port, serveRDMAPort, "tcp"),
		"rdmafs serve over rdma": mountKernelOnServe(t, e, port, serveRDMAPort, "rdma"),
	}
	differential(t, ref, under, knownServeDifferences, serveSeed)
}

// knownServeDifferences are the intended differences between `rdmafs
// serve` and knfsd; test/e2e/README.md gives the reason of each.
var knownServeDifferences = []difftest.Known{pageFillRefused, cachedReadWithoutPermission}

// differential runs every case on the reference mount ref and on each mount
// of under, each in a new directory, and compares the results.
func differential(t *testing.T, ref string, under map[string]string, known []difftest.Known, fixedSeed uint64) {
	for _, mnt := range append([]string{ref}, mapValues(under)...) {
		reach(t, mnt)
	}
	base := fmt.Sprintf("diff-%d", time.Now().UnixNano())
	shared(t, ref, base)
	s := seed.Fixed(t, diffSeedEnv, fixedSeed) // of the random scripts
	scripts := 2
	if n, err := strconv.Atoi(os.Getenv("RDMAFS_DIFF_SCRIPTS")); err == nil && n > 0 {
		scripts = n
	}
	cases := difftest.Cases()
	for i := range scripts {
		cases = append(cases, difftest.Random(s+uint64(i), 300))
	}
	for i, c := range cases {
		t.Run(c.Name, func(t *testing.T) {
			want := runScript(t, c, ref, filepath.Join(base, fmt.Sprintf("%d-reference", i)))
			for j, name := range mapKeys(under) {
				rel := filepath.Join(base, fmt.Sprintf("%d-under-test-%d", i, j))
				got := runScript(t, c, under[name], rel)
				diffs, explained := difftest.Compare(c.Ops, want, got, known)
				if len(diffs) > 0 {
					t.Errorf("%s against the reference:\n%s", name, difftest.Report(c.Name, c.Ops, want, got, diffs, fullReport))
				}
				for k, n := range explained {
					t.Logf("%s: %d results differ as known: %s", name, n, k)
				}
			}
		})
	}
}

func mapKeys(m map[string]string) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

func mapValues(m map[string]string) []string {
	var v []string
	for _, k := range mapKeys(m) {
		v = append(v, m[k])
	}
	return v
}

// TestExerciserKnfsd runs the random file exerciser through two mounts of
// the knfsd export: the kernel client's first (which proves the model), then
// rdmafs's over RDMA.
func TestExerciserKnfsd(t *testing.T) {
	e := lab(t)
	s := seed.Fixed(t, diffSeedEnv, exerciserSeed)
	ops := 4000
	if n, err := strconv.Atoi(os.Getenv("RDMAFS_EXERCISER_OPS")); err == nil && n > 0 {
		ops = n
	}
	const proto = "rdma"
	for _, client := range []string{"kernel", "rdmafs"} {
		t.Run(client, func(t *testing.T) {
			var a, b string
			if client == "kernel" {
				a, b = mountKernel(t, e, "rdma"), mountKernel(t, e, "tcp")
			} else {
				a, b = mountRdmafs(t, e, "proto="+proto+",vers=3"), mountRdmafs(t, e, "proto="+proto+",vers=3")
			}
			dir := fmt.Sprintf("exerciser-%s-%d", client, time.Now().UnixNano())
			t.Logf("seed %d, %d operations", s, ops)
			start := time.Now()
			if err := exerciser.Run(exerciser.Config{Mounts: []string{a, b}, Dir: dir, Seed: s, Ops: ops}); err != nil {
				t.Fatal(err)
			}
			t.Logf("%d operations in %v", ops, time.Since(start).Round(time.Millisecond))
		})
	}
}
