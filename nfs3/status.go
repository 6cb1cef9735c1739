package nfs3

import (
	"context"
	"errors"
	"fmt"
	"syscall"

	"github.com/rdmafs/rdmafs/sunrpc"
)

// Status is nfsstat3. Every status other than OK is an error.
type Status uint32

// The NFSv3 status codes.
const (
	OK             Status = 0
	ErrPerm        Status = 1
	ErrNoEnt       Status = 2
	ErrIO          Status = 5
	ErrNXIO        Status = 6
	ErrAcces       Status = 13
	ErrExist       Status = 17
	ErrXDev        Status = 18
	ErrNoDev       Status = 19
	ErrNotDir      Status = 20
	ErrIsDir       Status = 21
	ErrInval       Status = 22
	ErrFBig        Status = 27
	ErrNoSpc       Status = 28
	ErrROFS        Status = 30
	ErrMLink       Status = 31
	ErrNameTooLong Status = 63
	ErrNotEmpty    Status = 66
	ErrDQuot       Status = 69
	ErrStale       Status = 70
	ErrRemote      Status = 71
	ErrBadHandle   Status = 10001
	ErrNotSync     Status = 10002
	ErrBadCookie   Status = 10003
	ErrNotSupp     Status = 10004
	ErrTooSmall    Status = 10005
	ErrServerFault Status = 10006
	ErrBadType     Status = 10007
	ErrJukebox     Status = 10008
)

var statusInfo = map[Status]struct {
	name  string
	errno syscall.Errno
}{
	ErrPerm:        {"NFS3ERR_PERM", syscall.EPERM},
	ErrNoEnt:       {"NFS3ERR_NOENT", syscall.ENOENT},
	ErrIO:          {"NFS3ERR_IO", syscall.EIO},
	ErrNXIO:        {"NFS3ERR_NXIO", syscall.ENXIO},
	ErrAcces:       {"NFS3ERR_ACCES", syscall.EACCES},
	ErrExist:       {"NFS3ERR_EXIST", syscall.EEXIST},
	ErrXDev:        {"NFS3ERR_XDEV", syscall.EXDEV},
	ErrNoDev:       {"NFS3ERR_NODEV", syscall.ENODEV},
	ErrNotDir:      {"NFS3ERR_NOTDIR", syscall.ENOTDIR},
	ErrIsDir:       {"NFS3ERR_ISDIR", syscall.EISDIR},
	ErrInval:       {"NFS3ERR_INVAL", syscall.EINVAL},
	ErrFBig:        {"NFS3ERR_FBIG", syscall.EFBIG},
	ErrNoSpc:       {"NFS3ERR_NOSPC", syscall.ENOSPC},
	ErrROFS:        {"NFS3ERR_ROFS", syscall.EROFS},
	ErrMLink:       {"NFS3ERR_MLINK", syscall.EMLINK},
	ErrNameTooLong: {"NFS3ERR_NAMETOOLONG", syscall.ENAMETOOLONG},
	ErrNotEmpty:    {"NFS3ERR_NOTEMPTY", syscall.ENOTEMPTY},
	ErrDQuot:       {"NFS3ERR_DQUOT", syscall.EDQUOT},
	ErrStale:       {"NFS3ERR_STALE", syscall.ESTALE},
	ErrRemote:      {"NFS3ERR_REMOTE", syscall.EREMOTE},
	// The statuses below have kernel-internal errnos in Linux; a program
	// sees the nearest errno it knows.
	ErrBadHandle:   {"NFS3ERR_BADHANDLE", syscall.ESTALE},
	ErrNotSync:     {"NFS3ERR_NOT_SYNC", syscall.EIO},
	ErrBadCookie:   {"NFS3ERR_BAD_COOKIE", syscall.EIO},
	ErrNotSupp:     {"NFS3ERR_NOTSUPP", syscall.EOPNOTSUPP},
	ErrTooSmall:    {"NFS3ERR_TOOSMALL", syscall.EINVAL},
	ErrServerFault: {"NFS3ERR_SERVERFAULT", syscall.EREMOTEIO},
	ErrBadType:     {"NFS3ERR_BADTYPE", syscall.EINVAL},
	ErrJukebox:     {"NFS3ERR_JUKEBOX", syscall.EAGAIN},
}

func (s Status) Error() string {
	if info, ok := statusInfo[s]; ok {
		return fmt.Sprintf("%s (%v)", info.name, info.errno)
	}
	if s == OK {
		return "NFS3_OK"
	}
	return fmt.Sprintf("nfsstat3 %d", uint32(s))
}

// Errno returns the errno a program should see for the status; EIO for a
// status RFC 1813 does not define.
func (s Status) Errno() syscall.Errno {
	if info, ok := statusInfo[s]; ok {
		return info.errno
	}
	return syscall.EIO
}

// Errno returns the errno a program should see for the error of a call:
// the NFS status's; EOPNOTSUPP for a procedure the server does not offer;
// EACCES for credentials it refused; EINTR for a call its caller's death
// ended; and EIO for everything else (a soft mount's timeout, a server that
// cannot be reached or replies nonsense), as the kernel client reports
// them.
func Errno(err error) syscall.Errno {
	if err == nil {
		return 0
	}
	var st Status
	if errors.As(err, &st) {
		return st.Errno()
	}
	var ae *sunrpc.AcceptError
	if errors.As(err, &ae) && ae.Stat == sunrpc.ProcUnavail {
		return syscall.EOPNOTSUPP
	}
	var de *sunrpc.DeniedError
	if errors.As(err, &de) && de.AuthError {
		return syscall.EACCES
	}
	if errors.Is(err, context.Canceled) {
		return syscall.EINTR
	}
	return syscall.EIO
}
