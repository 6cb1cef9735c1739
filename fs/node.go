package fs

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"math"
	"math/rand/v2"
	"syscall"

	gofs "github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"
	"golang.org/x/sys/unix"

	"github.com/rdmafs/rdmafs/nfs3"
)

// node is go-fuse's view of one file: an Inode in its tree and the object
// it stands for. This file holds every operation of a node, as go-fuse's
// loopback does; the file handles' are in file.go and readdir.go.
type node struct {
	gofs.Inode
	fs  *FS
	obj *object
}

var (
	_ = (gofs.NodeGetattrer)((*node)(nil))
	_ = (gofs.NodeSetattrer)((*node)(nil))
	_ = (gofs.NodeOpener)((*node)(nil))
	_ = (gofs.NodeReadlinker)((*node)(nil))
	_ = (gofs.NodeAccesser)((*node)(nil))
	_ = (gofs.NodeLookuper)((*node)(nil))
	_ = (gofs.NodeCreater)((*node)(nil))
	_ = (gofs.NodeMkdirer)((*node)(nil))
	_ = (gofs.NodeMknoder)((*node)(nil))
	_ = (gofs.NodeSymlinker)((*node)(nil))
	_ = (gofs.NodeLinker)((*node)(nil))
	_ = (gofs.NodeUnlinker)((*node)(nil))
	_ = (gofs.NodeRmdirer)((*node)(nil))
	_ = (gofs.NodeRenamer)((*node)(nil))
	_ = (gofs.NodeStatfser)((*node)(nil))
	_ = (gofs.NodeOpendirHandler)((*node)(nil))
	_ = (gofs.NodeGetxattrer)((*node)(nil))
)

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
	return gofs.StableAttr{Mode: n.obj.typ.Mode(), Ino: n.obj.fileID, Gen: generation(&n.obj.fh)}
}

// child makes the Inode for a file found in directory n.
func (n *node) child(ctx context.Context, fh nfs3.FH, attr *nfs3.Fattr) *gofs.Inode {
	c := n.fs.newNode(fh, attr)
	return n.NewInode(ctx, c, c.stable())
}

// Getattr implements gofs.NodeGetattrer, for stat and fstat alike. Data written through this client and not
// yet sent goes to the server first, as the kernel client flushes it before
// a stat: the server sets the file's mtime and ctime when the data arrives.
func (n *node) Getattr(ctx context.Context, fh gofs.FileHandle, out *fuse.AttrOut) syscall.Errno {
	ctx, release := n.fs.kills.killable(ctx)
	defer release()
	if wb := n.obj.writeback(); wb != nil {
		if err := wb.waitSent(ctx, 0, math.MaxInt64); err != nil {
			return errno(err)
		}
	}
	var a nfs3.Fattr
	var err error
	if n.obj == n.fs.root.obj {
		a, err = n.fs.rootAttr(ctx) // umount's, even with the server gone (silence.go)
	} else {
		a, err = n.fs.getattr(ctx, n.obj, false)
	}
	if err != nil {
		return errno(err)
	}
	n.fs.fillAttr(n.obj, &a, &out.Attr)
	out.SetTimeout(n.fs.attrTimeout(n.obj))
	return 0
}

// errno returns the errno a program should see for err.
func errno(err error) syscall.Errno { return nfs3.Errno(err) }

