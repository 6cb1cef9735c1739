package server

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"

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
//
// The multiple of 4 matters: go-nfs reads some handles without consuming XDR
// padding.
const (
	handleVersion   = 1
	handleHeaderLen = 8
	maxKernelHandle = maxFH - handleHeaderLen
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
// NFSv3 and that this process may open them, and remembers the root's handle
// and mount.
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
	fd, err := unix.OpenByHandleAt(s.rootfd, h, unix.O_PATH|unix.O_CLOEXEC)
	if err != nil {
		if err == unix.EPERM {
			return fmt.Errorf("server: open_by_handle_at needs CAP_DAC_READ_SEARCH (run as root): %w", err)
		}
		return fmt.Errorf("server: %s: open_by_handle_at: %w", s.rootPath, err)
	}
	defer unix.Close(fd)
	if p, ok := s.relPath(fd); !ok || p != "" {
		return fmt.Errorf("server: %s: its file handle opens %q, not the root", s.rootPath, p)
	}
	return nil
}

// handleFor returns the NFS handle of rel. It runs with the server's own
// identity: go-nfs asks for handles of objects it has just looked up or
// created as the caller.
func (s *Server) handleFor(rel string) ([]byte, error) {
	if rel == "" {
		return s.rootHandle, nil
	}
	o, err := s.locate(rel)
	if err != nil {
		return nil, fmt.Errorf("server: handle for %q: %w", rel, err)
	}
	defer o.close()
	h, mnt, err := unix.NameToHandleAt(o.dirfd, o.name, 0)
	if err != nil {
		return nil, fmt.Errorf("server: handle for %q: %w", rel, err)
	}
	if mnt != s.mountID {
		return nil, fmt.Errorf("server: handle for %q: %w", rel, errOtherMount)
	}
	b, err := encodeHandle(h)
	if err != nil {
		return nil, err
	}
	s.hints.put(b, rel)
	return b, nil
}

// pathFor turns an NFS handle into the object's current path under the
// root. Every failure is ESTALE, which go-nfs answers as NFS3ERR_STALE.
//
// The kernel opens the inode by handle; /proc/self/fd names its path. Two
// cases need more: a deleted file (nlink 0) is stale, and a file (not a
// directory, which the kernel always reconnects) whose dentry has left the
// kernel's cache comes back "disconnected", with no path. Then the path the
// handle was last given out for is tried, then a bounded search of the tree
// for the inode. Each candidate path is checked to name the very inode.
func (s *Server) pathFor(fh []byte) (string, error) {
	if bytes.Equal(fh, s.rootHandle) {
		return "", nil
	}
	h, err := decodeHandle(fh)
	if err != nil {
		return "", err
	}
	fd, err := unix.OpenByHandleAt(s.rootfd, h, unix.O_PATH|unix.O_CLOEXEC)
	if err != nil {
		return "", fmt.Errorf("%w: %w", errStale, err)
	}
	defer unix.Close(fd)
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil || st.Nlink == 0 {
		return "", errStale
	}
	if rel, ok := s.relPath(fd); ok && s.sameInode(rel, &st) {
		return rel, nil
	}
	if rel, ok := s.hints.get(fh); ok && s.sameInode(rel, &st) {
		return rel, nil
	}
	if st.Mode&unix.S_IFMT != unix.S_IFDIR {
		if rel, ok := s.searchInode(&st); ok {
			s.hints.put(fh, rel)
			return rel, nil
		}
	}
	return "", errStale
}

// relPath is the path of fd relative to the root, if it lies under it.
func (s *Server) relPath(fd int) (string, bool) {
	p, err := os.Readlink(procFD(fd))
	if err != nil {
		return "", false
	}
	if p == s.rootPath {
		return "", true
	}
	prefix := s.rootPath + "/"
	if s.rootPath == "/" {
		prefix = "/"
	}
	if !strings.HasPrefix(p, prefix) {
		return "", false // outside the export, or disconnected
	}
	return p[len(prefix):], true
}

