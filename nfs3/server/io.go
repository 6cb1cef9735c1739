package server

import (
	"sync"

	nfs "github.com/willscott/go-nfs"
	"golang.org/x/sys/unix"

	"github.com/rdmafs/rdmafs/sunrpc/xdr"
)

// READ and WRITE are the data path, served by the worker itself: a READ
// reads the file straight into its reply, a WRITE writes straight from its
// call message. The file is opened for each call as its caller (see
// openRegular), so permissions are checked as for every other procedure.

// readReplyHead is the size of a READ reply before the data: the RPC reply
// header, status, post_op_attr with attributes, count, eof and the data's
// length.
const readReplyHead = 24 + 4 + 4 + fattrSize + 4 + 4 + 4

// fattrSize is the size of an encoded fattr3.
const fattrSize = 84

var zeroPad [4]byte

// readBuffers holds READ replies of the largest size between calls.
var readBuffers = sync.Pool{New: func() any {
	b := make([]byte, readReplyHead+maxIO+4)
	return &b
}}

// dataCall answers READ and WRITE of callers the server serves as itself
// from its file cache, and reports false for every other call (which then
// opens the file as its caller).
func (w *worker) dataCall(c *call) ([]byte, bool) {
	srv := w.ss.srv
	a := c.args
	if !srv.self.is(c.rpc.cred) {
		return nil, false
	}
	if c.rpc.proc == nfsWrite && w.fs.readOnly() {
		return nfsErrorReply(c.rpc.xid, nfsWrite, nfs3ErrROFS), true
	}
	f := srv.files.acquire(a.fh)
	if f == nil {
		rel, err := srv.pathFor(a.fh)
		if err != nil {
			return nfsErrorReply(c.rpc.xid, c.rpc.proc, nfs3ErrStale), true
		}
		mode := unix.O_RDWR
		if w.fs.readOnly() {
			mode = unix.O_RDONLY
		}
		var fd int
		err = w.fs.do("open", rel, func() error {
			var oerr error
			fd, oerr = w.fs.openRegular(rel, mode)
			return oerr
		})
		if err != nil {
			return nfsErrorReply(c.rpc.xid, c.rpc.proc, statusOf(err)), true
		}
		f = srv.files.add(a.fh, fd)
	}
	defer srv.files.release(f)
	var st unix.Statx_t
	if err := statFD(f.fd, &st); err != nil || st.Nlink == 0 {
		srv.files.drop(a.fh)
		return nfsErrorReply(c.rpc.xid, c.rpc.proc, nfs3ErrStale), true
	}
	if c.rpc.proc == nfsRead {
		return w.readFD(c.rpc.xid, "", f.fd, a), true
	}
	return w.writeFD(c.rpc.xid, "", f.fd, a), true
}

// read answers READ: status, attributes, count, eof and the data.
func (w *worker) read(xid uint32, rel string, a *nfsArgs) []byte {
	fd := -1
	err := w.fs.do("open", rel, func() error {
		var oerr error
		fd, oerr = w.fs.openRegular(rel, unix.O_RDONLY)
		return oerr
	})
	if err != nil {
		return nfsErrorReply(xid, nfsRead, statusOf(err))
	}
	defer unix.Close(fd)
	return w.readFD(xid, rel, fd, a)
}

// readFD answers READ from the open file fd.
func (w *worker) readFD(xid uint32, rel string, fd int, a *nfsArgs) []byte {
	bp := readBuffers.Get().(*[]byte)
	reply := (*bp)[:readReplyHead+int(a.count)]
	data := reply[readReplyHead:]
	n := 0
	for n < len(data) {
		m, err := unix.Pread(fd, data[n:], int64(a.offset)+int64(n))
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			readBuffers.Put(bp)
			return nfsErrorReply(xid, nfsRead, statusOf(err))
		}
		if m == 0 {
			break
		}
		n += m
	}
	var st unix.Statx_t
	if err := statFD(fd, &st); err != nil {
		readBuffers.Put(bp)
		return nfsErrorReply(xid, nfsRead, statusOf(err))
	}
	eof := a.offset+uint64(n) >= st.Size

	head := successHeader(xid)
	head.Uint32(nfs3OK)
	putPostOpAttr(head, rel, &st)
	head.Uint32(uint32(n))
	head.Bool(eof)
	head.Uint32(uint32(n))
	copy(reply, head.Buf)
	w.placement = Placement{Off: readReplyHead, Len: n}
	reply = append(reply[:readReplyHead+n], zeroPad[:(4-n&3)&3]...)
	// The reply goes out before w.answer returns (Session.reply), so the
	// buffer can go back then.
	w.afterReply = func() { readBuffers.Put(bp) }
	return reply
}

