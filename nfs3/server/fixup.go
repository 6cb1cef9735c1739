package server

import (
	"encoding/binary"
	"errors"
	"syscall"

	"github.com/rdmafs/rdmafs/sunrpc/xdr"
)

// nfsstat3 values (RFC 1813).
const (
	nfs3OK             = 0
	nfs3ErrPerm        = 1
	nfs3ErrNoEnt       = 2
	nfs3ErrIO          = 5
	nfs3ErrNXIO        = 6
	nfs3ErrAcces       = 13
	nfs3ErrExist       = 17
	nfs3ErrXDev        = 18
	nfs3ErrNoDev       = 19
	nfs3ErrNotDir      = 20
	nfs3ErrIsDir       = 21
	nfs3ErrInval       = 22
	nfs3ErrFBig        = 27
	nfs3ErrNoSpc       = 28
	nfs3ErrROFS        = 30
	nfs3ErrMLink       = 31
	nfs3ErrNameTooLong = 63
	nfs3ErrNotEmpty    = 66
	nfs3ErrDQuot       = 69
	nfs3ErrStale       = 70
	nfs3ErrBadHandle   = 10001
	nfs3ErrNotSync     = 10002
	nfs3ErrNotSupp     = 10004
	nfs3ErrServerFault = 10006
	nfs3ErrBadType     = 10007
	nfs3ErrJukebox     = 10008
)

// errnoStatus maps the errors the kernel gives us to NFS statuses, after
// knfsd's nfserrno table.
var errnoStatus = map[syscall.Errno]uint32{
	syscall.EPERM:        nfs3ErrPerm,
	syscall.ENOENT:       nfs3ErrNoEnt,
	syscall.EIO:          nfs3ErrIO,
	syscall.ENXIO:        nfs3ErrNXIO,
	syscall.EACCES:       nfs3ErrAcces,
	syscall.EEXIST:       nfs3ErrExist,
	syscall.EXDEV:        nfs3ErrXDev,
	syscall.ENODEV:       nfs3ErrNoDev,
	syscall.ENOTDIR:      nfs3ErrNotDir,
	syscall.EISDIR:       nfs3ErrIsDir,
	syscall.EINVAL:       nfs3ErrInval,
	syscall.EFBIG:        nfs3ErrFBig,
	syscall.ENOSPC:       nfs3ErrNoSpc,
	syscall.EROFS:        nfs3ErrROFS,
	syscall.EMLINK:       nfs3ErrMLink,
	syscall.ENAMETOOLONG: nfs3ErrNameTooLong,
	syscall.ENOTEMPTY:    nfs3ErrNotEmpty,
	syscall.EDQUOT:       nfs3ErrDQuot,
	syscall.ESTALE:       nfs3ErrStale,
	syscall.EBADF:        nfs3ErrStale,
	syscall.EOPNOTSUPP:   nfs3ErrNotSupp,
	syscall.EAGAIN:       nfs3ErrJukebox,
	syscall.ENOMEM:       nfs3ErrJukebox,
	syscall.ETXTBSY:      nfs3ErrAcces,
	// The server never follows symlinks; meeting one where a file or
	// directory was expected is an invalid argument for NFS.
	syscall.ELOOP: nfs3ErrInval,
}

// statusOf maps an error to an NFS status: 0 (OK) for nil, the errno's status
// when the error wraps an errno, NFS3ERR_IO otherwise.
func statusOf(err error) uint32 {
	if err == nil {
		return nfs3OK
	}
	var errno syscall.Errno
	if errors.As(err, &errno) {
		if st, ok := errnoStatus[errno]; ok {
			return st
		}
	}
	return nfs3ErrIO
}

// resfailWords is, per NFS procedure, how many XDR words follow the status
// in its failure result when every optional attribute is absent: one per
// post_op_attr, two per wcc_data.
var resfailWords = [nfsMaxProc + 1]int{
	nfsSetattr: 2, nfsLookup: 1, nfsAccess: 1, nfsReadlink: 1, nfsRead: 1,
	nfsWrite: 2, nfsCreate: 2, nfsMkdir: 2, nfsSymlink: 2, nfsMknod: 2,
	nfsRemove: 2, nfsRmdir: 2, nfsRename: 4, nfsLink: 3, nfsReaddir: 1,
	nfsReaddirplus: 1, nfsFsstat: 1, nfsFsinfo: 1, nfsPathconf: 1, nfsCommit: 2,
}

// nfsErrorReply is a complete failure reply for an NFS procedure.
func nfsErrorReply(xid, proc, status uint32) []byte {
	w := successHeader(xid)
	w.Uint32(status)
	for i := 0; i < resfailWords[proc]; i++ {
		w.Uint32(0)
	}
	return w.Buf
}

// fixReply corrects a reply go-nfs produced, in place where it can.
//
// go-nfs maps filesystem errors coarsely: most failures become ACCES or IO
// whatever the errno was (RMDIR of a non-empty directory answers IO, MKDIR of
// an existing name ACCES), and an error it does not wrap becomes an RPC
// SYSTEM_ERR. The worker records the outcome of the call's last filesystem
// operation; when go-nfs reports a failure and that operation failed, the
// errno is the cause, so its status replaces go-nfs's. A failure go-nfs
// decides by itself (a NOTDIR after a successful stat, say) follows a
// successful operation and is left alone.
//
// go-nfs also answers every WRITE with committed = FILE_SYNC although it
// never syncs. The filesystem layer syncs DATA_SYNC and FILE_SYNC writes;
// the reply then reports what the client asked for, so UNSTABLE writes say
// UNSTABLE and the client COMMITs them.
func fixReply(c *call, rec []byte) []byte {
	if c.rpc.prog != progNFS {
		return rec
	}
	r := xdr.NewDecoder(rec)
	r.Uint32() // xid
	r.Uint32() // REPLY
	if r.Uint32() != msgAccepted {
		return rec
	}
	r.Uint32()
	r.Opaque(maxAuthBytes)
	stat := r.Uint32()
	statusAt := r.Offset()
	status := r.Uint32()
	if r.Err() != nil && stat != acceptSystemErr {
		return rec
	}
	cause := statusOf(c.fsErr)
	switch {
	case stat == acceptSystemErr:
		if c.fsErr != nil {
			return nfsErrorReply(c.rpc.xid, c.rpc.proc, cause)
		}
	case stat != acceptSuccess:
	case status != nfs3OK:
		if c.fsErr != nil && cause != status {
			binary.BigEndian.PutUint32(rec[statusAt:], cause)
		}
	case c.rpc.proc == nfsWrite:
		// WRITE3resok: wcc_data, count, committed, verifier.
		if r.Uint32() != 0 {
			r.Fixed(24) // wcc_attr
		}
		if r.Uint32() != 0 {
			r.Fixed(84) // fattr3
		}
		r.Uint32() // count
		at := r.Offset()
		if r.Uint32(); r.Err() == nil {
			binary.BigEndian.PutUint32(rec[at:], c.args.stable)
		}
	}
	return rec
}
