package server

import (
	"errors"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// The server never follows a symbolic link and never leaves the export's
// mount: NFS clients resolve symlinks themselves, and the paths go-nfs hands
// us come from file handles (real directories) plus one name. So every path
// is resolved with openat2 beneath the root, refusing symlinks in any
// component (including the last) and mount crossings. A symlink inside the
// export therefore cannot lead a path out of it, whatever it points to.
const resolveFlags = unix.RESOLVE_BENEATH | unix.RESOLVE_NO_SYMLINKS | unix.RESOLVE_NO_XDEV

// openBeneath opens rel (a path relative to the export root, "" for the
// root) with openat2's confinement.
func (s *Server) openBeneath(rel string, flags int, mode uint32) (int, error) {
	if rel == "" {
		rel = "."
	}
	how := unix.OpenHow{Flags: uint64(flags | unix.O_CLOEXEC), Mode: uint64(mode), Resolve: resolveFlags}
	for tries := 0; ; tries++ {
		fd, err := unix.Openat2(s.rootfd, rel, &how)
		// openat2 answers EAGAIN when a concurrent rename might have let ".."
		// escape; the lookup is safe to repeat.
		if (err == unix.EAGAIN || err == unix.EINTR) && tries < 8 {
			continue
		}
		return fd, err
	}
}

// objAt names an object the way the *at system calls take it: a directory
// descriptor and a name in it. The root itself is the root descriptor with
// an empty name (and AT_EMPTY_PATH).
type objAt struct {
	dirfd int
	name  string
	own   bool // dirfd was opened for this object and must be closed
}

// locate resolves the directory that holds rel, confined as openBeneath.
// The last component is not resolved: each operation decides whether it
// follows it (none does).
func (s *Server) locate(rel string) (objAt, error) {
	if rel == "" {
		return objAt{dirfd: s.rootfd}, nil
	}
	dir, name := "", rel
	if i := strings.LastIndexByte(rel, '/'); i >= 0 {
		dir, name = rel[:i], rel[i+1:]
	}
	if dir == "" {
		return objAt{dirfd: s.rootfd, name: name}, nil
	}
	fd, err := s.openBeneath(dir, unix.O_PATH|unix.O_DIRECTORY, 0)
	if err != nil {
		return objAt{}, err
	}
	return objAt{dirfd: fd, name: name, own: true}, nil
}

func (o objAt) close() {
	if o.own {
		unix.Close(o.dirfd)
	}
}

// flags adds AT_EMPTY_PATH when the object is the directory descriptor itself.
func (o objAt) flags(f int) int {
	if o.name == "" {
		f |= unix.AT_EMPTY_PATH
	}
	return f
}

var errOtherMount = errors.New("server: object is on another mount")

// statAt stats the object without following a symlink. Objects on other
// mounts below the root (a mount point itself looks like one) are not
// exported: they answer EXDEV.
func (s *Server) statAt(o objAt, st *unix.Statx_t) error {
	flags := o.flags(unix.AT_SYMLINK_NOFOLLOW | unix.AT_STATX_SYNC_AS_STAT)
	if err := unix.Statx(o.dirfd, o.name, flags, unix.STATX_BASIC_STATS|unix.STATX_MNT_ID, st); err != nil {
		return err
	}
	if st.Mask&unix.STATX_MNT_ID != 0 && st.Mnt_id != uint64(s.mountID) {
		return unix.EXDEV
	}
	return nil
}

// chmodAt changes the mode of the object itself, never a symlink's target.
// fchmodat2 (Linux 6.6) does that directly; before it, x/sys reports
// EOPNOTSUPP and the mode is changed through an O_PATH descriptor of the
// object, refusing symlinks as Linux does.
func chmodAt(o objAt, mode uint32) error {
	err := unix.Fchmodat(o.dirfd, o.name, mode, o.flags(unix.AT_SYMLINK_NOFOLLOW))
	if err != unix.EOPNOTSUPP {
		return err
	}
	fd, err := unix.Openat(o.dirfd, o.name, o.flags(unix.O_PATH|unix.O_NOFOLLOW|unix.O_CLOEXEC), 0)
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return err
	}
	if st.Mode&unix.S_IFMT == unix.S_IFLNK {
		return unix.EOPNOTSUPP
	}
	return unix.Fchmodat(unix.AT_FDCWD, procFD(fd), mode, 0)
}

// procFD is the /proc path of one of our descriptors. Opening it reopens the
// very inode the descriptor refers to, with a fresh permission check.
func procFD(fd int) string { return "/proc/self/fd/" + strconv.Itoa(fd) }

// joinRel joins path components the way go-nfs's paths are kept: relative
// to the export root, "" for the root, never cleaned (the resolver refuses
// anything that would leave the root).
func joinRel(elem ...string) string {
	var b strings.Builder
	for _, e := range elem {
		if e == "" {
			continue
		}
		if b.Len() > 0 {
			b.WriteByte('/')
		}
		b.WriteString(e)
	}
	return b.String()
}

// splitRel is the inverse of joinRel; the root is the empty path.
func splitRel(rel string) []string {
	if rel == "" {
		return []string{}
	}
	return strings.Split(rel, "/")
}
