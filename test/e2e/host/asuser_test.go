package host

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
)

// A test acts as another user by running the test binary again with other
// credentials; the child performs one operation and reports its errno.

const asUserEnv = "RDMAFS_TEST_AS_USER"

// asUser performs op ("read", "write", "create", "mkdir", "access-r",
// "access-w", "unlink") on path as uid, gid and groups, and returns the
// errno it got (0 for success).
func asUser(t *testing.T, uid, gid uint32, groups []uint32, op, path string) syscall.Errno {
	t.Helper()
	cmd := exec.Command(testBin, "-test.run=^$", op, path)
	cmd.Env = append(os.Environ(), asUserEnv+"=1")
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uid, Gid: gid, Groups: groups}}
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("%s %s as uid %d: %v", op, path, uid, err)
	}
	n, err := strconv.Atoi(strings.TrimSpace(string(out)))
	if err != nil {
		t.Fatalf("%s %s as uid %d: output %q", op, path, uid, out)
	}
	return syscall.Errno(n)
}

// runAsUser is the child's side: args are op and path.
func runAsUser(_ string, args []string) int {
	op, path := args[0], args[1]
	var err error
	switch op {
	case "read":
		_, err = os.ReadFile(path)
	case "write":
		var f *os.File
		if f, err = os.OpenFile(path, os.O_WRONLY, 0); err == nil {
			_, err = f.WriteString("x")
			if cerr := f.Close(); err == nil {
				err = cerr
			}
		}
	case "create":
		var f *os.File
		if f, err = os.OpenFile(path, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o644); err == nil {
			err = f.Close()
		}
	case "mkdir":
		err = os.Mkdir(path, 0o755)
	case "unlink":
		err = os.Remove(path)
	case "access-r":
		err = syscall.Access(path, 4)
	case "access-w":
		err = syscall.Access(path, 2)
	case "write-random":
		// Writes RDMAFS_TEST_SIZE bytes of seed RDMAFS_TEST_SEED and
		// prints their sha256 instead of an errno.
		size, _ := strconv.ParseInt(os.Getenv("RDMAFS_TEST_SIZE"), 10, 64)
		seed, _ := strconv.ParseUint(os.Getenv("RDMAFS_TEST_SEED"), 10, 64)
		var sum [32]byte
		if sum, err = writeRandomFile(path, seed, size); err == nil {
			fmt.Printf("%x\n", sum)
			return 0
		}
	case "getlk":
		// F_GETLK of a write lock of the whole file; prints the lock
		// in the way as "type start len pid" instead of an errno.
		var f *os.File
		if f, err = os.OpenFile(path, os.O_RDWR, 0); err == nil {
			lk := syscall.Flock_t{Type: syscall.F_WRLCK}
			if err = syscall.FcntlFlock(f.Fd(), syscall.F_GETLK, &lk); err == nil {
				fmt.Printf("%d %d %d %d\n", lk.Type, lk.Start, lk.Len, lk.Pid)
				return 0
			}
		}
	default:
		err = fmt.Errorf("unknown op %s", op)
	}
	var en syscall.Errno
	switch {
	case err == nil:
		fmt.Println(0)
	case errors.As(err, &en):
		fmt.Println(int(en))
	default:
		fmt.Println(int(syscall.EIO))
	}
	return 0
}
