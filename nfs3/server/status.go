package server

import (
	"errors"
	"fmt"
	"syscall"

	"github.com/rdmafs/rdmafs/nfs3"
	"github.com/rdmafs/rdmafs/sunrpc/xdr"
)

// errnoStatus maps the errors the kernel gives us to NFS statuses, after
// knfsd's nfserrno table.
var errnoStatus = map[syscall.Errno]nfs3.Status{
	syscall.EPERM:        nfs3.ErrPerm,
	syscall.ENOENT:       nfs3.ErrNoEnt,
	syscall.EIO:          nfs3.ErrIO,
	syscall.ENXIO:        nfs3.ErrNXIO,
	syscall.EACCES:       nfs3.ErrAcces,
	syscall.EEXIST:       nfs3.ErrExist,
	syscall.EXDEV:        nfs3.ErrXDev,
	syscall.ENODEV:       nfs3.ErrNoDev,
	syscall.ENOTDIR:      nfs3.ErrNotDir,
	syscall.EISDIR:       nfs3.ErrIsDir,
	syscall.EINVAL:       nfs3.ErrInval,
	syscall.EFBIG:        nfs3.ErrFBig,
	syscall.ENOSPC:       nfs3.ErrNoSpc,
	syscall.EROFS:        nfs3.ErrROFS,
	syscall.EMLINK:       nfs3.ErrMLink,
	syscall.ENAMETOOLONG: nfs3.ErrNameTooLong,
	syscall.ENOTEMPTY:    nfs3.ErrNotEmpty,
	syscall.EDQUOT:       nfs3.ErrDQuot,
	syscall.ESTALE:       nfs3.ErrStale,
	syscall.EBADF:        nfs3.ErrStale,
	syscall.EOPNOTSUPP:   nfs3.ErrNotSupp,
	syscall.EAGAIN:       nfs3.ErrJukebox,
	syscall.ENOMEM:       nfs3.ErrJukebox,
	syscall.ETXTBSY:      nfs3.ErrIO,
	syscall.E2BIG:        nfs3.ErrFBig,
	syscall.ENFILE:       nfs3.ErrServerFault,
	// The server never follows symlinks; meeting one where a file or
	// directory was expected is an invalid argument for NFS.
	syscall.ELOOP: nfs3.ErrInval,
}

// statusError is an error that is an NFS status of its own, with no errno
// behind it.
type statusError nfs3.Status

func (e statusError) Error() string { return fmt.Sprintf("server: NFS status %d", uint32(e)) }

var (
	errBadCookie = statusError(nfs3.ErrBadCookie)
	errTooSmall  = statusError(nfs3.ErrTooSmall)
)

// statusOf maps an error to an NFS status: 0 (OK) for nil, the status of a
// statusError, the errno's status when the error wraps an errno, NFS3ERR_IO
// otherwise.
func statusOf(err error) nfs3.Status {
	if err == nil {
		return nfs3.OK
	}
	var se statusError
	if errors.As(err, &se) {
		return nfs3.Status(se)
	}
	var errno syscall.Errno
	if errors.As(err, &errno) {
		if st, ok := errnoStatus[errno]; ok {
			return st
		}
	}
	return nfs3.ErrIO
}

// resfailWords is, per NFS procedure, how many XDR words follow the status
// in its failure result when every optional attribute is absent: one per
// post_op_attr, two per wcc_data.
var resfailWords = [nfs3.ProcCommit + 1]int{
	nfs3.ProcSetattr: 2, nfs3.ProcLookup: 1, nfs3.ProcAccess: 1, nfs3.ProcReadlink: 1, nfs3.ProcRead: 1,
	nfs3.ProcWrite: 2, nfs3.ProcCreate: 2, nfs3.ProcMkdir: 2, nfs3.ProcSymlink: 2, nfs3.ProcMknod: 2,
	nfs3.ProcRemove: 2, nfs3.ProcRmdir: 2, nfs3.ProcRename: 4, nfs3.ProcLink: 3, nfs3.ProcReaddir: 1,
	nfs3.ProcReaddirplus: 1, nfs3.ProcFsstat: 1, nfs3.ProcFsinfo: 1, nfs3.ProcPathconf: 1, nfs3.ProcCommit: 2,
}

// putStatus encodes an nfsstat3.
func putStatus(w *xdr.Encoder, st nfs3.Status) { w.Uint32(uint32(st)) }

// nfsErrorReply is a complete failure reply for an NFS procedure.
func nfsErrorReply(xid, proc uint32, status nfs3.Status) []byte {
	w := successHeader(xid)
	putStatus(w, status)
	for i := 0; i < resfailWords[proc]; i++ {
		w.Uint32(0)
	}
	return w.Buf
}