// Setattr implements gofs.NodeSetattrer: chmod, chown, truncate, utimes.
func (n *node) Setattr(ctx context.Context, fh gofs.FileHandle, in *fuse.SetAttrIn, out *fuse.AttrOut) syscall.Errno {
	ctx, release := n.fs.kills.killable(ctx)
	defer release()
	f := n.fs
	if f.opts.ReadOnly {
		return syscall.EROFS
	}
	var sa nfs3.Sattr
	if m, ok := in.GetMode(); ok {
		sa.SetMode, sa.Mode = true, m&07777
	}
	if uid, ok := in.GetUID(); ok {
		sa.SetUID, sa.UID = true, uid
	}
	if gid, ok := in.GetGID(); ok {
		sa.SetGID, sa.GID = true, gid
	}
	if size, ok := in.GetSize(); ok {
		if n.obj.typ == nfs3.TypeDir {
			return syscall.EISDIR
		}
		sa.SetSize, sa.Size = true, size
		if _, open := fh.(*fileHandle); !open {
			// truncate(2), or open(2) with O_TRUNC, which FUSE turns
			// into this without the file handle: the caller needs write
			// permission, and the server lets a file's owner truncate
			// it whatever its mode (knfsd's owner override), so the
			// check is the client's, as the kernel client's is.
			// ftruncate(2) comes with the handle of a descriptor the
			// kernel has checked is open for writing.
			if en := f.checkAccess(ctx, n.obj, mayWrite); en != 0 {
				return en
			}
		}
	}
	sa.Atime, sa.AtimeVal = setTime(in.Valid, fuse.FATTR_ATIME, fuse.FATTR_ATIME_NOW, in.Atime, in.Atimensec)
	sa.Mtime, sa.MtimeVal = setTime(in.Valid, fuse.FATTR_MTIME, fuse.FATTR_MTIME_NOW, in.Mtime, in.Mtimensec)

	// Data still on its way would undo a truncate or a new mtime when it
	// lands: make it durable first, as the kernel client does.
	if wb := n.obj.writeback(); wb != nil {
		if err := wb.settle(ctx); err != nil {
			return errno(err)
		}
	}
	cred := f.cred(ctx)
	if h, ok := fh.(*fileHandle); ok && sa.SetSize {
		cred = h.cred // ftruncate on an open file, as the opener
	}
	var wcc nfs3.Wcc
	err := f.nfs.Setattr(ctx, cred, &n.obj.fh, &sa, nil, &wcc)
	if err == nil {
		n.obj.ownChange(&wcc)
	}
	f.setWcc(n.obj, &wcc)
	if err != nil {
		return errno(err)
	}
	a, err := f.getattr(ctx, n.obj, false)
	if err != nil {
		return errno(err)
	}
	f.fillAttr(n.obj, &a, &out.Attr)
	out.SetTimeout(f.attrTimeout(n.obj))
	return 0
}

// setTime converts a FUSE time change into an NFS one.
func setTime(valid, set, now uint32, sec uint64, nsec uint32) (nfs3.SetTime, nfs3.Time) {
	switch {
	case valid&now != 0:
		return nfs3.ServerTime, nfs3.Time{}
	case valid&set != 0:
		return nfs3.ClientTime, clampTime(int64(sec), nsec)
	}
	return nfs3.DontChange, nfs3.Time{}
}

// clampTime converts a time to NFSv3's unsigned 32-bit seconds. A time
// outside that range becomes the nearest one it has, with no fraction, as
// the Linux NFSv3 client's superblock limits make it: never wrapped round.
func clampTime(sec int64, nsec uint32) nfs3.Time {
	switch {
	case sec < 0:
		return nfs3.Time{}
	case sec >= math.MaxUint32:
		return nfs3.Time{Sec: math.MaxUint32}
	}
	return nfs3.Time{Sec: uint32(sec), Nsec: nsec}
}

// Open implements gofs.NodeOpener. It checks the caller's access with the
// server and, for close-to-open consistency, fetches fresh attributes: if
// the file changed since the kernel cached its data, the cache is dropped.
func (n *node) Open(ctx context.Context, flags uint32) (gofs.FileHandle, uint32, syscall.Errno) {
	ctx, release := n.fs.kills.killable(ctx)
	defer release()
	f := n.fs
	writing := flags&syscall.O_ACCMODE != syscall.O_RDONLY || flags&syscall.O_TRUNC != 0
	if writing && f.opts.ReadOnly {
		return nil, 0, syscall.EROFS
	}
	if en := f.checkAccess(ctx, n.obj, openMask(flags)); en != 0 {
		return nil, 0, en
	}
	before := n.obj.cachedAttr()
	a, err := f.getattr(ctx, n.obj, !f.opts.NoCTO)
	if err != nil {
		return nil, 0, errno(err)
	}
	h, fuseFlags := f.open(ctx, n.obj, flags, &a)
	if fuseFlags&fuse.FOPEN_KEEP_CACHE == 0 || attrChanged(&before, &a) {
		n.refreshKernelAttr(&a)
	}
	return h, fuseFlags, 0
}

// Readlink implements gofs.NodeReadlinker.
func (n *node) Readlink(ctx context.Context) ([]byte, syscall.Errno) {
	ctx, release := n.fs.kills.killable(ctx)
	defer release()
	target, err := n.fs.nfs.Readlink(ctx, n.fs.cred(ctx), &n.obj.fh)
	if err != nil {
		return nil, errno(err)
	}
	return []byte(target), 0
}

