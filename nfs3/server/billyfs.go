package server

import (
	"io"
	"os"
	"time"

	billy "github.com/go-git/go-billy/v5"
	nfs "github.com/willscott/go-nfs"
	nfsfile "github.com/willscott/go-nfs/file"
	"golang.org/x/sys/unix"
)

// billyFS is the filesystem go-nfs serves: the export root, seen through
// paths relative to it. Each worker has its own, which knows the call the
// worker is serving, so every system call runs as that call's caller (see
// identity.runAs) and its outcome is recorded for fixReply.
//
// Semantics differ from billy's general contract where NFS needs it:
//   - Nothing follows a symbolic link (Stat is Lstat) and nothing leaves the
//     export (see resolveFlags).
//   - Create does not truncate an existing file: CREATE UNCHECKED must keep
//     the data (a requested size arrives as a separate attribute).
//   - Remove is unlink for REMOVE and rmdir for RMDIR.
//   - Modes requested in the call's sattr3 are applied exactly, umask
//     excluded (the client applied its own), setuid/setgid/sticky included.
//   - Only regular files are ever opened for data: opening a device or FIFO
//     could block a worker or act on the server's hardware.
type billyFS struct {
	srv *Server
	cur *call // set by the worker before the call reaches go-nfs
}

var (
	_ billy.Filesystem = (*billyFS)(nil)
	_ billy.Capable    = (*billyFS)(nil)
	_ nfs.UnixChange   = (*billyFS)(nil)
)

// do runs fn as the caller, wraps its error like the os package does (go-nfs
// tests errors with os.IsNotExist and os.IsPermission), and records the
// outcome for fixReply.
func (fs *billyFS) do(op, rel string, fn func() error) error {
	err := fs.srv.self.runAs(fs.cur.rpc.cred, fn)
	if err != nil {
		err = &os.PathError{Op: op, Path: "/" + rel, Err: err}
	}
	fs.cur.fsErr = err
	return err
}

func (fs *billyFS) readOnly() bool { return fs.srv.opts.ReadOnly }

// requestedMode is the mode the call's sattr3 asks for, or def.
func (fs *billyFS) requestedMode(def uint32) (mode uint32, requested bool) {
	if a := fs.cur.args; a != nil && a.hasSattr && a.sattr.setMode {
		return a.sattr.mode & 0o7777, true
	}
	return def, false
}

// fixMode gives a just-created object exactly the mode the client asked
// for: the process umask may have taken bits away, and mkdir ignores setuid
// and setgid. A setgid bit a directory inherited from its parent stays, as
// with knfsd.
func (fs *billyFS) fixMode(o objAt, mode uint32) error {
	var st unix.Statx_t
	if err := fs.srv.statAt(o, &st); err != nil {
		return err
	}
	have, want := uint32(st.Mode)&0o7777, mode
	if st.Mode&unix.S_IFMT == unix.S_IFDIR {
		want |= have & unix.S_ISGID
	}
	if have == want {
		return nil
	}
	return chmodAt(o, want)
}

func (fs *billyFS) Create(filename string) (billy.File, error) {
	f := &openFile{fs: fs, name: filename, fd: -1}
	err := fs.do("create", filename, func() error {
		if fs.readOnly() {
			return unix.EROFS
		}
		o, err := fs.srv.locate(filename)
		if err != nil {
			return err
		}
		defer o.close()
		mode, requested := fs.requestedMode(0o666)
		// Read-only access: a new file may be opened so whatever its mode,
		// and go-nfs only closes it.
		fd, err := unix.Openat(o.dirfd, o.name, unix.O_CREAT|unix.O_EXCL|unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_NONBLOCK|unix.O_CLOEXEC, mode)
		if err == unix.EEXIST {
			var st unix.Statx_t
			if err := fs.srv.statAt(o, &st); err != nil {
				return err
			}
			if st.Mode&unix.S_IFMT != unix.S_IFREG {
				return unix.EEXIST
			}
			fs.cur.existed = true
			return nil
		}
		if err != nil {
			return err
		}
		if requested && mode&fs.srv.umask != 0 {
			if err := unix.Fchmod(fd, mode); err != nil {
				unix.Close(fd)
				return err
			}
		}
		f.fd = fd
		return nil
	})
	if err != nil {
		return nil, err
	}
	return f, nil
}

