package server

import (
	"bytes"
	"encoding/binary"
	"fmt"

	"github.com/rdmafs/rdmafs/nfs3"
	"golang.org/x/sys/unix"
)

// File handles are the kernel's own (name_to_handle_at), so like knfsd's they
// name inodes, not paths: they survive renames and restarts of the server.
//
// Encoding, always a multiple of 4 bytes and at most 64 (NFS3_FHSIZE):
//
//	byte 0     version (1)
//	byte 1     n, length of the kernel handle
//	bytes 2-3  zero
//	bytes 4-7  kernel handle type, big-endian
//	8..8+n     kernel handle, then zero padding to a multiple of 4
const (
	handleVersion   = 1
	handleHeaderLen = 8
	maxKernelHandle = nfs3.FHSize - handleHeaderLen
)

var errStale = fmt.Errorf("server: stale file handle: %w", unix.ESTALE)

func encodeHandle(h unix.FileHandle) ([]byte, error) {
	kb := h.Bytes()
	if len(kb) > maxKernelHandle {
		return nil, fmt.Errorf("server: kernel file handle of %d bytes exceeds the %d NFSv3 allows", len(kb), maxKernelHandle)
	}
	b := make([]byte, handleHeaderLen+len(kb)+(-len(kb)&3))
	b[0] = handleVersion
	b[1] = byte(len(kb))
	binary.BigEndian.PutUint32(b[4:], uint32(h.Type()))
	copy(b[handleHeaderLen:], kb)
	return b, nil
}

// decodeHandle accepts exactly what encodeHandle produces.
func decodeHandle(b []byte) (unix.FileHandle, error) {
	if len(b) < handleHeaderLen || b[0] != handleVersion || b[2] != 0 || b[3] != 0 {
		return unix.FileHandle{}, errStale
	}
	n := int(b[1])
	if n == 0 || n > maxKernelHandle || len(b) != handleHeaderLen+n+(-n&3) {
		return unix.FileHandle{}, errStale
	}
	for _, pad := range b[handleHeaderLen+n:] {
		if pad != 0 {
			return unix.FileHandle{}, errStale
		}
	}
	typ := int32(binary.BigEndian.Uint32(b[4:]))
	return unix.NewFileHandle(typ, b[handleHeaderLen:handleHeaderLen+n]), nil
}

// wellFormedHandle reports whether fh has the shape of our handles.
func wellFormedHandle(fh []byte) bool {
	_, err := decodeHandle(fh)
	return err == nil
}

// initHandles checks that the root's filesystem gives out handles that fit
// NFSv3 and that this process may open them, and remembers the root's handle,
// mount and inode.
func (s *Server) initHandles() error {
	h, mnt, err := unix.NameToHandleAt(s.rootfd, "", unix.AT_EMPTY_PATH)
	if err != nil {
		if err == unix.EOPNOTSUPP {
			return fmt.Errorf("server: %s: the filesystem does not support file handles (name_to_handle_at), which persistent NFS handles need", s.rootPath)
		}
		return fmt.Errorf("server: %s: name_to_handle_at: %w", s.rootPath, err)
	}
	s.mountID = mnt
	if s.rootHandle, err = encodeHandle(h); err != nil {
		return fmt.Errorf("server: %s: %w", s.rootPath, err)
	}
	if err := statFD(s.rootfd, &s.rootStat); err != nil {
		return fmt.Errorf("server: %s: %w", s.rootPath, err)
	}
	fd, err := unix.OpenByHandleAt(s.rootfd, h, unix.O_PATH|unix.O_CLOEXEC)
	if err != nil {
		if err == unix.EPERM {
			return fmt.Errorf("server: open_by_handle_at needs CAP_DAC_READ_SEARCH (run as root): %w", err)
		}
		return fmt.Errorf("server: %s: open_by_handle_at: %w", s.rootPath, err)
	}
	defer unix.Close(fd)
	var st unix.Statx_t
	if err := statFD(fd, &st); err != nil || !s.isRoot(&st) {
		return fmt.Errorf("server: %s: its file handle does not open the root", s.rootPath)
	}
	return nil
}

// handleAt returns the NFS handle of name in the directory dirfd (of the
// object dirfd itself when name is ""). The object must be on the export's
// mount. It needs no privilege: callers' calls ask for it as the caller.
func (s *Server) handleAt(dirfd int, name string) ([]byte, error) {
	flags := 0
	if name == "" {
		flags = unix.AT_EMPTY_PATH
	}
	h, mnt, err := unix.NameToHandleAt(dirfd, name, flags)
	if err != nil {
		return nil, err
	}
	if mnt != s.mountID {
		return nil, errOtherMount
	}
	return encodeHandle(h)
}