// Access implements gofs.NodeAccesser (access(2) and the checks the
// kernel asks for).
func (n *node) Access(ctx context.Context, mask uint32) syscall.Errno {
	ctx, release := n.fs.kills.killable(ctx)
	defer release()
	if mask&mayWrite != 0 && n.fs.opts.ReadOnly {
		return syscall.EROFS
	}
	return n.fs.checkAccess(ctx, n.obj, mask&(mayRead|mayWrite|mayExec))
}

// checkName refuses a name the server could not take.
func checkName(name string) syscall.Errno {
	if len(name) > nfs3.MaxNameLen {
		return syscall.ENAMETOOLONG
	}
	return 0
}

// Lookup implements gofs.NodeLookuper.
func (n *node) Lookup(ctx context.Context, name string, out *fuse.EntryOut) (*gofs.Inode, syscall.Errno) {
	ctx, release := n.fs.kills.killable(ctx)
	defer release()
	if en := checkName(name); en != 0 {
		return nil, en
	}
	f := n.fs
	var res nfs3.LookupResult
	err := f.nfs.Lookup(ctx, f.cred(ctx), &n.obj.fh, name, &res)
	if res.HasDirAttr {
		f.setAttr(n.obj, &res.DirAttr)
	}
	if err != nil {
		return nil, errno(err)
	}
	return n.found(ctx, res.FH, &res.Attr, res.HasAttr, out)
}

// found makes the Inode of a child whose handle an operation returned,
// fetching its attributes if the reply lacked them.
func (n *node) found(ctx context.Context, fh nfs3.FH, attr *nfs3.Fattr, hasAttr bool, out *fuse.EntryOut) (*gofs.Inode, syscall.Errno) {
	f := n.fs
	if !hasAttr {
		if err := f.nfs.Getattr(ctx, f.cred(ctx), &fh, attr); err != nil {
			return nil, errno(err)
		}
	}
	ino := n.child(ctx, fh, attr)
	f.fillEntry(n.obj, ino.Operations().(*node).obj, attr, out)
	return ino, 0
}

// created finishes an operation that made name in n: it records the
// directory's new attributes and returns the new child, looking it up if
// the server did not return its handle.
func (n *node) created(ctx context.Context, name string, res *nfs3.CreateResult, out *fuse.EntryOut) (*gofs.Inode, syscall.Errno) {
	n.fs.setWcc(n.obj, &res.DirWcc)
	if !res.HasFH {
		var lr nfs3.LookupResult
		if err := n.fs.nfs.Lookup(ctx, n.fs.cred(ctx), &n.obj.fh, name, &lr); err != nil {
			return nil, errno(err)
		}
		res.FH, res.Attr, res.HasAttr = lr.FH, lr.Attr, lr.HasAttr
	}
	return n.found(ctx, res.FH, &res.Attr, res.HasAttr, out)
}

// failedCreate records what a failed CREATE, MKDIR, SYMLINK or MKNOD says
// of directory n afterwards, and returns its errno.
func (n *node) failedCreate(res *nfs3.CreateResult, err error) syscall.Errno {
	n.fs.setWcc(n.obj, &res.DirWcc)
	return errno(err)
}

// mayChange refuses changes to a read-only mount and names the server
// cannot take.
func (n *node) mayChange(name string) syscall.Errno {
	if n.fs.opts.ReadOnly {
		return syscall.EROFS
	}
	return checkName(name)
}