func (fs *billyFS) Open(filename string) (billy.File, error) {
	return fs.OpenFile(filename, os.O_RDONLY, 0)
}

// OpenFile opens an existing regular file. go-nfs opens with O_RDWR to
// WRITE; NFS WRITE needs only write permission, so a WRITE opens write-only.
func (fs *billyFS) OpenFile(filename string, flag int, _ os.FileMode) (billy.File, error) {
	acc := flag & unix.O_ACCMODE
	if fs.cur.rpc.proc == nfsWrite && acc == unix.O_RDWR {
		acc = unix.O_WRONLY
	}
	f := &openFile{fs: fs, name: filename, fd: -1}
	err := fs.do("open", filename, func() error {
		if flag&os.O_CREATE != 0 {
			return unix.EINVAL // go-nfs creates with Create
		}
		if acc != unix.O_RDONLY && fs.readOnly() {
			return unix.EROFS
		}
		fd, err := fs.openRegular(filename, acc|flag&unix.O_TRUNC)
		f.fd = fd
		return err
	})
	if err != nil {
		return nil, err
	}
	return f, nil
}

// openRegular opens rel for data; it runs inside runAs. The object is first
// pinned with O_PATH and its type checked, then reopened through /proc with
// the caller's permission check, so nothing but a regular file is ever
// opened.
//
// Like knfsd, the owner of a file may read and write it whatever its mode
// (a client creates a 0444 file and then writes it: cp, git), and a caller
// that may execute a file may read it (the client needs the bytes to run it).
func (fs *billyFS) openRegular(rel string, flags int) (int, error) {
	pfd, err := fs.srv.openBeneath(rel, unix.O_PATH|unix.O_NOFOLLOW, 0)
	if err != nil {
		return -1, err
	}
	defer unix.Close(pfd)
	var st unix.Stat_t
	if err := unix.Fstat(pfd, &st); err != nil {
		return -1, err
	}
	switch st.Mode & unix.S_IFMT {
	case unix.S_IFREG:
	case unix.S_IFDIR:
		return -1, unix.EISDIR
	default:
		return -1, unix.EINVAL
	}
	flags |= unix.O_CLOEXEC | unix.O_NOCTTY
	fd, err := unix.Open(procFD(pfd), flags, 0)
	if err == unix.EACCES && fs.ownerOverride(pfd, &st, flags) {
		err = fs.srv.self.asSelf(fs.cur.rpc.cred, func() error {
			var oerr error
			fd, oerr = unix.Open(procFD(pfd), flags, 0)
			return oerr
		})
	}
	return fd, err
}

func (fs *billyFS) ownerOverride(pfd int, st *unix.Stat_t, flags int) bool {
	switch fs.cur.rpc.proc {
	case nfsRead, nfsWrite, nfsCommit, nfsSetattr, nfsCreate: // CREATE: a size in its sattr3
	default:
		return false
	}
	if st.Uid == fs.cur.rpc.cred.uid {
		return true
	}
	return flags&unix.O_ACCMODE == unix.O_RDONLY &&
		unix.Faccessat2(pfd, "", unix.X_OK, unix.AT_EMPTY_PATH|unix.AT_EACCESS) == nil
}

// Stat does not follow symlinks either: an NFS server never does.
func (fs *billyFS) Stat(filename string) (os.FileInfo, error) { return fs.Lstat(filename) }

func (fs *billyFS) Lstat(filename string) (os.FileInfo, error) {
	var st unix.Statx_t
	err := fs.do("lstat", filename, func() error {
		o, err := fs.srv.locate(filename)
		if err != nil {
			return err
		}
		defer o.close()
		return fs.srv.statAt(o, &st)
	})
	if err != nil {
		return nil, err
	}
	return newFileInfo(baseName(filename), &st), nil
}

