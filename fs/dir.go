package fs

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"syscall"
	"time"

	gofs "github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"
	"golang.org/x/sys/unix"

	"github.com/rdmafs/rdmafs/nfs3"
)

var (
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
)

// checkName refuses a name the server could not take.
func checkName(name string) syscall.Errno {
	if len(name) > nfs3.MaxNameLen {
		return syscall.ENAMETOOLONG
	}
	return 0
}

// Lookup implements gofs.NodeLookuper.
func (n *node) Lookup(ctx context.Context, name string, out *fuse.EntryOut) (*gofs.Inode, syscall.Errno) {
	ctx, release := killable(ctx)
	defer release()
	if en := checkName(name); en != 0 {
		return nil, en
	}
	f := n.fs
	var res nfs3.LookupResult
	err := f.nfs.Lookup(ctx, f.cred(ctx), &n.obj.fh, name, &res)
	if err != nil {
		return nil, errno(err)
	}
	if res.HasDirAttr {
		f.setAttr(n.obj, &res.DirAttr)
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
	ctx, release := killable(ctx)
	defer release()
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
		var verf nfs3.Verf
		_, _ = rand.Read(verf[:])
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
			return nil, nil, 0, errno(err)
		}
		err = f.nfs.Create(ctx, cred, &n.obj.fh, name, nfs3.Guarded, &sa, nfs3.Verf{}, &res)
	} else {
		err = f.nfs.Create(ctx, cred, &n.obj.fh, name, nfs3.Unchecked, &sa, nfs3.Verf{}, &res)
	}
	if err != nil {
		return nil, nil, 0, errno(err)
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
	ctx, release := killable(ctx)
	defer release()
	if en := n.mayChange(name); en != 0 {
		return nil, en
	}
	var res nfs3.CreateResult
	sa := nfs3.Sattr{SetMode: true, Mode: mode & 07777}
	if err := n.fs.nfs.Mkdir(ctx, n.fs.cred(ctx), &n.obj.fh, name, &sa, &res); err != nil {
		return nil, errno(err)
	}
	return n.created(ctx, name, &res, out)
}

// Mknod implements gofs.NodeMknoder: FIFOs, sockets and devices; a
// regular file is a GUARDED CREATE.
func (n *node) Mknod(ctx context.Context, name string, mode, dev uint32, out *fuse.EntryOut) (*gofs.Inode, syscall.Errno) {
	ctx, release := killable(ctx)
	defer release()
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
		return nil, errno(err)
	}
	return n.created(ctx, name, &res, out)
}

// Symlink implements gofs.NodeSymlinker.
func (n *node) Symlink(ctx context.Context, target, name string, out *fuse.EntryOut) (*gofs.Inode, syscall.Errno) {
	ctx, release := killable(ctx)
	defer release()
	if en := n.mayChange(name); en != 0 {
		return nil, en
	}
	if len(target) > nfs3.MaxPathLen {
		return nil, syscall.ENAMETOOLONG
	}
	var res nfs3.CreateResult
	if err := n.fs.nfs.Symlink(ctx, n.fs.cred(ctx), &n.obj.fh, name, target, &nfs3.Sattr{}, &res); err != nil {
		return nil, errno(err)
	}
	return n.created(ctx, name, &res, out)
}

// Link implements gofs.NodeLinker.
func (n *node) Link(ctx context.Context, target gofs.InodeEmbedder, name string, out *fuse.EntryOut) (*gofs.Inode, syscall.Errno) {
	ctx, release := killable(ctx)
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
	if err != nil {
		return nil, errno(err)
	}
	f.setWcc(n.obj, &wcc)
	return n.found(ctx, t.obj.fh, &attr, hasAttr, out)
}