// Create implements gofs.NodeCreater. O_EXCL asks for an EXCLUSIVE create,
// which a retransmission cannot turn into a false EEXIST; a server that
// does not support it gets GUARDED. Without O_EXCL the create is
// UNCHECKED, as open(2) of an existing file with O_CREAT succeeds.
func (n *node) Create(ctx context.Context, name string, flags, mode uint32, out *fuse.EntryOut) (*gofs.Inode, gofs.FileHandle, uint32, syscall.Errno) {
	umask := n.fs.umasks.of(ctx) // before ctx is wrapped (umask.go)
	ctx, release := n.fs.kills.killable(ctx)
	defer release()
	mode = n.fs.createMode(ctx, n.obj, mode, umask) // acl.go
	if en := n.mayChange(name); en != 0 {
		return nil, nil, 0, en
	}
	f := n.fs
	cred := f.cred(ctx)
	sa := nfs3.Sattr{SetMode: true, Mode: mode & 07777}
	if flags&syscall.O_TRUNC != 0 {
		sa.SetSize = true
	}
	var res nfs3.CreateResult
	var err error
	if flags&syscall.O_EXCL != 0 {
		// The verifier tells this create's retransmission from another
		// client's create of the name: unique, not secret, so the
		// runtime's generator, without a getrandom(2) per create.
		var verf nfs3.Verf
		binary.BigEndian.PutUint64(verf[:], rand.Uint64())
		err = f.nfs.Create(ctx, cred, &n.obj.fh, name, nfs3.Exclusive, nil, verf, &res)
		if err == nil {
			// The server keeps the verifier in the times; set them and
			// the mode now, as RFC 1813 asks.
			ino, en := n.created(ctx, name, &res, out)
			if en != 0 {
				return nil, nil, 0, en
			}
			child := ino.Operations().(*node)
			set := nfs3.Sattr{SetMode: true, Mode: mode & 07777, Atime: nfs3.ServerTime, Mtime: nfs3.ServerTime}
			var wcc nfs3.Wcc
			if err := f.nfs.Setattr(ctx, cred, &child.obj.fh, &set, nil, &wcc); err != nil {
				return nil, nil, 0, errno(err)
			}
			f.setWcc(child.obj, &wcc)
			return n.opened(ctx, ino, flags, out)
		}
		if !errors.Is(err, nfs3.ErrNotSupp) {
			return nil, nil, 0, n.failedCreate(&res, err)
		}
		err = f.nfs.Create(ctx, cred, &n.obj.fh, name, nfs3.Guarded, &sa, nfs3.Verf{}, &res)
	} else {
		err = f.nfs.Create(ctx, cred, &n.obj.fh, name, nfs3.Unchecked, &sa, nfs3.Verf{}, &res)
	}
	if err != nil {
		return nil, nil, 0, n.failedCreate(&res, err)
	}
	ino, en := n.created(ctx, name, &res, out)
	if en != 0 {
		return nil, nil, 0, en
	}
	return n.opened(ctx, ino, flags, out)
}

// opened opens the file a Create made.
func (n *node) opened(ctx context.Context, ino *gofs.Inode, flags uint32, out *fuse.EntryOut) (*gofs.Inode, gofs.FileHandle, uint32, syscall.Errno) {
	child := ino.Operations().(*node)
	a, err := n.fs.getattr(ctx, child.obj, false)
	if err != nil {
		return nil, nil, 0, errno(err)
	}
	n.fs.fillEntry(n.obj, child.obj, &a, out)
	h, fuseFlags := n.fs.open(ctx, child.obj, flags, &a)
	return ino, h, fuseFlags, 0
}

// Mkdir implements gofs.NodeMkdirer.
func (n *node) Mkdir(ctx context.Context, name string, mode uint32, out *fuse.EntryOut) (*gofs.Inode, syscall.Errno) {
	umask := n.fs.umasks.of(ctx) // before ctx is wrapped (umask.go)
	ctx, release := n.fs.kills.killable(ctx)
	defer release()
	mode = n.fs.createMode(ctx, n.obj, mode, umask) // acl.go
	if en := n.mayChange(name); en != 0 {
		return nil, en
	}
	var res nfs3.CreateResult
	sa := nfs3.Sattr{SetMode: true, Mode: mode & 07777}
	if err := n.fs.nfs.Mkdir(ctx, n.fs.cred(ctx), &n.obj.fh, name, &sa, &res); err != nil {
		return nil, n.failedCreate(&res, err)
	}
	return n.created(ctx, name, &res, out)
}