// A node is the object a file handle names, for the length of one call: an
// O_PATH descriptor of it and its attributes when it was opened. Every
// operation of the call works relative to that descriptor, never through a
// path, so objects at any depth are served alike.
type node struct {
	fd   int // O_PATH; the server's root descriptor for the root
	fh   []byte
	st   unix.Statx_t
	root bool
}

func (n *node) close() {
	if !n.root && n.fd >= 0 {
		unix.Close(n.fd)
	}
	n.fd = -1
}

func (n *node) isDir() bool  { return n.st.Mode&unix.S_IFMT == unix.S_IFDIR }
func (n *node) isReg() bool  { return n.st.Mode&unix.S_IFMT == unix.S_IFREG }
func (n *node) isLink() bool { return n.st.Mode&unix.S_IFMT == unix.S_IFLNK }

// open turns an NFS handle into a node. It runs with the server's own
// identity (open_by_handle_at needs CAP_DAC_READ_SEARCH); what the caller
// may do with the node is checked by the operations that follow, which run
// as the caller. Every failure is ESTALE.
//
// A handle of a deleted object is stale, and so is one of an object outside
// the export (same filesystem, another directory: see beneath).
func (s *Server) open(fh []byte) (*node, error) { return s.openNode(fh, false) }

// openDirNode is open for a handle that must be a directory's: any other
// is stale before its place is looked for. Directories are placed by
// /proc or a walk up, never by a hint or a search.
func (s *Server) openDirNode(fh []byte) (*node, error) { return s.openNode(fh, true) }

func (s *Server) openNode(fh []byte, dirOnly bool) (*node, error) {
	if bytes.Equal(fh, s.rootHandle) {
		n := &node{fd: s.rootfd, fh: s.rootHandle, root: true}
		if err := statFD(s.rootfd, &n.st); err != nil {
			return nil, fmt.Errorf("%w: %w", errStale, err)
		}
		return n, nil
	}
	h, err := decodeHandle(fh)
	if err != nil {
		return nil, err
	}
	fd, err := unix.OpenByHandleAt(s.rootfd, h, unix.O_PATH|unix.O_CLOEXEC)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", errStale, err)
	}
	n := &node{fd: fd, fh: fh}
	if err := statFD(fd, &n.st); err != nil || n.st.Nlink == 0 || s.isRoot(&n.st) || dirOnly && !n.isDir() {
		// The root's own handle is the one compared above; another
		// encoding of it is not ours.
		n.close()
		return nil, errStale
	}
	if !s.beneath(n) {
		n.close()
		return nil, errStale
	}
	return n, nil
}

// isRoot reports whether st describes the export's root.
func (s *Server) isRoot(st *unix.Statx_t) bool {
	return st.Ino == s.rootStat.Ino && st.Dev_major == s.rootStat.Dev_major && st.Dev_minor == s.rootStat.Dev_minor
}

// beneath reports whether the node lies inside the export. A handle names an
// inode of the root's filesystem, which may be larger than the export (knfsd
// exports with no_subtree_check accept such handles; this server does not).
//
// The kernel shows the path of an open object in /proc, which settles most
// cases. A directory the kernel always connects to its parents, so one whose
// path is too long for /proc (ENAMETOOLONG beyond PATH_MAX) is checked by
// walking up through "..". A file may come back "disconnected" (its dentry
// left the cache: /proc then shows no real path) or too deep: its handle is
// then checked against the directory and name it was last given out for, and
// failing that found by a bounded search of the tree.
func (s *Server) beneath(n *node) bool {
	p, err := readlinkFD(n.fd)
	if err == nil && (p == s.rootPath || len(p) > len(s.rootPrefix) && p[:len(s.rootPrefix)] == s.rootPrefix) {
		return true
	}
	if n.isDir() {
		return err == unix.ENAMETOOLONG && s.walkUp(n.fd)
	}
	if s.hints.check(s, n) {
		return true
	}
	return s.search(n)
}

// maxDepth bounds the walk up from a directory, and so the work one handle
// can cost.
const maxDepth = 1 << 16

