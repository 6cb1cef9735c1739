package server

import (
	"math"

	nfs "github.com/willscott/go-nfs"
	"golang.org/x/sys/unix"
)

// frontAnswers lists the NFS procedures a worker answers itself instead of
// passing them to go-nfs:
//
//   - ACCESS: go-nfs grants every bit.
//   - SETATTR: go-nfs drops setuid/setgid/sticky, skips a mode change that
//     only touches them, turns "set to server time" into an explicit time
//     (which needs ownership instead of write permission) and rewrites atime
//     from its mtime when only mtime is set.
//   - MKNOD: go-nfs creates nothing for a character device yet answers OK,
//     and hands out the handle before the node exists.
//   - SYMLINK: go-nfs reads the target with a single Read, which comes back
//     short when the target crosses its 4 KiB read buffer.
//   - LINK: go-nfs decodes LINK3args in the wrong layout.
//   - COMMIT: go-nfs never syncs.
//   - FSINFO: go-nfs offers 1 GiB reads and writes, more than the front
//     accepts in one record.
//   - PATHCONF: go-nfs claims a link limit of 1 and no chown restriction.
//   - READ and WRITE: go-nfs copies the data four times and allocates a
//     buffer of the call's size for each; the worker reads into and
//     writes from the message buffers (see io.go).
func frontAnswers(proc uint32) bool {
	switch proc {
	case nfsSetattr, nfsAccess, nfsSymlink, nfsMknod, nfsLink, nfsCommit, nfsFsinfo, nfsPathconf, nfsRead, nfsWrite:
		return true
	}
	return false
}

// answer serves a procedure frontAnswers lists. The worker's filesystem
// runs every system call as the caller, as for go-nfs's procedures, and the
// attributes come from go-nfs's encoder, so both paths describe objects
// alike (go-nfs reports mtime as atime and ctime too; mixing conventions
// would make clients see changes that did not happen).
func (w *worker) answer(c *call) []byte {
	xid, proc, a := c.rpc.xid, c.rpc.proc, c.args
	srv := w.ss.srv
	if proc == nfsRead || proc == nfsWrite {
		if reply, ok := w.dataCall(c); ok {
			return reply
		}
	}
	rel, err := srv.pathFor(a.fh)
	if err != nil {
		return nfsErrorReply(xid, proc, nfs3ErrStale)
	}
	switch proc {
	case nfsAccess:
		return w.access(xid, rel, a.mask)
	case nfsSetattr:
		return w.setattr(xid, rel, a)
	case nfsSymlink:
		return w.symlink(xid, rel, a)
	case nfsMknod:
		return w.mknod(xid, rel, a)
	case nfsLink:
		dir, err := srv.pathFor(a.fh2)
		if err != nil {
			return nfsErrorReply(xid, proc, nfs3ErrStale)
		}
		return w.link(xid, rel, dir, a.name)
	case nfsCommit:
		return w.commit(xid, rel)
	case nfsRead:
		return w.read(xid, rel, a)
	case nfsWrite:
		return w.write(xid, rel, a)
	case nfsFsinfo:
		return w.fsinfo(xid, rel)
	case nfsPathconf:
		return w.pathconf(xid, rel)
	}
	return acceptedReply(xid, acceptProcUnavail)
}

// ACCESS3 bits.
const (
	accessRead    = 0x01
	accessLookup  = 0x02
	accessModify  = 0x04
	accessExtend  = 0x08
	accessDelete  = 0x10
	accessExecute = 0x20
)

func (w *worker) access(xid uint32, rel string, mask uint32) []byte {
	fi, err := w.fs.Lstat(rel)
	if err != nil {
		return nfsErrorReply(xid, nfsAccess, statusOf(err))
	}
	granted, err := w.fs.access(rel, fi.IsDir(), mask)
	out := successHeader(xid)
	out.Uint32(statusOf(err))
	nfs.WritePostOpAttrs(out, nfs.ToFileAttribute(fi, rel))
	if err == nil {
		out.Uint32(granted)
	}
	return out.Buf
}