// Mknod implements gofs.NodeMknoder: FIFOs, sockets and devices; a
// regular file is a GUARDED CREATE.
func (n *node) Mknod(ctx context.Context, name string, mode, dev uint32, out *fuse.EntryOut) (*gofs.Inode, syscall.Errno) {
	umask := n.fs.umasks.of(ctx) // before ctx is wrapped (umask.go)
	ctx, release := n.fs.kills.killable(ctx)
	defer release()
	mode = n.fs.createMode(ctx, n.obj, mode, umask) // acl.go
	if en := n.mayChange(name); en != 0 {
		return nil, en
	}
	f := n.fs
	cred := f.cred(ctx)
	sa := nfs3.Sattr{SetMode: true, Mode: mode & 07777}
	var res nfs3.CreateResult
	var err error
	switch mode & syscall.S_IFMT {
	case syscall.S_IFREG, 0:
		err = f.nfs.Create(ctx, cred, &n.obj.fh, name, nfs3.Guarded, &sa, nfs3.Verf{}, &res)
	case syscall.S_IFIFO:
		err = f.nfs.Mknod(ctx, cred, &n.obj.fh, name, nfs3.TypeFifo, &sa, [2]uint32{}, &res)
	case syscall.S_IFSOCK:
		err = f.nfs.Mknod(ctx, cred, &n.obj.fh, name, nfs3.TypeSock, &sa, [2]uint32{}, &res)
	case syscall.S_IFCHR, syscall.S_IFBLK:
		typ := nfs3.TypeChr
		if mode&syscall.S_IFMT == syscall.S_IFBLK {
			typ = nfs3.TypeBlk
		}
		rdev := [2]uint32{unix.Major(uint64(dev)), unix.Minor(uint64(dev))}
		err = f.nfs.Mknod(ctx, cred, &n.obj.fh, name, typ, &sa, rdev, &res)
	default:
		return nil, syscall.EINVAL
	}
	if err != nil {
		return nil, n.failedCreate(&res, err)
	}
	return n.created(ctx, name, &res, out)
}

// Symlink implements gofs.NodeSymlinker.
func (n *node) Symlink(ctx context.Context, target, name string, out *fuse.EntryOut) (*gofs.Inode, syscall.Errno) {
	ctx, release := n.fs.kills.killable(ctx)
	defer release()
	if en := n.mayChange(name); en != 0 {
		return nil, en
	}
	if len(target) > nfs3.MaxPathLen {
		return nil, syscall.ENAMETOOLONG
	}
	var res nfs3.CreateResult
	if err := n.fs.nfs.Symlink(ctx, n.fs.cred(ctx), &n.obj.fh, name, target, &nfs3.Sattr{}, &res); err != nil {
		return nil, n.failedCreate(&res, err)
	}
	return n.created(ctx, name, &res, out)
}

// Link implements gofs.NodeLinker.
func (n *node) Link(ctx context.Context, target gofs.InodeEmbedder, name string, out *fuse.EntryOut) (*gofs.Inode, syscall.Errno) {
	ctx, release := n.fs.kills.killable(ctx)
	defer release()
	if en := n.mayChange(name); en != 0 {
		return nil, en
	}
	t, ok := target.(*node)
	if !ok {
		return nil, syscall.EXDEV
	}
	f := n.fs
	var attr nfs3.Fattr
	var wcc nfs3.Wcc
	hasAttr, err := f.nfs.Link(ctx, f.cred(ctx), &t.obj.fh, &n.obj.fh, name, &attr, &wcc)
	f.setWcc(n.obj, &wcc)
	if err != nil {
		if hasAttr {
			f.setAttr(t.obj, &attr)
		}
		return nil, errno(err)
	}
	return n.found(ctx, t.obj.fh, &attr, hasAttr, out)
}

// Unlink implements gofs.NodeUnlinker. A file that is still open is
// renamed to a hidden name instead, and removed at its last close, so a
// program that unlinks a file it has open can go on using it, as with the
// kernel client.
func (n *node) Unlink(ctx context.Context, name string) syscall.Errno {
	ctx, release := n.fs.kills.killable(ctx)
	defer release()
	if en := n.mayChange(name); en != 0 {
		return en
	}
	f := n.fs
	if obj := n.childObject(name); obj != nil {
		if hidden, err := f.hideIfOpen(ctx, n.obj, name, obj); err != nil || hidden {
			return errno(err)
		}
		defer f.invalidate(obj) // its link count changed
	}
	var wcc nfs3.Wcc
	err := f.nfs.Remove(ctx, f.cred(ctx), &n.obj.fh, name, &wcc)
	f.setWcc(n.obj, &wcc)
	return errno(err)
}

