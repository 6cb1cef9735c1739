package fs

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// TestReadFailureLogged: a READ the server fails (here: of a file removed
// on the server, whose handle went stale) returns the server's errno to
// the program and is logged, with what the server answered, at most once
// a second, the next line saying how many were held back: the program
// may say no more than "I/O error".
func TestReadFailureLogged(t *testing.T) {
	h := newHarness(t, harnessConfig{})
	var mu sync.Mutex
	var logs []string
	h.fs.cfg.Logf = func(format string, args ...any) {
		mu.Lock()
		defer mu.Unlock()
		logs = append(logs, fmt.Sprintf(format, args...))
	}
	failedReads := func() []string {
		mu.Lock()
		defer mu.Unlock()
		var out []string
		for _, l := range logs {
			if strings.HasPrefix(l, "READ of") {
				out = append(out, l)
			}
		}
		return out
	}
	h.writeServerFile("f", []byte("data"), 0o644)
	node := h.mustLookup(rootNode, "f")
	fh, _, en := h.open(node, syscall.O_RDONLY|syscall.O_DIRECT)
	if en != 0 {
		t.Fatalf("open: %v", en)
	}
	if err := os.Remove(filepath.Join(h.dir, "f")); err != nil {
		t.Fatal(err)
	}
	for range 3 {
		if _, en := h.read(node, fh, 0, 4); en != syscall.ESTALE {
			t.Fatalf("READ of a file removed on the server: %v, want ESTALE", en)
		}
	}
	got := failedReads()
	if len(got) != 1 || !strings.Contains(got[0], "failed with "+syscall.ESTALE.Error()) {
		t.Fatalf("3 failed READs in a row logged %q, want one line naming ESTALE", got)
	}
	time.Sleep(1100 * time.Millisecond)
	h.read(node, fh, 0, 4)
	if got = failedReads(); len(got) != 2 || !strings.Contains(got[1], "and 2 more READs failed") {
		t.Fatalf("a READ failing a second later logged %q, want a second line counting the 2 held back", got)
	}
	t.Logf("%s", strings.Join(got, "\n"))
}
