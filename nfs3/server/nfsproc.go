package server

import (
	"math"

	"github.com/rdmafs/rdmafs/nfs3"
	"github.com/rdmafs/rdmafs/sunrpc"
	"golang.org/x/sys/unix"
)

// answer serves one NFS call. The call's handle becomes a node as the
// server (see Server.open); every filesystem operation on it then runs as
// the call's caller (see worker.as), so the kernel checks the caller's
// rights and new objects belong to the caller, as with knfsd.
func (w *worker) answer(c *call) []byte {
	xid, proc, a := c.xid, c.proc, c.args
	w.cur = c
	if reply, ok := w.cachedData(c); ok {
		return reply
	}
	n, err := w.srv.open(a.fh)
	if err != nil {
		return nfsErrorReply(xid, proc, nfs3.ErrStale)
	}
	defer n.close()
	switch proc {
	case nfs3.ProcGetattr:
		out := successHeader(xid)
		putStatus(out, nfs3.OK)
		putFattr(out, &n.st)
		return out.Buf
	case nfs3.ProcSetattr:
		return w.setattr(xid, n, a)
	case nfs3.ProcLookup:
		return w.lookup(xid, n, a.name)
	case nfs3.ProcAccess:
		return w.access(xid, n, a.mask)
	case nfs3.ProcReadlink:
		return w.readlink(xid, n)
	case nfs3.ProcRead:
		return w.read(xid, n, a)
	case nfs3.ProcWrite:
		return w.write(xid, n, a)
	case nfs3.ProcCreate:
		return w.create(xid, n, a)
	case nfs3.ProcMkdir, nfs3.ProcSymlink, nfs3.ProcMknod:
		return w.makeNode(xid, proc, n, a)
	case nfs3.ProcRemove, nfs3.ProcRmdir:
		return w.remove(xid, proc, n, a.name)
	case nfs3.ProcRename:
		return w.rename(xid, n, a)
	case nfs3.ProcLink:
		return w.link(xid, n, a)
	case nfs3.ProcReaddir, nfs3.ProcReaddirplus:
		return w.readdir(xid, proc, n, a)
	case nfs3.ProcFsstat:
		return w.fsstat(xid, n)
	case nfs3.ProcFsinfo:
		return w.fsinfo(xid, n)
	case nfs3.ProcPathconf:
		return w.pathconf(xid, n)
	case nfs3.ProcCommit:
		return w.commit(xid, n)
	}
	return acceptedReply(xid, sunrpc.ProcUnavail)
}

// as runs fn with the current call's caller's filesystem credentials.
func (w *worker) as(fn func() error) error {
	return w.srv.self.runAs(w.cur.cred, fn)
}

func (w *worker) readOnly() bool { return w.srv.opts.ReadOnly }

// callerIsRoot reports whether the caller is served as uid 0 (after the
// export's squashing).
func (w *worker) callerIsRoot() bool { return w.cur.cred.uid == 0 }

// access asks the kernel, as the caller, which of the requested ACCESS3 bits
// it grants: faccessat2 with AT_EACCESS checks the thread's filesystem
// credentials, so it sees what the caller's real operations would see
// (ACLs, read-only mounts and root's rights included).
func (w *worker) access(xid uint32, n *node, mask uint32) []byte {
	var granted uint32
	err := w.as(func() error {
		check := func(bits, mode uint32) {
			if mask&bits == 0 {
				return
			}
			if unix.Faccessat2(n.fd, "", mode, unix.AT_EMPTY_PATH|unix.AT_EACCESS) == nil {
				granted |= mask & bits
			}
		}
		check(nfs3.AccessRead, unix.R_OK)
		if n.isDir() {
			// Changing entries needs search permission as well as write.
			check(nfs3.AccessLookup|nfs3.AccessExecute, unix.X_OK)
			check(nfs3.AccessModify|nfs3.AccessExtend|nfs3.AccessDelete, unix.W_OK|unix.X_OK)
		} else {
			check(nfs3.AccessExecute, unix.X_OK)
			check(nfs3.AccessModify|nfs3.AccessExtend|nfs3.AccessDelete, unix.W_OK)
		}
		return nil
	})
	if w.readOnly() {
		granted &^= nfs3.AccessModify | nfs3.AccessExtend | nfs3.AccessDelete
	}
	out := successHeader(xid)
	putStatus(out, statusOf(err))
	putPostOpAttr(out, &n.st)
	if err == nil {
		out.Uint32(granted)
	}
	return out.Buf
}

