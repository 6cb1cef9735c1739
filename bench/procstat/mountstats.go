package procstat

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/rdmafs/rdmafs/fs"
)

// MountRPCs returns how many RPCs the NFS mount on mountpoint has sent: the
// calls of every procedure on the per-op statistics lines of its
// mountstats block. A kernel client's block is in /proc/self/mountstats;
// an rdmafs mount gives the same block in an extended attribute of its
// root (what `rdmafs stats` reads).
func MountRPCs(mountpoint string) (uint64, error) {
	block, err := mountstats(mountpoint)
	if err != nil {
		return 0, err
	}
	n, err := countRPCs(block)
	if err != nil {
		return 0, fmt.Errorf("mountstats of %s: %w", mountpoint, err)
	}
	return n, nil
}

// mountstats returns the mountstats block of the mount on mountpoint.
func mountstats(mountpoint string) ([]byte, error) {
	buf := make([]byte, 64<<10)
	if n, err := unix.Getxattr(mountpoint, fs.StatsXattr, buf); err == nil {
		return buf[:n], nil
	}
	all, err := os.ReadFile("/proc/self/mountstats")
	if err != nil {
		return nil, err
	}
	if b := findBlock(all, mountpoint); b != nil {
		return b, nil
	}
	return nil, fmt.Errorf("no NFS mount on %s in /proc/self/mountstats", mountpoint)
}

// findBlock returns the block of /proc/self/mountstats that begins with
// the device line of the NFS mount on mountpoint, nil if there is none.
func findBlock(all []byte, mountpoint string) []byte {
	head := " mounted on " + mountpoint + " with fstype nfs"
	var block []byte
	in := false
	for line := range bytes.Lines(all) {
		if bytes.HasPrefix(line, []byte("device ")) {
			if in {
				break
			}
			in = bytes.Contains(line, []byte(head+" ")) || bytes.Contains(line, []byte(head+"\n"))
		}
		if in {
			block = append(block, line...)
		}
	}
	return block
}

// countRPCs sums the calls (the first number) of every procedure line
// after "per-op statistics", up to the empty line that ends them: an
// rdmafs mount with locks has its NLM procedures after that
// (fs.LockStatsHeader), which the kernel client does not count here.
func countRPCs(block []byte) (uint64, error) {
	var total uint64
	perOp := false
	sc := bufio.NewScanner(bytes.NewReader(block))
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "per-op statistics" {
			perOp = true
			continue
		}
		if !perOp {
			continue
		}
		if line == "" {
			break
		}
		_, counts, ok := strings.Cut(line, ":")
		f := strings.Fields(counts)
		if !ok || len(f) == 0 {
			return 0, fmt.Errorf("per-op line %q", line)
		}
		n, err := strconv.ParseUint(f[0], 10, 64)
		if err != nil {
			return 0, fmt.Errorf("per-op line %q: %w", line, err)
		}
		total += n
	}
	if !perOp {
		return 0, fmt.Errorf("no per-op statistics")
	}
	return total, nil
}