// Unlink implements gofs.NodeUnlinker. A file that is still open is
// renamed to a hidden name instead, and removed at its last close, so a
// program that unlinks a file it has open can go on using it, as with the
// kernel client.
func (n *node) Unlink(ctx context.Context, name string) syscall.Errno {
	ctx, release := killable(ctx)
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
	ctx, release := killable(ctx)
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
	ctx, release := killable(ctx)
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
	ctx, release := killable(ctx)
	defer release()
	f := n.fs
	st, err := f.nfs.Fsstat(ctx, f.cred(ctx), &n.obj.fh)
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

// silly is the hidden name of a file unlinked while open.
type silly struct {
	dir  *object
	name string
}

// hideIfOpen renames name in dir to a hidden name if obj is open, and
// reports whether it did.
func (f *FS) hideIfOpen(ctx context.Context, dir *object, name string, obj *object) (bool, error) {
	f.awaitRelease(ctx, obj)
	obj.mu.Lock()
	open := obj.opens > 0 && obj.silly == nil
	obj.mu.Unlock()
	if !open {
		return false, nil
	}
	hidden := fmt.Sprintf(".nfs%016x%08x", obj.fileID, f.sillyCount.Add(1))
	var fromWcc, toWcc nfs3.Wcc
	if err := f.nfs.Rename(ctx, f.cred(ctx), &dir.fh, name, &dir.fh, hidden, &fromWcc, &toWcc); err != nil {
		return false, err
	}
	f.setWcc(dir, &toWcc)
	obj.mu.Lock()
	closed := obj.opens == 0
	if !closed {
		obj.silly = &silly{dir: dir, name: hidden}
	}
	obj.mu.Unlock()
	if closed {
		// The last close came during the RENAME (FUSE sends RELEASE
		// after close(2) has returned, so an unlink right after a
		// close often finds the file still open): closeObject saw no
		// hidden name, so the hidden file is removed here.
		f.removeHidden(ctx, &silly{dir: dir, name: hidden})
	}
	return true, nil
}

// releaseWait is how long an unlink waits for the RELEASE of a file whose
// every handle its program has closed.
const releaseWait = 500 * time.Millisecond

// awaitRelease waits a little for obj's handles to be released when the
// programs closed them all already. FUSE sends RELEASE after close(2) has
// returned; without the wait, an unlink right after a close would find the
// file open and rename it to a hidden name, which keeps the file's link
// count up until the release comes (the kernel client, whose close is
// synchronous, removes it at once). A handle still in use, or shared by
// another descriptor (dup, fork), is not waited for beyond releaseWait.
func (f *FS) awaitRelease(ctx context.Context, obj *object) {
	obj.mu.Lock()
	if obj.opens == 0 || obj.closed < obj.opens || obj.silly != nil {
		obj.mu.Unlock()
		return
	}
	if obj.lastClose == nil {
		obj.lastClose = make(chan struct{})
	}
	released := obj.lastClose
	obj.mu.Unlock()
	timer := time.NewTimer(releaseWait)
	defer timer.Stop()
	select {
	case <-released:
	case <-timer.C:
	case <-ctx.Done():
	}
}

// closeObject counts a close of obj and removes its hidden name after the
// last.
func (f *FS) closeObject(ctx context.Context, obj *object) {
	obj.mu.Lock()
	obj.opens--
	var s *silly
	if obj.opens == 0 {
		s, obj.silly = obj.silly, nil
		if obj.lastClose != nil {
			close(obj.lastClose)
			obj.lastClose = nil
		}
	}
	obj.mu.Unlock()
	if s != nil {
		f.removeHidden(ctx, s)
	}
}

// removeHidden removes the hidden name of an unlinked file that is no
// longer open. It runs to completion even if the caller is interrupted.
func (f *FS) removeHidden(ctx context.Context, s *silly) {
	var wcc nfs3.Wcc
	if err := f.nfs.Remove(context.Background(), f.cred(ctx), &s.dir.fh, s.name, &wcc); err != nil {
		f.logf("removing %s of an unlinked file: %v", s.name, err)
	}
	f.setWcc(s.dir, &wcc)
}