// readlink answers READLINK; like knfsd it needs no permission beyond
// holding the handle.
func (w *worker) readlink(xid uint32, n *node) []byte {
	if !n.isLink() {
		return attrErrorReply(xid, nfs3.ErrInval, &n.st)
	}
	var target []byte
	var err error
	for size := 256; ; size *= 2 {
		buf := make([]byte, size)
		var k int
		k, err = unix.Readlinkat(n.fd, "", buf)
		if err != nil || k < size {
			target = buf[:max(k, 0)]
			break
		}
		if size >= 1<<16 {
			err = unix.ENAMETOOLONG
			break
		}
	}
	if err != nil {
		return attrErrorReply(xid, statusOf(err), &n.st)
	}
	out := successHeader(xid)
	putStatus(out, nfs3.OK)
	putPostOpAttr(out, &n.st)
	// The path is DDP-eligible (RFC 8267): a client that offers a write
	// chunk for it gets it there, as from knfsd.
	w.req.Placement = sunrpc.Placement{Off: len(out.Buf) + 4, Len: len(target)}
	out.Opaque(target)
	return out.Buf
}

// attrErrorReply is the failure reply of a procedure whose resfail is one
// post_op_attr (GETATTR has none, but never fails after the handle opened).
func attrErrorReply(xid uint32, status nfs3.Status, st *unix.Statx_t) []byte {
	out := successHeader(xid)
	putStatus(out, status)
	putPostOpAttr(out, st)
	return out.Buf
}

// wccErrorReply is the failure reply of a procedure whose resfail is one
// wcc_data.
func wccErrorReply(xid uint32, status nfs3.Status, pre, post *unix.Statx_t) []byte {
	out := successHeader(xid)
	putStatus(out, status)
	putWcc(out, pre, post)
	return out.Buf
}

func (w *worker) setattr(xid uint32, n *node, a *nfsArgs) []byte {
	pre := n.st
	var status nfs3.Status
	switch {
	case a.guard && (uint32(pre.Ctime.Sec) != a.guardTim[0] || pre.Ctime.Nsec != a.guardTim[1]):
		status = nfs3.ErrNotSync
	case w.readOnly():
		status = nfs3.ErrROFS
	default:
		status = statusOf(w.as(func() error { return w.applySattr(n, &a.sattr) }))
	}
	return wccErrorReply(xid, status, &pre, attrsOf(n.fd))
}

// applySattr applies a sattr3, as the caller, in the order that keeps each
// change: size first (truncating clears setuid for non-root callers), then
// owner (chown clears setuid too), then mode, then times (the others change
// ctime and a truncate mtime). Like knfsd, a mode for a symlink is ignored
// (Linux gives symlinks none).
func (w *worker) applySattr(n *node, s *sattr) error {
	if s.setSize {
		if err := w.truncate(n, s.size); err != nil {
			return err
		}
	}
	if s.setUID || s.setGID {
		uid, gid := -1, -1
		if s.setUID {
			uid = int(s.uid)
		}
		if s.setGID {
			gid = int(s.gid)
		}
		if err := unix.Fchownat(n.fd, "", uid, gid, unix.AT_EMPTY_PATH); err != nil {
			return err
		}
	}
	if s.setMode && !n.isLink() {
		if err := chmodFD(n.fd, s.mode&0o7777); err != nil {
			return err
		}
	}
	if s.atimeHow == nfs3.DontChange && s.mtimeHow == nfs3.DontChange {
		return nil
	}
	if s.setSize && s.atimeHow == nfs3.DontChange && s.mtimeHow == nfs3.ServerTime {
		// The truncate set the mtime to now (ftruncate always does):
		// all that is asked, and what an open with O_TRUNC sends.
		return nil
	}
	err := setTimesFD(n.fd, n.isLink(), timespecs(s))
	if err == unix.EPERM && s.atimeHow != nfs3.ClientTime && s.mtimeHow != nfs3.ClientTime {
		// utimensat lets a caller who may write but does not own the
		// file set both times to now, never one alone; knfsd sets one
		// alone. Both, rather than a refusal.
		err = setTimesFD(n.fd, n.isLink(), nil)
	}
	return err
}

// timespecs turns a sattr3's times into utimensat's: "set to server time"
// is UTIME_NOW, where a client's time needs ownership, as in knfsd. Both
// set to now need only write permission (applySattr).
func timespecs(s *sattr) []unix.Timespec {
	one := func(how nfs3.SetTime, t [2]uint32) unix.Timespec {
		switch how {
		case nfs3.ServerTime:
			return unix.Timespec{Nsec: unix.UTIME_NOW}
		case nfs3.ClientTime:
			return unix.Timespec{Sec: int64(t[0]), Nsec: int64(t[1])}
		}
		return unix.Timespec{Nsec: unix.UTIME_OMIT}
	}
	return []unix.Timespec{one(s.atimeHow, s.atime), one(s.mtimeHow, s.mtime)}
}

// truncate sets the size of a regular file, as the caller. Like knfsd's,
// it keeps the setuid and setgid bits (see identity.withFSetID).
func (w *worker) truncate(n *node, size uint64) error {
	if size > math.MaxInt64 {
		return unix.EFBIG
	}
	fd, err := w.openRegular(n, unix.O_WRONLY)
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	return w.srv.self.withFSetID(w.cur.cred, func() error { return unix.Ftruncate(fd, int64(size)) })
}

