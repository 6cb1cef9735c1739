package guest

import (
	"fmt"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
)

// getlkEnv makes the test binary, run as a child of a test, ask F_GETLK
// instead of running tests: what a process other than a lock's holder
// sees of it.
const getlkEnv = "RDMAFS_GUEST_GETLK"

func TestMain(m *testing.M) {
	if path := os.Getenv(getlkEnv); path != "" {
		os.Exit(getlkChild(path))
	}
	os.Exit(m.Run())
}

// getlkChild asks F_GETLK of a write lock of the whole of path and prints
// the lock in the way as "type start len pid".
func getlkChild(path string) int {
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer f.Close()
	lk := syscall.Flock_t{Type: syscall.F_WRLCK}
	if err := syscall.FcntlFlock(f.Fd(), syscall.F_GETLK, &lk); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	fmt.Printf("%d %d %d %d\n", lk.Type, lk.Start, lk.Len, lk.Pid)
	return 0
}

// getlk runs getlkChild on path in a child process and returns what it
// printed.
func getlk(t *testing.T, path string) string {
	t.Helper()
	cmd := exec.Command(os.Args[0])
	cmd.Env = append(os.Environ(), getlkEnv+"="+path)
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("F_GETLK of %s in a child: %v", path, err)
	}
	return strings.TrimSpace(string(out))
}