// access asks the kernel, as the caller, which of the requested ACCESS3 bits
// it grants: faccessat2 with AT_EACCESS checks the thread's filesystem
// credentials, so it sees what the caller's real operations would see
// (ACLs, read-only mounts and root's rights included).
func (fs *billyFS) access(rel string, dir bool, mask uint32) (uint32, error) {
	var granted uint32
	err := fs.do("access", rel, func() error {
		o, err := fs.srv.locate(rel)
		if err != nil {
			return err
		}
		defer o.close()
		check := func(bits, mode uint32) {
			if mask&bits == 0 {
				return
			}
			flags := o.flags(unix.AT_EACCESS | unix.AT_SYMLINK_NOFOLLOW)
			if unix.Faccessat2(o.dirfd, o.name, mode, flags) == nil {
				granted |= mask & bits
			}
		}
		check(accessRead, unix.R_OK)
		if dir {
			// Changing entries needs search permission as well as write.
			check(accessLookup|accessExecute, unix.X_OK)
			check(accessModify|accessExtend|accessDelete, unix.W_OK|unix.X_OK)
		} else {
			check(accessExecute, unix.X_OK)
			check(accessModify|accessExtend|accessDelete, unix.W_OK)
		}
		return nil
	})
	if fs.readOnly() {
		granted &^= accessModify | accessExtend | accessDelete
	}
	return granted, err
}

func (w *worker) setattr(xid uint32, rel string, a *nfsArgs) []byte {
	fi, err := w.fs.Lstat(rel)
	if err != nil {
		return nfsErrorReply(xid, nfsSetattr, statusOf(err))
	}
	pre := nfs.ToFileAttribute(fi, rel)
	var status uint32
	switch {
	case a.guard && (pre.Ctime.Seconds != a.guardTim[0] || pre.Ctime.Nseconds != a.guardTim[1]):
		status = nfs3ErrNotSync
	case w.fs.readOnly():
		status = nfs3ErrROFS
	default:
		status = statusOf(w.fs.setattr(rel, &a.sattr))
	}
	out := successHeader(xid)
	out.Uint32(status)
	nfs.WriteWcc(out, pre.AsCache(), w.fs.attrs(rel))
	return out.Buf
}

// setattr applies a sattr3 in the order that keeps each change: size first
// (truncating clears setuid for non-root callers), then owner (chown clears
// setuid too), then mode, then times (the others change ctime and a
// truncate mtime).
func (fs *billyFS) setattr(rel string, s *sattr) error {
	if s.setSize {
		if err := fs.truncate(rel, s.size); err != nil {
			return err
		}
	}
	if !s.setUID && !s.setGID && !s.setMode && s.atimeHow == timeDontChange && s.mtimeHow == timeDontChange {
		return nil
	}
	return fs.do("setattr", rel, func() error {
		o, err := fs.srv.locate(rel)
		if err != nil {
			return err
		}
		defer o.close()
		if s.setUID || s.setGID {
			uid, gid := -1, -1
			if s.setUID {
				uid = int(s.uid)
			}
			if s.setGID {
				gid = int(s.gid)
			}
			if err := unix.Fchownat(o.dirfd, o.name, uid, gid, o.flags(unix.AT_SYMLINK_NOFOLLOW)); err != nil {
				return err
			}
		}
		if s.setMode {
			if err := chmodAt(o, s.mode&0o7777); err != nil {
				return err
			}
		}
		if s.atimeHow != timeDontChange || s.mtimeHow != timeDontChange {
			return unix.UtimesNanoAt(o.dirfd, o.name, timespecs(s), o.flags(unix.AT_SYMLINK_NOFOLLOW))
		}
		return nil
	})
}

func (fs *billyFS) truncate(rel string, size uint64) error {
	return fs.do("truncate", rel, func() error {
		if size > math.MaxInt64 {
			return unix.EFBIG
		}
		fd, err := fs.openRegular(rel, unix.O_WRONLY)
		if err != nil {
			return err
		}
		defer unix.Close(fd)
		return unix.Ftruncate(fd, int64(size))
	})
}

// attrs are an object's attributes as go-nfs encodes them, nil when it
// cannot be stat'ed.
func (fs *billyFS) attrs(rel string) *nfs.FileAttribute {
	fi, err := fs.Lstat(rel)
	if err != nil {
		return nil
	}
	return nfs.ToFileAttribute(fi, rel)
}

func cacheOf(a *nfs.FileAttribute) *nfs.FileCacheAttribute {
	if a == nil {
		return nil
	}
	return a.AsCache()
}

func (w *worker) mknod(xid uint32, dir string, a *nfsArgs) []byte {
	var typ uint32
	switch a.ftype {
	case typeChr:
		typ = unix.S_IFCHR
	case typeBlk:
		typ = unix.S_IFBLK
	case typeSock:
		typ = unix.S_IFSOCK
	case typeFifo:
		typ = unix.S_IFIFO
	default:
		return nfsErrorReply(xid, nfsMknod, nfs3ErrBadType) // MKNOD makes special files only
	}
	return w.create(xid, nfsMknod, dir, a, func(rel string) error {
		perm, exact := w.fs.requestedMode(0o644)
		return w.fs.mknod(rel, typ, perm, exact, unix.Mkdev(a.spec[0], a.spec[1]))
	})
}

