package workload

import (
	"fmt"
	"os"
	"testing"
	"time"
)

// SmallFileSizes are the sizes of the files that RunSmall writes: every
// way a call and its reply go over RPC-over-RDMA (inline, read chunk,
// write chunk) with 1 KiB and 4 KiB inline thresholds, in little time.
var SmallFileSizes = []int{0, 1000, 4096, 4097, 65535, 128<<10 + 3, 1 << 20, 3<<20 + 5}

// SmallListEntries is the number of entries of the directory RunSmall
// lists: enough for replies that need a reply chunk.
const SmallListEntries = 200

// RunSmall is a short Run, for tests that run the workload many times
// (a matrix of transport options): files of [SmallFileSizes] written,
// read back and checked on the server side, an overwrite and an append,
// rename, symlink, unlink and a listing of [SmallListEntries] entries.
func RunSmall(t testing.TB, mnt string, check Checker) {
	t.Helper()
	if check == nil {
		t.Fatalf("workload.RunSmall: nil Checker")
	}
	w := newRunner(t, mnt, check, "small")
	start := time.Now()
	w.step("files", w.smallFiles)
	w.step("rename", w.rename)
	w.step("symlink", w.symlink)
	w.step("unlink", w.unlink)
	w.step("readdir", w.smallListing)
	w.step("cleanup", func() { w.removeAll(w.dir) })
	t.Logf("workload: small run done in %v", time.Since(start).Round(time.Millisecond))
}

func (w *runner) smallFiles() { w.filesOf(SmallFileSizes) }

// smallListing lists a directory of SmallListEntries entries in batches
// and checks that each name comes once.
func (w *runner) smallListing() {
	d := "many"
	w.mkdir(w.rel(d))
	for i := range SmallListEntries {
		if err := os.WriteFile(w.abs(fmt.Sprintf("%s/entry-%04d", d, i)), nil, 0o644); err != nil {
			w.fatalf("create %s/entry-%04d: %v", d, i, err)
		}
	}
	seen := w.countNames(d, SmallListEntries)
	for i := range SmallListEntries {
		if name := fmt.Sprintf("entry-%04d", i); seen[name] != 1 {
			w.errorf("listing of %s: %s seen %d times, want once", d, name, seen[name])
		}
	}
	if len(seen) != SmallListEntries {
		w.errorf("listing of %s: %d names, want %d", d, len(seen), SmallListEntries)
	}
}