func (fs *billyFS) Rename(oldpath, newpath string) error {
	return fs.do("rename", oldpath, func() error {
		if fs.readOnly() {
			return unix.EROFS
		}
		from, err := fs.srv.locate(oldpath)
		if err != nil {
			return err
		}
		defer from.close()
		to, err := fs.srv.locate(newpath)
		if err != nil {
			return err
		}
		defer to.close()
		return unix.Renameat(from.dirfd, from.name, to.dirfd, to.name)
	})
}

// Remove unlinks for REMOVE and removes a directory for RMDIR: go-nfs
// serves both with Remove, but REMOVE must not delete a directory nor RMDIR
// a file.
func (fs *billyFS) Remove(filename string) error {
	return fs.do("remove", filename, func() error {
		if fs.readOnly() {
			return unix.EROFS
		}
		o, err := fs.srv.locate(filename)
		if err != nil {
			return err
		}
		defer o.close()
		switch fs.cur.rpc.proc {
		case nfsRmdir:
			return unix.Unlinkat(o.dirfd, o.name, unix.AT_REMOVEDIR)
		case nfsRemove:
			return unix.Unlinkat(o.dirfd, o.name, 0)
		}
		err = unix.Unlinkat(o.dirfd, o.name, 0)
		if err == unix.EISDIR {
			err = unix.Unlinkat(o.dirfd, o.name, unix.AT_REMOVEDIR)
		}
		return err
	})
}

func (fs *billyFS) Join(elem ...string) string { return joinRel(elem...) }

func (fs *billyFS) TempFile(string, string) (billy.File, error) { return nil, billy.ErrNotSupported }

