package server

import (
	"errors"
	"strconv"

	"golang.org/x/sys/unix"
)

// The server never follows a symbolic link and never leaves the export's
// mount: NFS clients resolve symlinks themselves, and every name a call
// carries is one component looked up in a directory the call's handle names.
// Lookups go through openat2, refusing symlinks and mount crossings
// (RESOLVE_NO_SYMLINKS, RESOLVE_NO_XDEV) and anything that would climb out of
// the directory (RESOLVE_BENEATH). A symlink inside the export therefore
// cannot lead anywhere, whatever it points to.
const resolveFlags = unix.RESOLVE_BENEATH | unix.RESOLVE_NO_SYMLINKS | unix.RESOLVE_NO_XDEV

var errOtherMount = errors.New("server: object is on another mount")

// openat2 opens path relative to dirfd with the server's confinement.
func openat2(dirfd int, path string, flags int, mode uint32) (int, error) {
	how := unix.OpenHow{Flags: uint64(flags | unix.O_CLOEXEC), Mode: uint64(mode), Resolve: resolveFlags}
	for tries := 0; ; tries++ {
		fd, err := unix.Openat2(dirfd, path, &how)
		// openat2 answers EAGAIN when a concurrent rename might have let ".."
		// escape; the lookup is safe to repeat.
		if (err == unix.EAGAIN || err == unix.EINTR) && tries < 8 {
			continue
		}
		return fd, err
	}
}

// lookupAt opens name in the directory dirfd as an O_PATH descriptor of the
// object itself (a symlink is not followed). It runs as the caller, who
// needs search permission on the directory, as with knfsd. A mount point
// answers EXDEV: other mounts below the export are not exported.
func lookupAt(dirfd int, name string) (int, error) {
	return openat2(dirfd, name, unix.O_PATH|unix.O_NOFOLLOW, 0)
}

// statFD gets the attributes of an open object.
func statFD(fd int, st *unix.Statx_t) error {
	return unix.Statx(fd, "", unix.AT_EMPTY_PATH|unix.AT_STATX_SYNC_AS_STAT, statxMask, st)
}

// statAt gets the attributes of name in the directory dirfd, not following
// a symlink.
func statAt(dirfd int, name string, st *unix.Statx_t) error {
	return unix.Statx(dirfd, name, unix.AT_SYMLINK_NOFOLLOW|unix.AT_NO_AUTOMOUNT|unix.AT_STATX_SYNC_AS_STAT, statxMask, st)
}

// statxMask is what the attributes of a reply need, and the mount to tell
// objects of other mounts apart.
const statxMask = unix.STATX_BASIC_STATS | unix.STATX_MNT_ID

// procFD is the /proc path of one of our descriptors. Opening it reopens the
// very inode the descriptor refers to, with a fresh permission check of the
// caller's rights on that inode alone.
func procFD(fd int) string { return "/proc/self/fd/" + strconv.Itoa(fd) }

// chmodFD changes the mode of the object of the O_PATH descriptor fd (not a
// symlink: Linux gives symlinks no mode of their own). It goes through /proc
// because fchmod refuses O_PATH descriptors and fchmodat with AT_EMPTY_PATH
// needs Linux 6.6.
func chmodFD(fd int, mode uint32) error {
	return unix.Fchmodat(unix.AT_FDCWD, procFD(fd), mode, 0)
}

// setTimesFD sets the atime and mtime of the object of the O_PATH descriptor
// fd itself (a symlink's own times). utimensat takes AT_EMPTY_PATH since
// Linux 5.8; before, a non-symlink is reached through /proc.
func setTimesFD(fd int, link bool, ts []unix.Timespec) error {
	err := unix.UtimesNanoAt(fd, "", ts, unix.AT_EMPTY_PATH|unix.AT_SYMLINK_NOFOLLOW)
	if err == unix.EINVAL && !link {
		err = unix.UtimesNanoAt(unix.AT_FDCWD, procFD(fd), ts, 0)
	}
	return err
}
