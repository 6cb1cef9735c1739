package server

import (
	"errors"
	"fmt"
	"syscall"
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
	nfs3ErrBadCookie   = 10003
	nfs3ErrNotSupp     = 10004
	nfs3ErrTooSmall    = 10005
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
	syscall.ETXTBSY:      nfs3ErrIO,
	syscall.E2BIG:        nfs3ErrFBig,
	syscall.ENFILE:       nfs3ErrServerFault,
	// The server never follows symlinks; meeting one where a file or
	// directory was expected is an invalid argument for NFS.
	syscall.ELOOP: nfs3ErrInval,
}

// statusError is an error that is an NFS status of its own, with no errno
// behind it.
type statusError uint32

func (e statusError) Error() string { return fmt.Sprintf("server: NFS status %d", uint32(e)) }

var (
	errBadCookie = statusError(nfs3ErrBadCookie)
	errTooSmall  = statusError(nfs3ErrTooSmall)
)

// statusOf maps an error to an NFS status: 0 (OK) for nil, the status of a
// statusError, the errno's status when the error wraps an errno, NFS3ERR_IO
// otherwise.
func statusOf(err error) uint32 {
	if err == nil {
		return nfs3OK
	}
	var se statusError
	if errors.As(err, &se) {
		return uint32(se)
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
