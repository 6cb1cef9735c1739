package fs

import (
	"context"
	"errors"
	"math"
	"syscall"
	"time"

	gofs "github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"
	"golang.org/x/sys/unix"

	"github.com/rdmafs/rdmafs/nfs3"
	"github.com/rdmafs/rdmafs/sunrpc"
)

// node is go-fuse's view of one file: an Inode in its tree and the object
// it stands for.
type node struct {
	gofs.Inode
	fs  *FS
	obj *object
}

var _ = (gofs.NodeGetattrer)((*node)(nil))

// newNode returns a node for the file with handle fh and attributes attr.
func (f *FS) newNode(fh nfs3.FH, attr *nfs3.Fattr) *node {
	obj, _ := f.objects.get(fh, attr)
	f.setAttr(obj, attr)
	return &node{fs: f, obj: obj}
}

// stable returns the identity go-fuse keys the node by: the server's file
// id, which programs see as the inode number, and a generation derived
// from the handle.
func (n *node) stable() gofs.StableAttr {
	return gofs.StableAttr{Mode: typeMode(n.obj.typ), Ino: n.obj.fileID, Gen: generation(&n.obj.fh)}
}

// child makes the Inode for a file found in directory n.
func (n *node) child(ctx context.Context, fh nfs3.FH, attr *nfs3.Fattr) *gofs.Inode {
	c := n.fs.newNode(fh, attr)
	return n.NewInode(ctx, c, c.stable())
}

func typeMode(t nfs3.FileType) uint32 {
	switch t {
	case nfs3.TypeDir:
		return syscall.S_IFDIR
	case nfs3.TypeLnk:
		return syscall.S_IFLNK
	case nfs3.TypeBlk:
		return syscall.S_IFBLK
	case nfs3.TypeChr:
		return syscall.S_IFCHR
	case nfs3.TypeSock:
		return syscall.S_IFSOCK
	case nfs3.TypeFifo:
		return syscall.S_IFIFO
	}
	return syscall.S_IFREG
}

// acBounds returns the attribute cache bounds for a file of type t.
func (f *FS) acBounds(t nfs3.FileType) (lo, hi time.Duration) {
	if t == nfs3.TypeDir {
		return f.opts.ACDirMin, f.opts.ACDirMax
	}
	return f.opts.ACRegMin, f.opts.ACRegMax
}

// setAttr records fresh attributes of obj. As in the Linux client, the
// time they stay fresh doubles while they come back unchanged, from the
// minimum to the maximum of the attribute cache, and falls back to the
// minimum when they change.
func (f *FS) setAttr(obj *object, a *nfs3.Fattr) {
	lo, hi := f.acBounds(obj.typ)
	obj.mu.Lock()
	defer obj.mu.Unlock()
	if obj.attrExpires.IsZero() || a.Mode != obj.attr.Mode || a.UID != obj.attr.UID || a.GID != obj.attr.GID || a.Ctime != obj.attr.Ctime {
		// Who may do what follows from these; a server that keeps
		// ACLs changes the ctime when it changes one.
		obj.access.clear()
	}
	if obj.attrExpires.IsZero() || a.Mtime != obj.attr.Mtime || a.Ctime != obj.attr.Ctime || a.Size != obj.attr.Size {
		obj.attrTimeo = lo
	} else {
		obj.attrTimeo = min(max(2*obj.attrTimeo, lo), hi)
	}
	obj.attr = *a
	obj.attrExpires = time.Now().Add(obj.attrTimeo)
}

// setWcc records what an operation says of obj's attributes afterwards;
// without them, the cached ones are stale.
func (f *FS) setWcc(obj *object, w *nfs3.Wcc) {
	if w.HasAfter {
		f.setAttr(obj, &w.After)
	} else {
		f.invalidate(obj)
	}
}

// invalidate makes the next getattr of obj ask the server.
func (f *FS) invalidate(obj *object) {
	obj.mu.Lock()
	obj.attrExpires = time.Now()
	obj.access.clear()
	obj.mu.Unlock()
}

// cachedAttr returns obj's cached attributes, fresh or not.
func (obj *object) cachedAttr() nfs3.Fattr {
	obj.mu.Lock()
	defer obj.mu.Unlock()
	return obj.attr
}

