package host

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestSoftTCPFirstCallAfterRestart: a soft TCP mount whose server was away
// long enough for the reconnect backoff to grow past a call's timeouts
// answers the first call after the server is back at once, as a soft RDMA
// mount does (TestRDMAServerKilled), instead of waiting out the backoff
// and failing with EIO or succeeding seconds later.
func TestSoftTCPFirstCallAfterRestart(t *testing.T) {
	needHost(t)
	s := startServer(t, "", 0, "no_root_squash")
	mnt := s.mount(t, "soft,timeo=10,retrans=2")
	write(t, filepath.Join(mnt, "before"), "x")
	base := connectAttempts(t, mnt)
	s.kill()

	// Calls while the server is away, one after another: each refused
	// connect doubles the backoff, 0.1 s, 0.2 s, ...
	stop := make(chan struct{})
	stopped := make(chan struct{})
	go func() {
		defer close(stopped)
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			os.Stat(filepath.Join(mnt, fmt.Sprintf("away%d", i)))
		}
	}()
	defer func() {
		close(stop)
		<-stopped
	}()
	// The server comes back right after the 7th refused connect, which
	// set the backoff to 6.4 s: longer than the next call's first two
	// tries (1 s and 2 s) together.
	const refused = 7
	for deadline := time.Now().Add(time.Minute); connectAttempts(t, mnt)-base < refused; time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%d connect attempts in a minute of calls to a dead server, want %d", connectAttempts(t, mnt)-base, refused)
		}
	}
	startServer(t, s.dir, s.port, "no_root_squash")

	start := time.Now()
	err := os.WriteFile(filepath.Join(mnt, "after"), []byte("back"), 0o644)
	took := time.Since(start)
	if err != nil {
		t.Fatalf("the first call after the server came back failed after %v: %v", took, err)
	}
	if b, err := os.ReadFile(filepath.Join(s.dir, "after")); err != nil || string(b) != "back" {
		t.Fatalf("server copy of a file written after the restart: %q, %v", b, err)
	}
	if took > time.Second {
		t.Errorf("the first call after the server came back took %v", took)
	} else {
		t.Logf("first call after the restart done in %v", took.Round(time.Millisecond))
	}
}

// connectAttempts is the mount's count of connection attempts, made or
// refused: bind_count of the "xprt: tcp" line of rdmafs stats.
func connectAttempts(t *testing.T, mnt string) int {
	t.Helper()
	code, out := rdmafs(t, 10*time.Second, "stats", mnt)
	if code != 0 {
		t.Fatalf("rdmafs stats %s: exit %d: %s", mnt, code, out)
	}
	for line := range strings.SplitSeq(out, "\n") {
		// xprt: tcp srcport bind_count connect_count ...
		if f := strings.Fields(line); len(f) > 3 && f[0] == "xprt:" && f[1] == "tcp" {
			n, err := strconv.Atoi(f[3])
			if err != nil {
				t.Fatalf("bind_count in %q: %v", line, err)
			}
			return n
		}
	}
	t.Fatalf("no xprt: tcp line in rdmafs stats:\n%s", out)
	return 0
}