// symlink ignores a mode in the sattr3: a symlink has none of its own on
// Linux (knfsd ignores it too).
func (w *worker) symlink(xid uint32, dir string, a *nfsArgs) []byte {
	return w.create(xid, nfsSymlink, dir, a, func(rel string) error {
		return w.fs.Symlink(a.target, rel)
	})
}

// create makes a.name in dir with mk, applies the rest of the sattr3 and
// answers with the new object's handle and attributes and the directory's
// wcc_data (the result shape MKNOD and SYMLINK share).
func (w *worker) create(xid, proc uint32, dir string, a *nfsArgs, mk func(rel string) error) []byte {
	if w.fs.readOnly() {
		return nfsErrorReply(xid, proc, nfs3ErrROFS)
	}
	dirPre := cacheOf(w.fs.attrs(dir))
	rel := joinRel(dir, a.name)
	err := mk(rel)
	if err == nil {
		rest := a.sattr
		rest.setMode, rest.setSize = false, false // applied at creation; meaningless
		err = w.fs.setattr(rel, &rest)
	}
	out := successHeader(xid)
	out.Uint32(statusOf(err))
	if err == nil {
		fh, herr := w.ss.srv.handleFor(rel)
		out.Bool(herr == nil)
		if herr == nil {
			out.Opaque(fh)
		}
		nfs.WritePostOpAttrs(out, w.fs.attrs(rel))
	}
	nfs.WriteWcc(out, dirPre, w.fs.attrs(dir))
	return out.Buf
}

func (w *worker) link(xid uint32, file, dir, name string) []byte {
	dirPre := cacheOf(w.fs.attrs(dir))
	status := uint32(nfs3ErrROFS)
	if !w.fs.readOnly() {
		status = statusOf(w.fs.Link(file, joinRel(dir, name)))
	}
	out := successHeader(xid)
	out.Uint32(status)
	nfs.WritePostOpAttrs(out, w.fs.attrs(file))
	nfs.WriteWcc(out, dirPre, w.fs.attrs(dir))
	return out.Buf
}

// commit syncs the whole file (COMMIT's range is advisory). Nothing needs
// committing on a read-only export.
func (w *worker) commit(xid uint32, rel string) []byte {
	var err error
	if !w.fs.readOnly() {
		err = w.fs.do("commit", rel, func() error {
			fd, err := w.fs.openRegular(rel, unix.O_RDONLY)
			if err == unix.EACCES {
				fd, err = w.fs.openRegular(rel, unix.O_WRONLY)
			}
			if err != nil {
				return err
			}
			defer unix.Close(fd)
			return unix.Fsync(fd)
		})
	}
	out := successHeader(xid)
	out.Uint32(statusOf(err))
	nfs.WriteWcc(out, nil, w.fs.attrs(rel))
	if err == nil {
		out.Buf = append(out.Buf, w.ss.srv.verifier[:]...)
	}
	return out.Buf
}

// FSINFO3 properties.
const (
	fsfLink        = 0x01
	fsfSymlink     = 0x02
	fsfHomogeneous = 0x08
	fsfCanSetTime  = 0x10
)

func (w *worker) fsinfo(xid uint32, rel string) []byte {
	out := successHeader(xid)
	out.Uint32(nfs3OK)
	nfs.WritePostOpAttrs(out, w.fs.attrs(rel))
	out.Uint32(maxIO)    // rtmax
	out.Uint32(maxIO)    // rtpref
	out.Uint32(4096)     // rtmult
	out.Uint32(maxIO)    // wtmax
	out.Uint32(maxIO)    // wtpref
	out.Uint32(4096)     // wtmult
	out.Uint32(64 << 10) // dtpref
	out.Uint64(math.MaxInt64)
	out.Uint32(0) // time_delta: 1 ns
	out.Uint32(1)
	out.Uint32(fsfLink | fsfSymlink | fsfHomogeneous | fsfCanSetTime)
	return out.Buf
}

func (w *worker) pathconf(xid uint32, rel string) []byte {
	nameMax := uint32(maxName)
	var sfs unix.Statfs_t
	if unix.Fstatfs(w.ss.srv.rootfd, &sfs) == nil && sfs.Namelen > 0 && sfs.Namelen < maxName {
		nameMax = uint32(sfs.Namelen)
	}
	out := successHeader(xid)
	out.Uint32(nfs3OK)
	nfs.WritePostOpAttrs(out, w.fs.attrs(rel))
	out.Uint32(255) // linkmax: a conservative figure, as knfsd reports by default
	out.Uint32(nameMax)
	out.Bool(true)  // no_trunc: long names are refused, not cut
	out.Bool(true)  // chown_restricted
	out.Bool(false) // case_insensitive
	out.Bool(true)  // case_preserving
	return out.Buf
}
