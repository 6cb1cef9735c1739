package fs

import (
	"bytes"
	"context"
	"syscall"

	gofs "github.com/hanwen/go-fuse/v2/fs"
)

var _ = (gofs.NodeGetxattrer)((*node)(nil))

// Getxattr implements gofs.NodeGetxattrer. NFSv3 has no extended
// attributes; the root directory has one, the mount's statistics.
func (n *node) Getxattr(ctx context.Context, attr string, dest []byte) (uint32, syscall.Errno) {
	if n.obj != n.fs.root.obj || attr != StatsXattr {
		return 0, syscall.EOPNOTSUPP
	}
	var b bytes.Buffer
	if err := n.fs.WriteStats(&b, n.fs.cfg.Mountpoint); err != nil {
		return 0, syscall.EIO
	}
	if len(dest) == 0 {
		return uint32(b.Len()), 0
	}
	if len(dest) < b.Len() {
		return uint32(b.Len()), syscall.ERANGE
	}
	return uint32(copy(dest, b.Bytes())), 0
}