// sameInode reports whether rel names the inode st describes. A plain fstatat
// suffices: it only reads, and the operations that follow re-resolve rel
// with openat2's confinement.
func (s *Server) sameInode(rel string, st *unix.Stat_t) bool {
	var cur unix.Stat_t
	name, flags := rel, unix.AT_SYMLINK_NOFOLLOW
	if rel == "" {
		flags |= unix.AT_EMPTY_PATH
	}
	if unix.Fstatat(s.rootfd, name, &cur, flags) != nil {
		return false
	}
	return cur.Dev == st.Dev && cur.Ino == st.Ino
}

// maxSearch bounds the directory entries one search for a disconnected
// file's path may read, so a hostile handle cannot make a call walk a huge
// tree.
const maxSearch = 1 << 17

// searchInode looks for a name of st's inode, breadth first from the root,
// reading directories with getdents (whose entries carry inode numbers) so
// no entry needs a stat.
func (s *Server) searchInode(st *unix.Stat_t) (string, bool) {
	queue := []string{""}
	budget := maxSearch
	buf := make([]byte, 32<<10)
	for len(queue) > 0 && budget > 0 {
		dir := queue[0]
		queue = queue[1:]
		fd, err := s.openBeneath(dir, unix.O_RDONLY|unix.O_DIRECTORY, 0)
		if err != nil {
			continue
		}
		var found string
		readDirents(fd, buf, func(ino uint64, typ uint8, name string) bool {
			budget--
			rel := joinRel(dir, name)
			if ino == st.Ino && s.sameInode(rel, st) {
				found = rel
				return false
			}
			if typ == unix.DT_DIR {
				queue = append(queue, rel)
			}
			return budget > 0
		})
		unix.Close(fd)
		if found != "" {
			s.logf("server: reconnected file handle of inode %d by search: %s", st.Ino, found)
			return found, true
		}
	}
	return "", false
}

// readDirents calls fn for each entry of the open directory fd except "."
// and "..", until fn returns false. It parses linux_dirent64 records itself
// because x/sys's ParseDirent drops the inode numbers.
func readDirents(fd int, buf []byte, fn func(ino uint64, typ uint8, name string) bool) error {
	for {
		n, err := unix.Getdents(fd, buf)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return err
		}
		if n <= 0 {
			return nil
		}
		b := buf[:n]
		for len(b) >= 19 {
			// struct linux_dirent64 { u64 ino; s64 off; u16 reclen; u8 type; char name[]; }
			ino := binary.NativeEndian.Uint64(b[0:8])
			reclen := int(binary.NativeEndian.Uint16(b[16:18]))
			if reclen < 19 || reclen > len(b) {
				return errors.New("server: malformed directory entry")
			}
			typ := b[18]
			name := b[19:reclen]
			if i := bytes.IndexByte(name, 0); i >= 0 {
				name = name[:i]
			}
			b = b[reclen:]
			if s := string(name); s != "." && s != ".." {
				if !fn(ino, typ, s) {
					return nil
				}
			}
		}
	}
}

// hintCache remembers the path each handle was last given out for. It
// rescues handles of files the kernel hands back disconnected (see pathFor)
// while the server runs. It is bounded; when full an arbitrary entry goes.
type hintCache struct {
	mu sync.Mutex
	m  map[string]string
}

const maxHints = 1 << 16

func (c *hintCache) get(fh []byte) (string, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	rel, ok := c.m[string(fh)]
	return rel, ok
}

func (c *hintCache) put(fh []byte, rel string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.m == nil {
		c.m = make(map[string]string)
	}
	if _, ok := c.m[string(fh)]; !ok && len(c.m) >= maxHints {
		for k := range c.m {
			delete(c.m, k)
			break
		}
	}
	c.m[string(fh)] = rel
}

func (c *hintCache) drop(fh []byte) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.m, string(fh))
}
