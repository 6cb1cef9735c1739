package fs

import (
	"path/filepath"

	"golang.org/x/sys/unix"

	"github.com/rdmafs/rdmafs/nfs3"
)

// The kernel keeps the attributes a reply gave it until they time out, and
// FUSE's open does not refresh them. The kernel client's open revalidates
// them (close-to-open consistency), and so does rdmafs's Open; when they
// changed, the kernel must learn it before the program goes on. Dropping
// them (an inode notification) is enough for a stat, or a read past the
// end the kernel knows, which ask again; but a page fault of a mapping, a
// splice (copy_file_range) and the writeback of a mapping's pages use the
// size the kernel holds, without asking. With a size that is too small a
// mapping faults; with one too large, pages past the real end read as
// zeros and are written back as data, growing the file. FUSE has no message
// that sets an inode's size, but it takes the size of every attribute
// reply: so rdmafs stats the file through its own mount, and the kernel
// takes the fresh attributes of the GETATTR that makes.

// toldKernel records the size an attribute reply gave the kernel.
func (obj *object) toldKernel(size int64) {
	obj.mu.Lock()
	obj.kernelSize = size
	obj.mu.Unlock()
}

// kernelWrote records a write through the kernel, which grows its size of
// the file to end.
func (obj *object) kernelWrote(end int64) {
	obj.mu.Lock()
	obj.kernelSize = max(obj.kernelSize, end)
	obj.mu.Unlock()
}

// kernelReadShort records a read that came back short, at end: FUSE takes
// it for the end of the file and may shrink its size to it.
func (obj *object) kernelReadShort(end int64) {
	obj.mu.Lock()
	obj.kernelSize = min(obj.kernelSize, end)
	obj.mu.Unlock()
}

// refreshKernelAttr makes the kernel drop the attributes it holds of n,
// which changed on the server into a, and take a's size at once if it
// differs from the size the kernel holds.
func (n *node) refreshKernelAttr(a *nfs3.Fattr) {
	n.NotifyContent(-1, 0)
	obj := n.obj
	obj.mu.Lock()
	sizeDiffers := obj.kernelSize != int64(a.Size)
	obj.mu.Unlock()
	if !sizeDiffers {
		return
	}
	if n.fs.mountpoint == "" {
		return // no kernel: the tests of the package
	}
	path := n.Path(nil)
	if path == "" {
		return // the root directory
	}
	var st unix.Stat_t
	// Another goroutine serves the GETATTR this makes, from the
	// attributes Open has just fetched. An error (the name went away
	// meanwhile, another file system is mounted on top) leaves the next
	// stat or read to fix the size. No descriptor of the mount is kept
	// open, as one would keep it from being unmounted.
	_ = unix.Fstatat(unix.AT_FDCWD, filepath.Join(n.fs.mountpoint, path), &st, unix.AT_SYMLINK_NOFOLLOW)
}
