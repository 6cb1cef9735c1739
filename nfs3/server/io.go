package server

import (
	"sync"

	"github.com/rdmafs/rdmafs/nfs3"
	"github.com/rdmafs/rdmafs/sunrpc"
	"golang.org/x/sys/unix"
)

// READ and WRITE are the data path: a READ reads the file straight into its
// reply, a WRITE writes straight from its call message. The file is opened
// for each call as its caller (see openRegular), so permissions are checked
// as for every other procedure, and a WRITE runs as the caller too, so the
// kernel clears setuid and setgid when someone without CAP_FSETID writes,
// as it does under knfsd. Callers the server serves as itself use the file
// cache instead (see cachedData).

// readReplyHead is the size of a READ reply before the data: the RPC reply
// header, status, post_op_attr with attributes, count, eof and the data's
// length.
const readReplyHead = 24 + 4 + 4 + fattrSize + 4 + 4 + 4

var zeroPad [4]byte

// readBuffers holds READ replies of the largest size between calls.
var readBuffers = sync.Pool{New: func() any {
	b := make([]byte, readReplyHead+maxIO+4)
	return &b
}}

// cachedData answers READ, WRITE and COMMIT of callers the server serves as
// itself from its file cache, and reports false for every other call.
func (w *worker) cachedData(c *call) ([]byte, bool) {
	srv := w.srv
	xid, proc, a := c.xid, c.proc, c.args
	if proc != nfs3.ProcRead && proc != nfs3.ProcWrite && proc != nfs3.ProcCommit || !srv.self.is(c.cred) {
		return nil, false
	}
	switch {
	case proc == nfs3.ProcWrite && w.readOnly():
		return nfsErrorReply(xid, nfs3.ProcWrite, nfs3.ErrROFS), true
	case proc == nfs3.ProcCommit && w.readOnly():
		return nil, false
	}
	f := srv.files.acquire(a.fh)
	if f == nil {
		n, err := srv.open(a.fh)
		if err != nil {
			return nfsErrorReply(xid, proc, nfs3.ErrStale), true
		}
		defer n.close()
		mode := unix.O_RDWR
		if w.readOnly() {
			mode = unix.O_RDONLY
		}
		fd, err := w.openRegular(n, mode)
		if err != nil && proc == nfs3.ProcRead && mode == unix.O_RDWR {
			// Not writable even for the server (a read-only
			// filesystem, an immutable file): read without caching.
			return w.read(xid, n, a), true
		}
		if err != nil {
			if proc == nfs3.ProcRead {
				return attrErrorReply(xid, statusOf(err), &n.st), true
			}
			return wccErrorReply(xid, statusOf(err), &n.st, &n.st), true
		}
		f = srv.files.add(a.fh, fd)
	}
	defer srv.files.release(f)
	var st unix.Statx_t
	if err := statFD(f.fd, &st); err != nil || st.Nlink == 0 {
		srv.files.drop(a.fh)
		return nfsErrorReply(xid, proc, nfs3.ErrStale), true
	}
	switch proc {
	case nfs3.ProcRead:
		return w.readFD(xid, f.fd, a), true
	case nfs3.ProcWrite:
		reply, _ := w.writeFD(xid, f.fd, &st, a)
		return reply, true
	}
	err := unix.Fsync(f.fd)
	return w.commitReply(xid, err, &st, attrsOf(f.fd)), true
}

// read answers READ: status, attributes, count, eof and the data.
func (w *worker) read(xid uint32, n *node, a *nfsArgs) []byte {
	fd := -1
	err := w.as(func() error {
		var oerr error
		fd, oerr = w.openRegular(n, unix.O_RDONLY)
		return oerr
	})
	if err != nil {
		return attrErrorReply(xid, statusOf(err), &n.st)
	}
	defer unix.Close(fd)
	return w.readFD(xid, fd, a)
}

// readFD answers READ from the open file fd.
func (w *worker) readFD(xid uint32, fd int, a *nfsArgs) []byte {
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
			return attrErrorReply(xid, statusOf(err), attrsOf(fd))
		}
		if m == 0 {
			break
		}
		n += m
	}
	var st unix.Statx_t
	if err := statFD(fd, &st); err != nil {
		readBuffers.Put(bp)
		return attrErrorReply(xid, statusOf(err), nil)
	}
	eof := a.offset+uint64(n) >= st.Size

	head := successHeader(xid)
	putStatus(head, nfs3.OK)
	putPostOpAttr(head, &st)
	head.Uint32(uint32(n))
	head.Bool(eof)
	head.Uint32(uint32(n))
	copy(reply, head.Buf)
	w.req.Placement = sunrpc.Placement{Off: readReplyHead, Len: n}
	reply = append(reply[:readReplyHead+n], zeroPad[:(4-n&3)&3]...)
	// sunrpc's worker runs AfterReply once the reply has gone out, so the
	// buffer can go back then.
	w.req.AfterReply = func() { readBuffers.Put(bp) }
	return reply
}

// write answers WRITE, as the caller from the open to the last stat.
func (w *worker) write(xid uint32, n *node, a *nfsArgs) []byte {
	if w.readOnly() {
		return wccErrorReply(xid, nfs3.ErrROFS, &n.st, &n.st)
	}
	var reply []byte
	err := w.as(func() error {
		fd, err := w.openRegular(n, unix.O_WRONLY)
		if err != nil {
			return err
		}
		defer unix.Close(fd)
		var pre unix.Statx_t
		if err := statFD(fd, &pre); err != nil {
			return err
		}
		reply, _ = w.writeFD(xid, fd, &pre, a)
		return nil
	})
	if err != nil {
		return wccErrorReply(xid, statusOf(err), &n.st, &n.st)
	}
	return reply
}

// writeFD writes the call's data to the open file fd, whose attributes
// before were pre, syncs it if the client asked for DATA_SYNC or FILE_SYNC,
// and builds the reply.
func (w *worker) writeFD(xid uint32, fd int, pre *unix.Statx_t, a *nfsArgs) ([]byte, error) {
	data := a.data[:a.count]
	n := 0
	var err error
	for n < len(data) {
		var m int
		m, err = unix.Pwrite(fd, data[n:], int64(a.offset)+int64(n))
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			break
		}
		n += m
	}
	if n > 0 {
		err = nil // a short write: report what was written
	}
	if err == nil {
		switch a.stable {
		case nfs3.DataSync:
			err = unix.Fdatasync(fd)
		case nfs3.FileSync:
			err = unix.Fsync(fd)
		}
	}
	if err != nil {
		return wccErrorReply(xid, statusOf(err), pre, attrsOf(fd)), err
	}
	out := successHeader(xid)
	putStatus(out, nfs3.OK)
	putWcc(out, pre, attrsOf(fd))
	out.Uint32(uint32(n))
	out.Uint32(uint32(a.stable))
	out.Buf = append(out.Buf, w.srv.verifier[:]...)
	return out.Buf, nil
}