// openRegular opens the node's file for data; it runs as the caller. The
// node is reopened through /proc, which checks the caller's permission on
// the file itself, and only a regular file is ever opened: a device or FIFO
// could block a worker or act on the server's hardware.
//
// Like knfsd, the owner of a file may read and write it whatever its mode
// (a client creates a 0444 file and then writes it: cp, git), and a caller
// that may execute a file may read it (the client needs the bytes to run it).
func (w *worker) openRegular(n *node, flags int) (int, error) {
	switch {
	case n.isDir():
		return -1, unix.EISDIR
	case !n.isReg():
		return -1, unix.EINVAL
	}
	flags |= unix.O_CLOEXEC | unix.O_NOCTTY
	fd, err := unix.Open(procFD(n.fd), flags, 0)
	if err == unix.EACCES && w.ownerOverride(n, flags) {
		err = w.srv.self.asSelf(w.cur.cred, func() error {
			var oerr error
			fd, oerr = unix.Open(procFD(n.fd), flags, 0)
			return oerr
		})
	}
	return fd, err
}

func (w *worker) ownerOverride(n *node, flags int) bool {
	switch w.cur.proc {
	case nfs3.ProcRead, nfs3.ProcWrite, nfs3.ProcCommit, nfs3.ProcSetattr, nfs3.ProcCreate: // CREATE: a size in its sattr3
	default:
		return false
	}
	if n.st.Uid == w.cur.cred.uid {
		return true
	}
	return flags&unix.O_ACCMODE == unix.O_RDONLY &&
		unix.Faccessat2(n.fd, "", unix.X_OK, unix.AT_EMPTY_PATH|unix.AT_EACCESS) == nil
}

// commit syncs the whole file (COMMIT's range is advisory). Nothing needs
// committing on a read-only export.
func (w *worker) commit(xid uint32, n *node) []byte {
	pre := n.st
	var err error
	if !w.readOnly() {
		err = w.as(func() error {
			fd, err := w.openRegular(n, unix.O_RDONLY)
			if err == unix.EACCES {
				fd, err = w.openRegular(n, unix.O_WRONLY)
			}
			if err != nil {
				return err
			}
			defer unix.Close(fd)
			return unix.Fsync(fd)
		})
	}
	return w.commitReply(xid, err, &pre, attrsOf(n.fd))
}

func (w *worker) commitReply(xid uint32, err error, pre, post *unix.Statx_t) []byte {
	out := successHeader(xid)
	putStatus(out, statusOf(err))
	putWcc(out, pre, post)
	if err == nil {
		out.Buf = append(out.Buf, w.srv.verifier[:]...)
	}
	return out.Buf
}

// fsstat reports the statfs of the node's filesystem, as knfsd does (for a
// read-only export too).
func (w *worker) fsstat(xid uint32, n *node) []byte {
	var sfs unix.Statfs_t
	if err := unix.Fstatfs(n.fd, &sfs); err != nil {
		return attrErrorReply(xid, statusOf(err), &n.st)
	}
	unit := uint64(sfs.Frsize)
	if unit == 0 {
		unit = uint64(sfs.Bsize)
	}
	out := successHeader(xid)
	putStatus(out, nfs3.OK)
	putPostOpAttr(out, &n.st)
	out.Uint64(sfs.Blocks * unit)
	out.Uint64(sfs.Bfree * unit)
	out.Uint64(sfs.Bavail * unit)
	out.Uint64(sfs.Files)
	out.Uint64(sfs.Ffree)
	out.Uint64(sfs.Ffree)
	out.Uint32(0) // invarsec
	return out.Buf
}

func (w *worker) fsinfo(xid uint32, n *node) []byte {
	out := successHeader(xid)
	putStatus(out, nfs3.OK)
	putPostOpAttr(out, &n.st)
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
	out.Uint32(nfs3.FSFLink | nfs3.FSFSymlink | nfs3.FSFHomogeneous | nfs3.FSFCanSetTime)
	return out.Buf
}

func (w *worker) pathconf(xid uint32, n *node) []byte {
	nameMax := uint32(maxName)
	var sfs unix.Statfs_t
	if unix.Fstatfs(n.fd, &sfs) == nil && sfs.Namelen > 0 && sfs.Namelen < maxName {
		nameMax = uint32(sfs.Namelen)
	}
	out := successHeader(xid)
	putStatus(out, nfs3.OK)
	putPostOpAttr(out, &n.st)
	out.Uint32(255) // linkmax: a conservative figure, as knfsd reports by default
	out.Uint32(nameMax)
	out.Bool(true)  // no_trunc: long names are refused, not cut
	out.Bool(true)  // chown_restricted
	out.Bool(false) // case_insensitive
	out.Bool(true)  // case_preserving
	return out.Buf
}
