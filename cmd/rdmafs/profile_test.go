package main

import (
	"bytes"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"
)

// TestSignaledProfile: SIGUSR1 starts a CPU profile, SIGUSR2 writes it
// under PATH.mount.N, complete, once it is done; a stop without a start
// writes nothing.
func TestSignaledProfile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "cpu")
	t.Setenv(profileSignaledEnv, path)
	stop := startProfile(".mount")
	defer stop()
	self := os.Getpid()
	for n := 1; n <= 2; n++ {
		syscall.Kill(self, syscall.SIGUSR1)
		for end := time.Now().Add(50 * time.Millisecond); time.Now().Before(end); {
		}
		syscall.Kill(self, syscall.SIGUSR2)
		name := path + ".mount." + string(rune('0'+n))
		var data []byte
		for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
			if b, err := os.ReadFile(name); err == nil {
				data = b
				break
			}
		}
		// a pprof profile is gzipped protobuf
		if !bytes.HasPrefix(data, []byte{0x1f, 0x8b}) {
			t.Fatalf("profile %d: %s holds %d bytes, not a gzipped profile", n, name, len(data))
		}
	}
	syscall.Kill(self, syscall.SIGUSR2)
	time.Sleep(100 * time.Millisecond)
	if m, _ := filepath.Glob(path + ".mount.*"); len(m) != 2 {
		t.Errorf("files %q, want the two profiles only", m)
	}
}