// walkUp reports whether the root is an ancestor of the directory fd,
// following ".." until the root, the top of the filesystem (whose ".." is
// itself) or maxDepth.
func (s *Server) walkUp(fd int) bool {
	cur := -1
	defer func() {
		if cur >= 0 {
			unix.Close(cur)
		}
	}()
	from := fd
	var prev unix.Statx_t
	if statFD(fd, &prev) != nil {
		return false
	}
	for range maxDepth {
		up, err := unix.Openat(from, "..", unix.O_PATH|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
		if err != nil {
			return false
		}
		if cur >= 0 {
			unix.Close(cur)
		}
		cur, from = up, up
		var st unix.Statx_t
		if statFD(up, &st) != nil {
			return false
		}
		if s.isRoot(&st) {
			return true
		}
		if st.Ino == prev.Ino && st.Dev_major == prev.Dev_major && st.Dev_minor == prev.Dev_minor {
			return false // the top of the filesystem
		}
		prev = st
	}
	return false
}

// readlinkFD is the path /proc shows for one of our descriptors.
func readlinkFD(fd int) (string, error) {
	buf := make([]byte, unix.PathMax+1)
	n, err := unix.Readlink(procFD(fd), buf)
	if err != nil {
		return "", err
	}
	return string(buf[:n]), nil
}

// maxSearch bounds the directory entries one search for a disconnected
// file's place may read, so a hostile handle cannot make a call walk a huge
// tree.
const maxSearch = 1 << 17

// search looks for a name of the node's inode, breadth first from the root,
// reading directories with getdents (whose entries carry inode numbers) so
// no entry needs a stat. Directories to visit are queued as handles, not
// open descriptors or paths: the queue costs a few bytes a directory and
// works at any depth. A hit is remembered as the handle's hint.
func (s *Server) search(n *node) bool {
	queue := [][]byte{s.rootHandle}
	budget := maxSearch
	buf := make([]byte, 32<<10)
	for len(queue) > 0 && budget > 0 {
		dfh := queue[0]
		queue = queue[1:]
		dir, err := s.openDir(dfh)
		if err != nil {
			continue
		}
		found := ""
		readDirents(dir, buf, func(ino uint64, _ int64, typ uint8, name string) bool {
			if name == "." || name == ".." {
				return true
			}
			budget--
			if ino == n.st.Ino && s.sameInode(dir, name, &n.st) {
				found = name
				return false
			}
			if typ == unix.DT_DIR {
				if fh, err := s.handleAt(dir, name); err == nil {
					queue = append(queue, fh)
				}
			}
			return budget > 0
		})
		unix.Close(dir)
		if found != "" {
			s.logf("server: reconnected the file handle of inode %d by a search of the export", n.st.Ino)
			s.hints.put(n.fh, dfh, found)
			return true
		}
	}
	return false
}

// openDir opens the directory of handle dfh for reading its entries, as
// the server. Directories are always connected, so beneath is a /proc
// lookup or a walk up.
func (s *Server) openDir(dfh []byte) (int, error) {
	if bytes.Equal(dfh, s.rootHandle) {
		return unix.Openat(s.rootfd, ".", unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	}
	n, err := s.openDirNode(dfh)
	if err != nil {
		return -1, err
	}
	defer n.close()
	return unix.Open(procFD(n.fd), unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
}

// sameInode reports whether name in the directory dirfd is the inode st
// describes.
func (s *Server) sameInode(dirfd int, name string, st *unix.Statx_t) bool {
	var cur unix.Statx_t
	if unix.Statx(dirfd, name, unix.AT_SYMLINK_NOFOLLOW|unix.AT_NO_AUTOMOUNT, unix.STATX_INO, &cur) != nil {
		return false
	}
	return cur.Ino == st.Ino && cur.Dev_major == st.Dev_major && cur.Dev_minor == st.Dev_minor
}

// readDirents calls fn for each entry of the open directory fd, from where
// its offset stands, until fn returns false or the directory ends. off is the
// entry's d_off: the position of the entry after it, which a later listing
// may seek to. It parses linux_dirent64 records itself because x/sys's
// ParseDirent drops the inode numbers and offsets. It returns whether the
// directory ended.
func readDirents(fd int, buf []byte, fn func(ino uint64, off int64, typ uint8, name string) bool) (bool, error) {
	for {
		n, err := unix.Getdents(fd, buf)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return false, err
		}
		if n <= 0 {
			return true, nil
		}
		b := buf[:n]
		for len(b) >= 19 {
			// struct linux_dirent64 { u64 ino; s64 off; u16 reclen; u8 type; char name[]; }
			ino := binary.NativeEndian.Uint64(b[0:8])
			off := int64(binary.NativeEndian.Uint64(b[8:16]))
			reclen := int(binary.NativeEndian.Uint16(b[16:18]))
			if reclen < 19 || reclen > len(b) {
				return false, fmt.Errorf("server: malformed directory entry: %w", unix.EIO)
			}
			typ := b[18]
			name := b[19:reclen]
			if i := bytes.IndexByte(name, 0); i >= 0 {
				name = name[:i]
			}
			b = b[reclen:]
			if !fn(ino, off, typ, string(name)) {
				return false, nil
			}
		}
	}
}
