package server

import (
	"bytes"

	"github.com/rdmafs/rdmafs/nfs3"
	"golang.org/x/sys/unix"
)

// The procedures that look up, make and remove names in a directory. Each
// works relative to the directory's descriptor (see node), as the caller.

// lookup answers LOOKUP. "." is the directory itself and ".." its parent;
// like knfsd, ".." of the export's root is the root itself.
func (w *worker) lookup(xid uint32, dir *node, name string) []byte {
	if !dir.isDir() {
		return attrErrorReply(xid, nfs3.ErrNotDir, &dir.st)
	}
	var fh []byte
	var st unix.Statx_t
	err := w.as(func() error {
		switch {
		case name == ".", name == ".." && dir.root:
			fh, st = dir.fh, dir.st
			// The caller needs search permission, as for any lookup.
			return unix.Faccessat2(dir.fd, "", unix.X_OK, unix.AT_EMPTY_PATH|unix.AT_EACCESS)
		}
		var fd int
		var err error
		if name == ".." {
			fd, err = unix.Openat(dir.fd, "..", unix.O_PATH|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
		} else {
			fd, err = lookupAt(dir.fd, name)
		}
		if err != nil {
			return err
		}
		defer unix.Close(fd)
		if err := statFD(fd, &st); err != nil {
			return err
		}
		fh, err = w.srv.handleOf(fd, &st)
		return err
	})
	if err != nil {
		return attrErrorReply(xid, statusOf(err), attrsOf(dir.fd))
	}
	w.srv.remember(fh, st.Mode, dir.fh, name)
	out := successHeader(xid)
	putStatus(out, nfs3.OK)
	out.Opaque(fh)
	putPostOpAttr(out, &st)
	putPostOpAttr(out, attrsOf(dir.fd))
	return out.Buf
}

// handleOf is the handle of an open object: the root's own for the root.
func (s *Server) handleOf(fd int, st *unix.Statx_t) ([]byte, error) {
	if s.isRoot(st) {
		return s.rootHandle, nil
	}
	return s.handleAt(fd, "")
}

// requestedMode is the mode a call's sattr3 asks for, or def.
func requestedMode(a *nfsArgs, def uint32) (mode uint32, requested bool) {
	if a.hasSattr && a.sattr.setMode {
		return a.sattr.mode & 0o7777, true
	}
	return def, false
}

// restOfSattr is what of a creating call's sattr3 applies once the object
// exists: not the mode (given at creation), and, as in knfsd, an owner only
// for a caller served as root.
func (w *worker) restOfSattr(s *sattr, keepSize bool) *sattr {
	rest := *s
	rest.setMode = false
	rest.setSize = rest.setSize && keepSize
	if !w.callerIsRoot() {
		rest.setUID, rest.setGID = false, false
	}
	return &rest
}

// createReply answers CREATE, MKDIR, SYMLINK and MKNOD: on success the new
// object's handle and attributes, and the directory's wcc_data either way.
func (w *worker) createReply(xid uint32, err error, obj *node, dir *node, pre *unix.Statx_t, name string) []byte {
	out := successHeader(xid)
	if err == nil {
		var fh []byte
		fh, err = w.srv.handleOf(obj.fd, &obj.st)
		if err == nil {
			putStatus(out, nfs3.OK)
			putPostOpFH(out, fh)
			putPostOpAttr(out, attrsOf(obj.fd))
			w.srv.remember(fh, obj.st.Mode, dir.fh, name)
		}
	}
	if err != nil {
		putStatus(out, statusOf(err))
	}
	putWcc(out, pre, attrsOf(dir.fd))
	return out.Buf
}

// create answers CREATE. UNCHECKED of an existing regular file keeps it and,
// like knfsd, applies only a size; GUARDED refuses an existing name.
// EXCLUSIVE is not offered: clients fall back to GUARDED.
func (w *worker) create(xid uint32, dir *node, a *nfsArgs) []byte {
	pre := dir.st
	switch {
	case a.how == nfs3.Exclusive:
		return wccErrorReply(xid, nfs3.ErrNotSupp, &pre, &pre)
	case w.readOnly():
		return wccErrorReply(xid, nfs3.ErrROFS, &pre, &pre)
	case !dir.isDir():
		return wccErrorReply(xid, nfs3.ErrNotDir, &pre, &pre)
	}
	obj := &node{fd: -1}
	defer obj.close()
	err := w.as(func() error {
		mode, requested := requestedMode(a, 0o666)
		// Read-only access: a new file may be opened so whatever its
		// mode.
		fd, err := unix.Openat(dir.fd, a.name, unix.O_CREAT|unix.O_EXCL|unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_NONBLOCK|unix.O_CLOEXEC, mode)
		if err == unix.EEXIST && a.how == nfs3.Unchecked {
			if obj.fd, err = lookupAt(dir.fd, a.name); err != nil {
				return err
			}
			if err := statFD(obj.fd, &obj.st); err != nil {
				return err
			}
			if !obj.isReg() {
				return unix.EEXIST
			}
			if a.sattr.setSize {
				return w.truncate(obj, a.sattr.size)
			}
			return nil
		}
		if err != nil {
			return err
		}
		obj.fd = fd
		// The process umask took bits away that the client asked for
		// (none when the directory's default ACL made the mode).
		if requested && mode&w.srv.umask != 0 && !hasDefaultACL(dir) {
			if err := unix.Fchmod(fd, mode); err != nil {
				return err
			}
		}
		if err := statFD(fd, &obj.st); err != nil {
			return err
		}
		return w.applySattr(obj, w.restOfSattr(&a.sattr, true))
	})
	return w.createReply(xid, err, obj, dir, &pre, a.name)
}

// makeNode answers MKDIR, SYMLINK and MKNOD. Modes apply exactly (the
// process umask excluded: the client applied its own; setuid, setgid and
// sticky included); a setgid bit a directory inherits from its parent stays.
// A symlink has no mode of its own (knfsd ignores it too).
func (w *worker) makeNode(xid, proc uint32, dir *node, a *nfsArgs) []byte {
	pre := dir.st
	var typ uint32
	if proc == nfs3.ProcMknod {
		switch a.ftype {
		case nfs3.TypeChr:
			typ = unix.S_IFCHR
		case nfs3.TypeBlk:
			typ = unix.S_IFBLK
		case nfs3.TypeSock:
			typ = unix.S_IFSOCK
		case nfs3.TypeFifo:
			typ = unix.S_IFIFO
		default:
			return wccErrorReply(xid, nfs3.ErrBadType, &pre, &pre) // MKNOD makes special files only
		}
	}
	switch {
	case w.readOnly():
		return wccErrorReply(xid, nfs3.ErrROFS, &pre, &pre)
	case !dir.isDir():
		return wccErrorReply(xid, nfs3.ErrNotDir, &pre, &pre)
	}
	obj := &node{fd: -1}
	defer obj.close()
	err := w.as(func() error {
		var err error
		mode, exact := requestedMode(a, 0o755)
		switch proc {
		case nfs3.ProcMkdir:
			err = unix.Mkdirat(dir.fd, a.name, mode)
		case nfs3.ProcSymlink:
			err = unix.Symlinkat(a.target, dir.fd, a.name)
		case nfs3.ProcMknod:
			mode, _ = requestedMode(a, 0o644)
			exact = true
			err = unix.Mknodat(dir.fd, a.name, typ|mode, int(unix.Mkdev(a.spec[0], a.spec[1])))
		}
		if err != nil {
			return err
		}
		if obj.fd, err = lookupAt(dir.fd, a.name); err != nil {
			return err
		}
		if err := statFD(obj.fd, &obj.st); err != nil {
			return err
		}
		if exact && proc != nfs3.ProcSymlink {
			if err := fixMode(obj, mode, hasDefaultACL(dir)); err != nil {
				return err
			}
		}
		return w.applySattr(obj, w.restOfSattr(&a.sattr, false))
	})
	return w.createReply(xid, err, obj, dir, &pre, a.name)
}

// fixMode gives a just-made object exactly the mode the client asked for:
// the process umask may have taken bits away, and mkdir ignores setuid and
// setgid. In a directory with a default ACL (inherited) the kernel applied
// no umask and made the permission bits from the ACL, as knfsd leaves
// them: only the setuid, setgid and sticky bits are fixed.
func fixMode(obj *node, mode uint32, inherited bool) error {
	have, want := uint32(obj.st.Mode)&0o7777, mode
	if inherited {
		want = have&0o777 | mode&0o7000
	}
	if obj.isDir() {
		want |= have & unix.S_ISGID
	}
	if have == want {
		return nil
	}
	return chmodFD(obj.fd, want)
}

// remove answers REMOVE (unlink: never a directory) and RMDIR (never a
// file). The open file the cache may hold for the removed name goes, so its
// space is freed at once, as knfsd's file cache does on unlink.
func (w *worker) remove(xid, proc uint32, dir *node, name string) []byte {
	pre := dir.st
	switch {
	case w.readOnly():
		return wccErrorReply(xid, nfs3.ErrROFS, &pre, &pre)
	case !dir.isDir():
		return wccErrorReply(xid, nfs3.ErrNotDir, &pre, &pre)
	}
	var gone []byte
	err := w.as(func() error {
		gone, _ = w.srv.handleAt(dir.fd, name)
		flags := 0
		if proc == nfs3.ProcRmdir {
			flags = unix.AT_REMOVEDIR
		}
		return unix.Unlinkat(dir.fd, name, flags)
	})
	if err == nil && gone != nil {
		w.srv.forget(gone)
	}
	return wccErrorReply(xid, statusOf(err), &pre, attrsOf(dir.fd))
}

// forget drops what the server keeps for a handle whose name went away: its
// cached open file and its hint.
func (s *Server) forget(fh []byte) {
	s.files.drop(fh)
	s.hints.drop(fh)
}

// rename answers RENAME. A file it replaces leaves the file cache, as with
// REMOVE; the moved object's hint follows it.
func (w *worker) rename(xid uint32, from *node, a *nfsArgs) []byte {
	to, err := w.srv.open(a.fh2)
	if err != nil {
		return nfsErrorReply(xid, nfs3.ProcRename, nfs3.ErrStale)
	}
	defer to.close()
	fromPre, toPre := from.st, to.st
	var status nfs3.Status
	switch {
	case w.readOnly():
		status = nfs3.ErrROFS
	case !from.isDir() || !to.isDir():
		status = nfs3.ErrNotDir
	}
	if status != nfs3.OK {
		out := successHeader(xid)
		putStatus(out, status)
		putWcc(out, &fromPre, &fromPre)
		putWcc(out, &toPre, &toPre)
		return out.Buf
	}
	var moved, replaced []byte
	var st unix.Statx_t
	err = w.as(func() error {
		moved, _ = w.srv.handleAt(from.fd, a.name)
		replaced, _ = w.srv.handleAt(to.fd, a.name2)
		if err := unix.Renameat(from.fd, a.name, to.fd, a.name2); err != nil {
			return err
		}
		statAt(to.fd, a.name2, &st)
		return nil
	})
	if err == nil {
		if replaced != nil && !bytes.Equal(replaced, moved) {
			w.srv.forget(replaced)
		}
		if moved != nil && st.Mask != 0 {
			w.srv.remember(moved, st.Mode, to.fh, a.name2)
		}
	}
	out := successHeader(xid)
	putStatus(out, statusOf(err))
	putWcc(out, &fromPre, attrsOf(from.fd))
	putWcc(out, &toPre, attrsOf(to.fd))
	return out.Buf
}

// link answers LINK. The new name is made from the file's descriptor
// through /proc (linkat with AT_EMPTY_PATH needs CAP_DAC_READ_SEARCH, which
// the caller's credentials do not carry).
func (w *worker) link(xid uint32, file *node, a *nfsArgs) []byte {
	dir, err := w.srv.open(a.fh2)
	if err != nil {
		return nfsErrorReply(xid, nfs3.ProcLink, nfs3.ErrStale)
	}
	defer dir.close()
	pre := dir.st
	switch {
	case w.readOnly():
		err = unix.EROFS
	case !dir.isDir():
		err = unix.ENOTDIR
	default:
		err = w.as(func() error {
			return unix.Linkat(unix.AT_FDCWD, procFD(file.fd), dir.fd, a.name, unix.AT_SYMLINK_FOLLOW)
		})
	}
	out := successHeader(xid)
	putStatus(out, statusOf(err))
	putPostOpAttr(out, attrsOf(file.fd))
	putWcc(out, &pre, attrsOf(dir.fd))
	return out.Buf
}
