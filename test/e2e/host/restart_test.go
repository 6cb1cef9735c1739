package host

import (
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/rdmafs/rdmafs/test/e2e/e2etest"
)

// TestServerRestartDuringWrite kills `rdmafs serve` in the middle of a
// large write under a hard mount and starts it again: the write goes on,
// and after close the server's copy has the checksum of what was written.
func TestServerRestartDuringWrite(t *testing.T) {
	needHost(t)
	s := startServer(t, "", 0, "no_root_squash")
	testRestartDuringWrite(t, s, func() *server { return startServer(t, s.dir, s.port, "no_root_squash") })
}

// testRestartDuringWrite writes 512 MiB through a hard mount of s, kills s
// a quarter of the way and starts it again with restart.
func testRestartDuringWrite(t *testing.T, s *server, restart func() *server) {
	mnt := s.mount(t, "hard,timeo=20")
	const size = 512 << 20
	type result struct {
		sum string
		err error
	}
	// The writer is another process: a fork of this one while it had a
	// file of the mount open would flush that file at exec, and wait for
	// the server this test is about to start again.
	done := make(chan result, 1)
	go func() {
		cmd := exec.Command(testBin, "-test.run=^$", "write-random", filepath.Join(mnt, "big"))
		cmd.Env = append(os.Environ(), asUserEnv+"=1", "RDMAFS_TEST_SIZE="+strconv.Itoa(size), "RDMAFS_TEST_SEED=7")
		out, err := cmd.Output()
		sum := strings.TrimSpace(string(out))
		if err == nil && len(sum) != 64 {
			err = fmt.Errorf("writer failed with errno %s", sum)
		}
		done <- result{sum: sum, err: err}
	}()

	// Kill the server once a fair part of the file has reached it.
	serverCopy := filepath.Join(s.dir, "big")
	deadline := time.Now().Add(time.Minute)
	for {
		if st, err := os.Stat(serverCopy); err == nil && st.Size() > 64<<20 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the write did not reach the server")
		}
		time.Sleep(10 * time.Millisecond)
	}
	s.kill()
	t.Log("server killed mid-write")
	time.Sleep(2 * time.Second)
	restart()
	t.Log("server restarted")

	select {
	case r := <-done:
		if r.err != nil {
			t.Fatalf("write across the restart: %v", r.err)
		}
		got, n := e2etest.FileSum(t, serverCopy)
		if hex.EncodeToString(got[:]) != r.sum || n != size {
			t.Fatalf("server copy: %d bytes, sha256 %x, want %d bytes %s", n, got, int64(size), r.sum)
		}
		e2etest.DropCaches(t)
		if got, _ := e2etest.FileSum(t, filepath.Join(mnt, "big")); hex.EncodeToString(got[:]) != r.sum {
			t.Fatalf("read back through the mount: sha256 %x, want %s", got, r.sum)
		}
	case <-time.After(3 * time.Minute):
		t.Fatal("the write did not finish after the server came back")
	}
}

// TestSoftMountGivesUp: with soft, a call to a server that is gone fails
// with EIO after its retransmissions instead of hanging.
func TestSoftMountGivesUp(t *testing.T) {
	needHost(t)
	s := startServer(t, "", 0, "no_root_squash")
	mnt := s.mount(t, "soft,timeo=5,retrans=1,actimeo=0")
	write(t, filepath.Join(mnt, "f"), "x")
	s.kill()
	start := time.Now()
	_, err := os.Stat(filepath.Join(mnt, "f"))
	if !errors.Is(err, syscall.EIO) {
		t.Fatalf("stat on a soft mount of a dead server: %v, want EIO", err)
	}
	if d := time.Since(start); d > 30*time.Second {
		t.Errorf("took %v to give up", d)
	}
}
