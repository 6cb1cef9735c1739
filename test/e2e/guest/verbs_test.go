package guest

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestVerbsConformance runs the tests of the libibverbs provider of ./verbs
// (built by build.sh from every cgo package under ./verbs that has tests)
// against the rxe device. They get RDMAFS_VERBS_DEVICE and RDMAFS_VERBS_ADDR.
func TestVerbsConformance(t *testing.T) {
	e := lab(t)
	bins, _ := filepath.Glob(filepath.Join(e.VerbsTests, "*.test"))
	if len(bins) == 0 {
		t.Fatalf("no verbs test binary in %s: build.sh builds one for each cgo package with tests under ./verbs", e.VerbsTests)
	}
	for _, bin := range bins {
		t.Run(strings.TrimSuffix(filepath.Base(bin), ".test"), func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
			defer cancel()
			args := []string{"-test.v", "-test.count=1"}
			if r := os.Getenv("LAB_VERBS_RUN"); r != "" {
				args = append(args, "-test.run", r)
			}
			cmd := exec.CommandContext(ctx, bin, args...)
			cmd.Env = append(os.Environ(), "RDMAFS_VERBS_DEVICE="+e.RXE, "RDMAFS_VERBS_ADDR="+e.Addr)
			out, err := cmd.CombinedOutput()
			t.Logf("%s:\n%s", bin, out)
			switch {
			case ctx.Err() != nil:
				t.Fatalf("%s timed out", bin)
			case err != nil:
				t.Fatalf("%s: %v", bin, err)
			case strings.Contains(string(out), "no tests to run"):
				t.Fatalf("%s ran no test", bin)
			case !strings.Contains(string(out), "--- PASS"):
				t.Fatalf("%s passed no test (all skipped?)", bin)
			}
		})
	}
}