// attrChanged reports whether the attributes a program sees differ
// between a and b.
func attrChanged(a, b *nfs3.Fattr) bool {
	return a.Size != b.Size || a.Mtime != b.Mtime || a.Ctime != b.Ctime ||
		a.Mode != b.Mode || a.UID != b.UID || a.GID != b.GID || a.Nlink != b.Nlink
}

// getattr returns obj's attributes, from the cache while they are fresh
// unless force.
func (f *FS) getattr(ctx context.Context, obj *object, force bool) (nfs3.Fattr, error) {
	obj.mu.Lock()
	if !force && time.Now().Before(obj.attrExpires) {
		a := obj.attr
		obj.mu.Unlock()
		return a, nil
	}
	obj.mu.Unlock()
	var a nfs3.Fattr
	if err := f.nfs.Getattr(ctx, f.cred(ctx), &obj.fh, &a); err != nil {
		return a, err
	}
	f.setAttr(obj, &a)
	return a, nil
}

// fillAttr converts attributes for FUSE. The size counts data written but
// not yet sent, as the kernel client's does.
func (f *FS) fillAttr(obj *object, a *nfs3.Fattr, out *fuse.Attr) {
	out.Ino = a.FileID
	out.Size = a.Size
	out.Size = max(out.Size, uint64(obj.pendingEnd()))
	obj.toldKernel(int64(out.Size))
	out.Blocks = (a.Used + 511) / 512
	out.Atime, out.Atimensec = uint64(a.Atime.Sec), a.Atime.Nsec
	out.Mtime, out.Mtimensec = uint64(a.Mtime.Sec), a.Mtime.Nsec
	out.Ctime, out.Ctimensec = uint64(a.Ctime.Sec), a.Ctime.Nsec
	out.Mode = typeMode(a.Type) | a.Mode&07777
	out.Nlink = a.Nlink
	out.Uid, out.Gid = a.UID, a.GID
	out.Rdev = uint32(unix.Mkdev(a.Rdev[0], a.Rdev[1]))
	out.Blksize = uint32(f.opts.WSize)
}

// attrTimeout is how long the kernel may keep obj's attributes.
func (f *FS) attrTimeout(obj *object) time.Duration {
	obj.mu.Lock()
	defer obj.mu.Unlock()
	return max(time.Until(obj.attrExpires), 0)
}

// fillEntry fills a lookup reply for child, found in directory dir.
func (f *FS) fillEntry(dir, child *object, a *nfs3.Fattr, out *fuse.EntryOut) {
	f.fillAttr(child, a, &out.Attr)
	out.SetAttrTimeout(f.attrTimeout(child))
	if f.opts.LookupPositive {
		dir.mu.Lock()
		out.SetEntryTimeout(dir.attrTimeo)
		dir.mu.Unlock()
	}
}

// Getattr implements gofs.NodeGetattrer, for stat and fstat alike. Data written through this client and not
// yet sent goes to the server first, as the kernel client flushes it before
// a stat: the server sets the file's mtime and ctime when the data arrives.
func (n *node) Getattr(ctx context.Context, fh gofs.FileHandle, out *fuse.AttrOut) syscall.Errno {
	ctx, release := killable(ctx)
	defer release()
	if wb := n.obj.writeback(); wb != nil {
		if err := wb.waitSent(ctx, 0, math.MaxInt64); err != nil {
			return errno(err)
		}
	}
	a, err := n.fs.getattr(ctx, n.obj, false)
	if err != nil {
		return errno(err)
	}
	n.fs.fillAttr(n.obj, &a, &out.Attr)
	out.SetTimeout(n.fs.attrTimeout(n.obj))
	return 0
}

// errno returns the errno a program should see for err: the NFS status's,
// EINTR for a call its caller's death ended, and EIO for everything else
// (a soft mount's timeout, a server that cannot be reached or replies
// nonsense), as the kernel client reports them.
func errno(err error) syscall.Errno {
	if err == nil {
		return 0
	}
	var st nfs3.Status
	if errors.As(err, &st) {
		return st.Errno()
	}
	var ae *sunrpc.AcceptError
	if errors.As(err, &ae) && ae.Stat == sunrpc.ProcUnavail {
		return syscall.EOPNOTSUPP
	}
	var de *sunrpc.DeniedError
	if errors.As(err, &de) && de.AuthError {
		return syscall.EACCES
	}
	if errors.Is(err, context.Canceled) {
		return syscall.EINTR
	}
	return syscall.EIO
}