// ReadDir lists a directory with each entry's attributes (READDIRPLUS sends
// them). Entries that vanish meanwhile and mount points are left out.
func (fs *billyFS) ReadDir(dir string) ([]os.FileInfo, error) {
	var out []os.FileInfo
	err := fs.do("readdir", dir, func() error {
		fd, err := fs.srv.openBeneath(dir, unix.O_RDONLY|unix.O_DIRECTORY, 0)
		if err != nil {
			return err
		}
		defer unix.Close(fd)
		var names []string
		err = readDirents(fd, make([]byte, 64<<10), func(_ uint64, _ uint8, name string) bool {
			names = append(names, name)
			return true
		})
		if err != nil {
			return err
		}
		out = make([]os.FileInfo, 0, len(names))
		var st unix.Statx_t
		for _, name := range names {
			switch err := fs.srv.statAt(objAt{dirfd: fd, name: name}, &st); err {
			case nil:
				out = append(out, newFileInfo(name, &st))
			case unix.ENOENT, unix.EXDEV:
			default:
				return err
			}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// MkdirAll creates one directory: go-nfs calls it for MKDIR, whose parent
// exists by construction. go-nfs's default mode is the decimal 755; the
// intended 0755 is used instead.
func (fs *billyFS) MkdirAll(filename string, _ os.FileMode) error {
	return fs.do("mkdir", filename, func() error {
		if fs.readOnly() {
			return unix.EROFS
		}
		o, err := fs.srv.locate(filename)
		if err != nil {
			return err
		}
		defer o.close()
		mode, requested := fs.requestedMode(0o755)
		if err := unix.Mkdirat(o.dirfd, o.name, mode); err != nil {
			return err
		}
		if requested {
			return fs.fixMode(o, mode)
		}
		return nil
	})
}

func (fs *billyFS) Symlink(target, link string) error {
	return fs.do("symlink", link, func() error {
		if fs.readOnly() {
			return unix.EROFS
		}
		o, err := fs.srv.locate(link)
		if err != nil {
			return err
		}
		defer o.close()
		return unix.Symlinkat(target, o.dirfd, o.name)
	})
}

func (fs *billyFS) Readlink(link string) (string, error) {
	var target string
	err := fs.do("readlink", link, func() error {
		o, err := fs.srv.locate(link)
		if err != nil {
			return err
		}
		defer o.close()
		for size := 256; ; size *= 2 {
			buf := make([]byte, size)
			n, err := unix.Readlinkat(o.dirfd, o.name, buf)
			if err != nil {
				return err
			}
			if n < size {
				target = string(buf[:n])
				return nil
			}
			if size >= 1<<16 {
				return unix.ENAMETOOLONG
			}
		}
	})
	return target, err
}

func (fs *billyFS) Chroot(string) (billy.Filesystem, error) { return nil, billy.ErrNotSupported }

func (fs *billyFS) Root() string { return fs.srv.rootPath }

// Capabilities without WriteCapability make go-nfs answer ROFS to every
// modifying procedure of a read-only server.
func (fs *billyFS) Capabilities() billy.Capability {
	if fs.readOnly() {
		return billy.ReadCapability | billy.SeekCapability
	}
	return billy.DefaultCapabilities &^ billy.LockCapability
}

// keepAttrs reports a CREATE UNCHECKED that found the file already there:
// like knfsd, only a size in its sattr3 applies then (go-nfs would apply the
// mode, owner and times too).
func (fs *billyFS) keepAttrs() bool { return fs.cur.rpc.proc == nfsCreate && fs.cur.existed }

// Chmod applies the call's requested mode when go-nfs passes its permission
// bits: go-nfs masks setuid, setgid and sticky away.
func (fs *billyFS) Chmod(name string, mode os.FileMode) error {
	if fs.keepAttrs() {
		return nil
	}
	m := uint32(mode.Perm())
	if raw, ok := fs.requestedMode(0); ok && raw&0o777 == m {
		m = raw
	}
	return fs.do("chmod", name, func() error {
		if fs.readOnly() {
			return unix.EROFS
		}
		o, err := fs.srv.locate(name)
		if err != nil {
			return err
		}
		defer o.close()
		return chmodAt(o, m)
	})
}

func (fs *billyFS) Lchown(name string, uid, gid int) error {
	if fs.keepAttrs() {
		return nil
	}
	return fs.do("lchown", name, func() error {
		if fs.readOnly() {
			return unix.EROFS
		}
		o, err := fs.srv.locate(name)
		if err != nil {
			return err
		}
		defer o.close()
		return unix.Fchownat(o.dirfd, o.name, uid, gid, o.flags(unix.AT_SYMLINK_NOFOLLOW))
	})
}

// Chown does not follow a symlink either.
func (fs *billyFS) Chown(name string, uid, gid int) error { return fs.Lchown(name, uid, gid) }

// Chtimes sets the times the call's sattr3 asks for. go-nfs passes both
// times even when the client set one (the other then comes from go-nfs's
// attributes, where atime is really mtime) and turns "server time" into a
// value, which needs ownership where UTIME_NOW needs only write permission.
func (fs *billyFS) Chtimes(name string, atime, mtime time.Time) error {
	ts := []unix.Timespec{unix.NsecToTimespec(atime.UnixNano()), unix.NsecToTimespec(mtime.UnixNano())}
	if a := fs.cur.args; a != nil && a.hasSattr {
		ts = timespecs(&a.sattr)
	}
	if fs.keepAttrs() {
		return nil
	}
	return fs.do("chtimes", name, func() error {
		if fs.readOnly() {
			return unix.EROFS
		}
		o, err := fs.srv.locate(name)
		if err != nil {
			return err
		}
		defer o.close()
		return unix.UtimesNanoAt(o.dirfd, o.name, ts, o.flags(unix.AT_SYMLINK_NOFOLLOW))
	})
}

// timespecs turns a sattr3's times into utimensat's.
func timespecs(s *sattr) []unix.Timespec {
	one := func(how uint32, t [2]uint32) unix.Timespec {
		switch how {
		case timeServer:
			return unix.Timespec{Nsec: unix.UTIME_NOW}
		case timeClient:
			return unix.Timespec{Sec: int64(t[0]), Nsec: int64(t[1])}
		}
		return unix.Timespec{Nsec: unix.UTIME_OMIT}
	}
	return []unix.Timespec{one(s.atimeHow, s.atime), one(s.mtimeHow, s.mtime)}
}

// Mknod creates a device node; mode may carry the S_IFCHR or S_IFBLK type
// bits and defaults to a character device (go-nfs passes none).
func (fs *billyFS) Mknod(path string, mode, major, minor uint32) error {
	typ := mode & unix.S_IFMT
	if typ == 0 {
		typ = unix.S_IFCHR
	}
	return fs.mknod(path, typ, mode&0o7777, true, unix.Mkdev(major, minor))
}

func (fs *billyFS) Mkfifo(path string, mode uint32) error {
	return fs.mknod(path, unix.S_IFIFO, mode&0o7777, true, 0)
}

func (fs *billyFS) Socket(path string) error {
	mode, requested := fs.requestedMode(0o666)
	return fs.mknod(path, unix.S_IFSOCK, mode, requested, 0)
}

func (fs *billyFS) mknod(rel string, typ, perm uint32, exact bool, dev uint64) error {
	return fs.do("mknod", rel, func() error {
		if fs.readOnly() {
			return unix.EROFS
		}
		o, err := fs.srv.locate(rel)
		if err != nil {
			return err
		}
		defer o.close()
		if err := unix.Mknodat(o.dirfd, o.name, typ|perm, int(dev)); err != nil {
			return err
		}
		if exact {
			return fs.fixMode(o, perm)
		}
		return nil
	})
}

// Link makes link a new name of the existing path.
func (fs *billyFS) Link(path, link string) error {
	return fs.do("link", link, func() error {
		if fs.readOnly() {
			return unix.EROFS
		}
		from, err := fs.srv.locate(path)
		if err != nil {
			return err
		}
		defer from.close()
		to, err := fs.srv.locate(link)
		if err != nil {
			return err
		}
		defer to.close()
		return unix.Linkat(from.dirfd, from.name, to.dirfd, to.name, 0)
	})
}

func baseName(rel string) string {
	for i := len(rel) - 1; i >= 0; i-- {
		if rel[i] == '/' {
			return rel[i+1:]
		}
	}
	if rel == "" {
		return "."
	}
	return rel
}

// openFile is an open regular file. Its system calls run as the caller of
// the call that opened it. fd is -1 for a file Create found already there
// (go-nfs only closes it).
type openFile struct {
	fs   *billyFS
	name string
	fd   int
	off  int64
}

func (f *openFile) Name() string { return f.name }

func (f *openFile) Read(p []byte) (int, error) {
	n, err := f.ReadAt(p, f.off)
	f.off += int64(n)
	return n, err
}

// ReadAt reads until p is full or the file ends (go-nfs reads once).
func (f *openFile) ReadAt(p []byte, off int64) (int, error) {
	if f.fd < 0 {
		return 0, os.ErrClosed
	}
	n := 0
	err := f.fs.do("read", f.name, func() error {
		for n < len(p) {
			m, err := unix.Pread(f.fd, p[n:], off+int64(n))
			if err == unix.EINTR {
				continue
			}
			if err != nil {
				return err
			}
			if m == 0 {
				break
			}
			n += m
		}
		return nil
	})
	if err == nil && n < len(p) {
		err = io.EOF
	}
	return n, err
}

func (f *openFile) Write(p []byte) (int, error) {
	if f.fd < 0 {
		return 0, os.ErrClosed
	}
	n := 0
	err := f.fs.do("write", f.name, func() error {
		for n < len(p) {
			m, err := unix.Pwrite(f.fd, p[n:], f.off+int64(n))
			if err == unix.EINTR {
				continue
			}
			if err != nil {
				return err
			}
			n += m
		}
		return nil
	})
	f.off += int64(n)
	return n, err
}

func (f *openFile) Seek(offset int64, whence int) (int64, error) {
	pos := offset
	switch whence {
	case io.SeekCurrent:
		pos += f.off
	case io.SeekEnd:
		var st unix.Stat_t
		if err := unix.Fstat(f.fd, &st); err != nil {
			return f.off, &os.PathError{Op: "seek", Path: "/" + f.name, Err: err}
		}
		pos += st.Size
	}
	if pos < 0 {
		return f.off, &os.PathError{Op: "seek", Path: "/" + f.name, Err: unix.EINVAL}
	}
	f.off = pos
	return pos, nil
}

// Close makes a WRITE's data as durable as the client asked before the
// reply says so (see fixReply).
func (f *openFile) Close() error {
	if f.fd < 0 {
		return nil
	}
	fd := f.fd
	f.fd = -1
	return f.fs.do("close", f.name, func() error {
		var serr error
		if f.fs.cur.rpc.proc == nfsWrite {
			switch f.fs.cur.args.stable {
			case dataSync:
				serr = unix.Fdatasync(fd)
			case fileSync:
				serr = unix.Fsync(fd)
			}
		}
		cerr := unix.Close(fd)
		if serr != nil {
			return serr
		}
		return cerr
	})
}

func (f *openFile) Lock() error   { return billy.ErrNotSupported }
func (f *openFile) Unlock() error { return billy.ErrNotSupported }

func (f *openFile) Truncate(size int64) error {
	if f.fd < 0 {
		return os.ErrClosed
	}
	return f.fs.do("truncate", f.name, func() error {
		if f.fs.readOnly() {
			return unix.EROFS
		}
		return unix.Ftruncate(f.fd, size)
	})
}

// fileInfo is an lstat result in the form go-nfs turns into fattr3. It
// keeps only what go-nfs reads: directory listings stay cached for a while
// (see dirCache), and a statx buffer is 256 bytes.
type fileInfo struct {
	name                  string
	mode, nlink, uid, gid uint32
	rdevMajor, rdevMinor  uint32
	size, ino             uint64
	mtimeSec              int64
	mtimeNsec             uint32
}

func newFileInfo(name string, st *unix.Statx_t) *fileInfo {
	return &fileInfo{
		name: name, mode: uint32(st.Mode), nlink: st.Nlink, uid: st.Uid, gid: st.Gid,
		rdevMajor: st.Rdev_major, rdevMinor: st.Rdev_minor, size: st.Size, ino: st.Ino,
		mtimeSec: st.Mtime.Sec, mtimeNsec: st.Mtime.Nsec,
	}
}

func (fi *fileInfo) Name() string       { return fi.name }
func (fi *fileInfo) Size() int64        { return int64(fi.size) }
func (fi *fileInfo) ModTime() time.Time { return time.Unix(fi.mtimeSec, int64(fi.mtimeNsec)) }
func (fi *fileInfo) IsDir() bool        { return fi.mode&unix.S_IFMT == unix.S_IFDIR }

// Mode carries the type in Go's bits, which go-nfs reads for the file type,
// and the twelve Unix permission bits in their Unix positions (bits 9-11 are
// unused by os.FileMode): go-nfs sends uint32(Mode()) as fattr3.mode, so the
// setuid, setgid and sticky bits reach the client where it expects them.
func (fi *fileInfo) Mode() os.FileMode {
	m := os.FileMode(fi.mode & 0o7777)
	switch fi.mode & unix.S_IFMT {
	case unix.S_IFDIR:
		m |= os.ModeDir
	case unix.S_IFLNK:
		m |= os.ModeSymlink
	case unix.S_IFIFO:
		m |= os.ModeNamedPipe
	case unix.S_IFSOCK:
		m |= os.ModeSocket
	case unix.S_IFCHR:
		m |= os.ModeDevice | os.ModeCharDevice
	case unix.S_IFBLK:
		m |= os.ModeDevice
	}
	return m
}

// Sys gives go-nfs the fields os.FileInfo lacks.
func (fi *fileInfo) Sys() any {
	return &nfsfile.FileInfo{
		Nlink:  fi.nlink,
		UID:    fi.uid,
		GID:    fi.gid,
		Major:  fi.rdevMajor,
		Minor:  fi.rdevMinor,
		Fileid: fi.ino,
	}
}