// Rmdir implements gofs.NodeRmdirer.
func (n *node) Rmdir(ctx context.Context, name string) syscall.Errno {
	ctx, release := n.fs.kills.killable(ctx)
	defer release()
	if en := n.mayChange(name); en != 0 {
		return en
	}
	var wcc nfs3.Wcc
	err := n.fs.nfs.Rmdir(ctx, n.fs.cred(ctx), &n.obj.fh, name, &wcc)
	n.fs.setWcc(n.obj, &wcc)
	if obj := n.childObject(name); obj != nil && err == nil {
		// It may still be open: its attributes say it has no links, as
		// the kernel client's do, until they expire; the server knows
		// its handle no more.
		obj.mu.Lock()
		obj.attr.Nlink = 0
		obj.mu.Unlock()
	}
	return errno(err)
}

// Rename implements gofs.NodeRenamer. NFSv3 cannot exchange two names or
// refuse to replace one atomically, so flags are refused as the kernel
// client refuses them. A replaced file that is still open is hidden first,
// as Unlink does.
func (n *node) Rename(ctx context.Context, name string, newParent gofs.InodeEmbedder, newName string, flags uint32) syscall.Errno {
	ctx, release := n.fs.kills.killable(ctx)
	defer release()
	if en := n.mayChange(newName); en != 0 {
		return en
	}
	if flags != 0 {
		return syscall.EINVAL
	}
	to, ok := newParent.(*node)
	if !ok {
		return syscall.EXDEV
	}
	f := n.fs
	replaced := to.childObject(newName)
	if replaced != nil {
		if _, err := f.hideIfOpen(ctx, to.obj, newName, replaced); err != nil {
			return errno(err)
		}
	}
	var fromWcc, toWcc nfs3.Wcc
	err := f.nfs.Rename(ctx, f.cred(ctx), &n.obj.fh, name, &to.obj.fh, newName, &fromWcc, &toWcc)
	f.setWcc(n.obj, &fromWcc)
	f.setWcc(to.obj, &toWcc)
	// The renamed file's ctime changed, and a file it replaced lost a
	// link: its other names must show that, as the kernel client's do.
	if obj := n.childObject(name); obj != nil {
		f.invalidate(obj)
	}
	if replaced != nil {
		f.invalidate(replaced)
	}
	return errno(err)
}

// childObject returns the object of the child go-fuse knows as name.
func (n *node) childObject(name string) *object {
	if c := n.GetChild(name); c != nil {
		if cn, ok := c.Operations().(*node); ok {
			return cn.obj
		}
	}
	return nil
}

// Statfs implements gofs.NodeStatfser with FSSTAT.
func (n *node) Statfs(ctx context.Context, out *fuse.StatfsOut) syscall.Errno {
	ctx, release := n.fs.kills.killable(ctx)
	defer release()
	f := n.fs
	st, err := f.fsstat(ctx, &n.obj.fh) // umount's, even with the server gone (silence.go)
	if err != nil {
		return errno(err)
	}
	const bsize = 4096
	out.Bsize = uint32(f.opts.WSize)
	out.Frsize = bsize
	out.Blocks = st.TBytes / bsize
	out.Bfree = st.FBytes / bsize
	out.Bavail = st.ABytes / bsize
	out.Files = st.TFiles
	out.Ffree = st.AFiles
	out.NameLen = nfs3.MaxNameLen
	return 0
}

// OpendirHandle implements gofs.NodeOpendirHandler.
func (n *node) OpendirHandle(ctx context.Context, flags uint32) (gofs.FileHandle, uint32, syscall.Errno) {
	ctx, release := n.fs.kills.killable(ctx)
	defer release()
	if en := n.fs.checkAccess(ctx, n.obj, mayRead); en != 0 {
		return nil, 0, en
	}
	return newDirHandle(n, n.fs.cred(ctx)), 0, 0
}

// Getxattr implements gofs.NodeGetxattrer. NFSv3 has no extended
// attributes but the POSIX ACLs of NFSACL (acl.go); the root directory
// has two more, the mount's statistics (StatsXattr, LatencyXattr).
func (n *node) Getxattr(ctx context.Context, attr string, dest []byte) (uint32, syscall.Errno) {
	if isACLXattr(attr) && n.fs.usesACLs() {
		return n.getACLXattr(ctx, attr, dest)
	}
	if n.obj != n.fs.root.obj {
		return 0, syscall.EOPNOTSUPP
	}
	var b bytes.Buffer
	if ok, err := n.fs.writeRootXattr(&b, attr); !ok {
		return 0, syscall.EOPNOTSUPP
	} else if err != nil {
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
