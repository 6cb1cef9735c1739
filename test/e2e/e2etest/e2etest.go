// Package e2etest holds what the host tests (test/e2e/host) and the guest
// tests (test/e2e/guest) both do around a mount: find what is mounted on
// a directory, unmount it, drop the page cache so that reads go to the
// server, and checksum a file.
package e2etest

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// MountInfo returns the file-system type and source of the mount on dir
// (from /proc/self/mountinfo), or ok false if nothing is mounted there.
func MountInfo(dir string) (fstype, source string, ok bool) {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return "", "", false
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		// 36 35 98:0 /mnt1 /mnt2 rw,noatime master:1 - ext3 /dev/root rw,errors=continue
		fields := strings.Fields(sc.Text())
		if len(fields) < 10 || fields[4] != dir {
			continue
		}
		for i, f := range fields {
			if f == "-" && i+2 < len(fields) {
				fstype, source, ok = fields[i+1], fields[i+2], true
			}
		}
	}
	return fstype, source, ok
}

// Mounted reports whether something is mounted on dir.
func Mounted(dir string) bool {
	_, _, ok := MountInfo(dir)
	return ok
}

// Unmounted waits up to limit for nothing to be mounted on dir, and
// reports whether that came.
func Unmounted(dir string, limit time.Duration) bool {
	for deadline := time.Now().Add(limit); Mounted(dir); time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			return false
		}
	}
	return true
}

// Unmount unmounts dir with cmd (fusermount3 -u dir if cmd is empty) and
// checks that nothing is mounted there any more. It does nothing if
// nothing is mounted on dir, so that it may be a test's cleanup whether
// or not the test unmounted. A command that fails is tried again for 3 s
// (EBUSY right after the last close is possible), then the mount is
// detached (umount -l) and the test fails.
func Unmount(t testing.TB, dir string, cmd ...string) {
	t.Helper()
	if !Mounted(dir) {
		return
	}
	if len(cmd) == 0 {
		cmd = []string{"fusermount3", "-u", dir}
	}
	var out []byte
	var err error
	for try := 0; try < 10; try++ {
		if out, err = exec.Command(cmd[0], cmd[1:]...).CombinedOutput(); err == nil {
			break
		}
		time.Sleep(300 * time.Millisecond)
	}
	if err != nil {
		t.Errorf("%s: %v: %s", strings.Join(cmd, " "), err, out)
		exec.Command("umount", "-l", dir).Run()
	}
	if Mounted(dir) {
		t.Errorf("%s is still mounted after %s", dir, strings.Join(cmd, " "))
	}
}

// DropCaches writes dirty pages back and drops the page cache, so that
// the next reads go to the file system (and through an NFS mount, to the
// server).
func DropCaches(t testing.TB) {
	t.Helper()
	syscall.Sync()
	if err := os.WriteFile("/proc/sys/vm/drop_caches", []byte("3"), 0); err != nil {
		t.Fatalf("drop_caches: %v", err)
	}
}

// Sum is a file's SHA-256.
type Sum = [sha256.Size]byte

// SumFile returns the SHA-256 and the size of the file at path.
func SumFile(path string) (Sum, int64, error) {
	var s Sum
	f, err := os.Open(path)
	if err != nil {
		return s, 0, err
	}
	defer f.Close()
	h := sha256.New()
	n, err := io.CopyBuffer(h, f, make([]byte, 1<<20))
	if err != nil {
		return s, n, fmt.Errorf("read %s: %w", path, err)
	}
	h.Sum(s[:0])
	return s, n, nil
}

// FileSum is SumFile for the test's own goroutine: an error fails the test.
func FileSum(t testing.TB, path string) (Sum, int64) {
	t.Helper()
	s, n, err := SumFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return s, n
}

// Output is the output of a process that a test reads while the process
// still writes it (rdmafs -f's log, say).
type Output struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (o *Output) Write(p []byte) (int, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.b.Write(p)
}

func (o *Output) String() string {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.b.String()
}
