package server

import (
	"golang.org/x/sys/unix"

	"github.com/rdmafs/rdmafs/nfs3"
	"github.com/rdmafs/rdmafs/sunrpc/xdr"
)

// Attributes are encoded straight from statx, as knfsd encodes them from the
// inode: the file's own atime, mtime and ctime with nanoseconds, the twelve
// mode bits, the space used, the device numbers of special files, and the
// device of the export's filesystem as fsid.

// fattrSize is the size of an encoded fattr3.
const fattrSize = 84

// putFattr encodes a fattr3.
func putFattr(w *xdr.Encoder, st *unix.Statx_t) {
	w.Uint32(uint32(nfs3.TypeOfMode(uint32(st.Mode))))
	w.Uint32(uint32(st.Mode) & 0o7777)
	w.Uint32(st.Nlink)
	w.Uint32(st.Uid)
	w.Uint32(st.Gid)
	w.Uint64(st.Size)
	w.Uint64(st.Blocks * 512)
	if t := st.Mode & unix.S_IFMT; t == unix.S_IFCHR || t == unix.S_IFBLK {
		w.Uint32(st.Rdev_major)
		w.Uint32(st.Rdev_minor)
	} else {
		w.Uint32(0)
		w.Uint32(0)
	}
	w.Uint64(unix.Mkdev(st.Dev_major, st.Dev_minor))
	w.Uint64(st.Ino)
	putTime(w, st.Atime)
	putTime(w, st.Mtime)
	putTime(w, st.Ctime)
}

// putTime encodes an nfstime3. Seconds are unsigned 32 bits on the wire, as
// knfsd sends them (times before 1970 wrap).
func putTime(w *xdr.Encoder, t unix.StatxTimestamp) {
	w.Uint32(uint32(t.Sec))
	w.Uint32(t.Nsec)
}

// putPostOpAttr encodes a post_op_attr: attributes, or none when st is nil.
func putPostOpAttr(w *xdr.Encoder, st *unix.Statx_t) {
	w.Bool(st != nil)
	if st != nil {
		putFattr(w, st)
	}
}

// putWcc encodes wcc_data: the size, mtime and ctime before the operation
// and the attributes after it, each when known.
func putWcc(w *xdr.Encoder, pre, post *unix.Statx_t) {
	w.Bool(pre != nil)
	if pre != nil {
		w.Uint64(pre.Size)
		putTime(w, pre.Mtime)
		putTime(w, pre.Ctime)
	}
	putPostOpAttr(w, post)
}

// putPostOpFH encodes a post_op_fh3.
func putPostOpFH(w *xdr.Encoder, fh []byte) {
	w.Bool(fh != nil)
	if fh != nil {
		w.Opaque(fh)
	}
}

// attrsOf is the current attributes of an open object, nil if it cannot be
// stat'ed (for the optional attributes of a reply).
func attrsOf(fd int) *unix.Statx_t {
	var st unix.Statx_t
	if statFD(fd, &st) != nil {
		return nil
	}
	return &st
}