// write answers WRITE: the data is written from the call message and
// synced first if the client asked for DATA_SYNC or FILE_SYNC.
func (w *worker) write(xid uint32, rel string, a *nfsArgs) []byte {
	if w.fs.readOnly() {
		return nfsErrorReply(xid, nfsWrite, nfs3ErrROFS)
	}
	fd := -1
	err := w.fs.do("open", rel, func() error {
		var oerr error
		fd, oerr = w.fs.openRegular(rel, unix.O_WRONLY)
		return oerr
	})
	if err != nil {
		return nfsErrorReply(xid, nfsWrite, statusOf(err))
	}
	defer unix.Close(fd)
	return w.writeFD(xid, rel, fd, a)
}

// writeFD answers WRITE to the open file fd.
func (w *worker) writeFD(xid uint32, rel string, fd int, a *nfsArgs) []byte {
	var err error
	var before unix.Statx_t
	if err := statFD(fd, &before); err != nil {
		return nfsErrorReply(xid, nfsWrite, statusOf(err))
	}
	data := a.data[:a.count]
	n := 0
	for n < len(data) {
		m, err := unix.Pwrite(fd, data[n:], int64(a.offset)+int64(n))
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			if n > 0 {
				break // a short write: report what was written
			}
			return nfsErrorReply(xid, nfsWrite, statusOf(err))
		}
		n += m
	}
	switch a.stable {
	case dataSync:
		err = unix.Fdatasync(fd)
	case fileSync:
		err = unix.Fsync(fd)
	}
	if err != nil {
		return nfsErrorReply(xid, nfsWrite, statusOf(err))
	}
	var after unix.Statx_t
	afterErr := statFD(fd, &after)

	out := successHeader(xid)
	out.Uint32(nfs3OK)
	// wcc_data: what the file was before, and its attributes now.
	out.Bool(true)
	out.Uint64(before.Size)
	mtime := nfs.ToNFSTime(newFileInfo("", &before).ModTime())
	out.Uint32(mtime.Seconds)
	out.Uint32(mtime.Nseconds)
	out.Uint32(mtime.Seconds) // go-nfs's ctime is the mtime
	out.Uint32(mtime.Nseconds)
	if afterErr == nil {
		putPostOpAttr(out, rel, &after)
	} else {
		out.Bool(false)
	}
	out.Uint32(uint32(n))
	out.Uint32(a.stable)
	out.Buf = append(out.Buf, w.ss.srv.verifier[:]...)
	return out.Buf
}

// statFD gets the attributes of an open file.
func statFD(fd int, st *unix.Statx_t) error {
	return unix.Statx(fd, "", unix.AT_EMPTY_PATH|unix.AT_STATX_SYNC_AS_STAT, unix.STATX_BASIC_STATS, st)
}

// putPostOpAttr encodes present attributes as go-nfs's encoder would (its
// FileAttribute, field by field), without reflection.
func putPostOpAttr(w *xdr.Encoder, rel string, st *unix.Statx_t) {
	fa := nfs.ToFileAttribute(newFileInfo(baseName(rel), st), rel)
	w.Bool(true)
	w.Uint32(uint32(fa.Type))
	w.Uint32(fa.FileMode)
	w.Uint32(fa.Nlink)
	w.Uint32(fa.UID)
	w.Uint32(fa.GID)
	w.Uint64(fa.Filesize)
	w.Uint64(fa.Used)
	w.Uint32(fa.SpecData[0])
	w.Uint32(fa.SpecData[1])
	w.Uint64(fa.FSID)
	w.Uint64(fa.Fileid)
	for _, t := range []nfs.FileTime{fa.Atime, fa.Mtime, fa.Ctime} {
		w.Uint32(t.Seconds)
		w.Uint32(t.Nseconds)
	}
}
