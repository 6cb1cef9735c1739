package fs

import (
	"bufio"
	"bytes"
	"os"
	"strconv"
)

// procStatus reads /proc/PID/status, which tells what a FUSE request does
// not: a caller's supplementary groups and whether it is being killed. It
// calls fn with each field's name (before the colon) and value, until fn
// returns false.
func procStatus(pid uint32, fn func(name string, value []byte) bool) error {
	f, err := os.Open("/proc/" + strconv.FormatUint(uint64(pid), 10) + "/status")
	if err != nil {
		return err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		name, value, ok := bytes.Cut(sc.Bytes(), []byte(":"))
		if ok && !fn(string(name), bytes.TrimSpace(value)) {
			return nil
		}
	}
	return sc.Err()
}
