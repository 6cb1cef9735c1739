package server

import (
	"golang.org/x/sys/unix"

	"github.com/rdmafs/rdmafs/nfs3"
	"github.com/rdmafs/rdmafs/sunrpc/xdr"
)

// READDIR and READDIRPLUS page through a directory the way knfsd does: a
// cookie is the directory offset the filesystem gives each entry (getdents'
// d_off), so a listing needs no state on the server, and the client's cookie
// verifier is sent back as it came. "." and ".." are listed as the
// filesystem lists them; mount points below the export are left out, as they
// are not exported.

// readdirHead is the size of a READDIR(PLUS)3resok without entries: status,
// the directory's post_op_attr, the verifier, the end of the entry list and
// eof.
const readdirHead = 4 + 4 + fattrSize + 8 + 4 + 4

func (w *worker) readdir(xid, proc uint32, dir *node, a *nfsArgs) []byte {
	plus := proc == nfs3.ProcReaddirplus
	if !dir.isDir() {
		return attrErrorReply(xid, nfs3.ErrNotDir, &dir.st)
	}
	maxBytes := int(min(a.count, maxDirReply))
	dirBytes := int(min(a.dircount, maxDirReply))
	var entries xdr.Encoder
	var eof bool
	n := 0
	err := w.as(func() error {
		fd, err := unix.Open(procFD(dir.fd), unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
		if err != nil {
			return err
		}
		defer unix.Close(fd)
		if a.cookie != 0 {
			if _, err := unix.Seek(fd, int64(a.cookie), 0); err != nil {
				return errBadCookie
			}
		}
		size, dirSize := readdirHead, 0
		var one xdr.Encoder
		ended, err := readDirents(fd, make([]byte, 32<<10), func(ino uint64, off int64, typ uint8, name string) bool {
			if name == ".." && dir.root {
				ino = dir.st.Ino // nothing outside the export shows
			}
			one.Buf = one.Buf[:0]
			one.Bool(true)
			one.Uint64(ino)
			one.String(name)
			one.Uint64(uint64(off))
			info := len(one.Buf) - 4
			if plus {
				if !w.entryPlus(&one, fd, dir, name) {
					return true // gone meanwhile, or a mount point
				}
			} else if (typ == unix.DT_DIR || typ == unix.DT_UNKNOWN) && name != "." && name != ".." && w.srv.mountPoint(fd, name) {
				return true
			}
			if size+len(one.Buf) > maxBytes || plus && dirBytes > 0 && n > 0 && dirSize+info > dirBytes {
				return false
			}
			size += len(one.Buf)
			dirSize += info
			entries.Buf = append(entries.Buf, one.Buf...)
			n++
			return true
		})
		if err != nil {
			return err
		}
		eof = ended
		if n == 0 && !eof {
			return errTooSmall
		}
		return nil
	})
	if err != nil {
		return attrErrorReply(xid, statusOf(err), attrsOf(dir.fd))
	}
	out := successHeader(xid)
	putStatus(out, nfs3.OK)
	putPostOpAttr(out, attrsOf(dir.fd))
	out.Buf = append(out.Buf, a.verf[:]...)
	out.Buf = append(out.Buf, entries.Buf...)
	out.Bool(false)
	out.Bool(eof)
	return out.Buf
}

// entryPlus appends an entry's post_op_attr and post_op_fh3, looked up as
// the caller. It reports false for an entry to leave out: one that vanished
// since getdents saw it, or a mount point. Like knfsd, ".." of the export's
// root goes without handle and attributes.
func (w *worker) entryPlus(e *xdr.Encoder, dirfd int, dir *node, name string) bool {
	switch name {
	case ".":
		putPostOpAttr(e, &dir.st)
		putPostOpFH(e, dir.fh)
		return true
	case "..":
		if dir.root {
			putPostOpAttr(e, nil)
			putPostOpFH(e, nil)
			return true
		}
		fd, err := unix.Openat(dir.fd, "..", unix.O_PATH|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
		if err != nil {
			putPostOpAttr(e, nil)
			putPostOpFH(e, nil)
			return true
		}
		defer unix.Close(fd)
		var st unix.Statx_t
		if statFD(fd, &st) != nil {
			putPostOpAttr(e, nil)
			putPostOpFH(e, nil)
			return true
		}
		fh, err := w.srv.handleOf(fd, &st)
		if err != nil {
			fh = nil
		}
		putPostOpAttr(e, &st)
		putPostOpFH(e, fh)
		return true
	}
	var st unix.Statx_t
	switch err := statAt(dirfd, name, &st); {
	case err == unix.ENOENT:
		return false
	case err != nil:
		putPostOpAttr(e, nil)
		putPostOpFH(e, nil)
		return true
	case st.Mask&unix.STATX_MNT_ID != 0 && st.Mnt_id != uint64(w.srv.mountID):
		return false
	}
	fh, err := w.srv.handleAt(dirfd, name)
	if err != nil {
		fh = nil
	} else {
		w.srv.remember(fh, st.Mode, dir.fh, name)
	}
	putPostOpAttr(e, &st)
	putPostOpFH(e, fh)
	return true
}

// mountPoint reports whether name in dirfd is the root of another mount.
func (s *Server) mountPoint(dirfd int, name string) bool {
	var st unix.Statx_t
	if unix.Statx(dirfd, name, unix.AT_SYMLINK_NOFOLLOW|unix.AT_NO_AUTOMOUNT, unix.STATX_MNT_ID, &st) != nil {
		return false
	}
	return st.Mask&unix.STATX_MNT_ID != 0 && st.Mnt_id != uint64(s.mountID)
}
