package main

import (
	"errors"
	"fmt"
	"os"

	"golang.org/x/sys/unix"

	"github.com/rdmafs/rdmafs/fs"
)

// stats prints the statistics of the rdmafs mount at the given mount
// point, which the mount keeps in an extended attribute of its root.
func stats(args []string) error {
	if len(args) != 1 || args[0] == "-h" {
		return &usageError{"usage: rdmafs stats MOUNTPOINT"}
	}
	dir := args[0]
	buf := make([]byte, 64<<10)
	for {
		n, err := unix.Getxattr(dir, fs.StatsXattr, buf)
		if errors.Is(err, unix.ERANGE) {
			buf = make([]byte, 2*len(buf))
			continue
		}
		if errors.Is(err, unix.EOPNOTSUPP) || errors.Is(err, unix.ENODATA) {
			return fmt.Errorf("%s is not an rdmafs mount", dir)
		}
		if err != nil {
			return fmt.Errorf("%s: %w", dir, err)
		}
		_, err = os.Stdout.Write(buf[:n])
		return err
	}
}
