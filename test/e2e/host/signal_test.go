package host

import (
	"bytes"
	"os"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/rdmafs/rdmafs/test/e2e/e2etest"
)

// daemonOf returns the pid of the rdmafs process serving mnt.
func daemonOf(t *testing.T, mnt string) int {
	t.Helper()
	dirs, _ := filepath.Glob("/proc/[0-9]*/cmdline")
	for _, p := range dirs {
		cmdline, err := os.ReadFile(p)
		if err != nil {
			continue
		}
		args := bytes.Split(bytes.TrimRight(cmdline, "\x00"), []byte{0})
		if len(args) > 1 && string(args[0]) == rdmafsBin && string(args[len(args)-1]) == mnt {
			pid, _ := strconv.Atoi(filepath.Base(filepath.Dir(p)))
			return pid
		}
	}
	t.Fatalf("no rdmafs process serves %s", mnt)
	return 0
}

// TestSigtermWritesBack: SIGTERM to the mount's process writes back and
// commits what programs wrote, even into files still open, and unmounts.
func TestSigtermWritesBack(t *testing.T) {
	needHost(t)
	s := startServer(t, "", 0, "no_root_squash")
	mnt := s.mount(t)
	f, err := os.Create(filepath.Join(mnt, "open"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	data := bytes.Repeat([]byte("written, not closed. "), 1000)
	if _, err := f.Write(data); err != nil {
		t.Fatal(err)
	}
	pid := daemonOf(t, mnt)
	if err := syscall.Kill(pid, syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(20 * time.Second)
	if !e2etest.Unmounted(mnt, 20*time.Second) {
		t.Fatal("still mounted 20 s after SIGTERM")
	}
	if got, err := os.ReadFile(filepath.Join(s.dir, "open")); err != nil || !bytes.Equal(got, data) {
		t.Errorf("server copy after SIGTERM: %d bytes (%v), want %d", len(got), err, len(data))
	}
	// The open file still works through the detached mount; at its close
	// the process ends.
	if _, err := f.Write([]byte("more")); err != nil {
		t.Errorf("write to a file open across the unmount: %v", err)
	}
	f.Close()
	for time.Now().Before(deadline) {
		if syscall.Kill(pid, 0) != nil {
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Errorf("rdmafs process %d still runs after its last file closed", pid)
}
