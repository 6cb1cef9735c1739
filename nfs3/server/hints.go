package server

import (
	"bytes"
	"sync"

	"golang.org/x/sys/unix"
)

// hintCache remembers, for the handles of files (not directories) the server
// gave out, the directory and name it gave each out under. It vouches that a
// file the kernel opens by handle lies inside the export when /proc cannot
// show it there: a "disconnected" file, or one whose path is longer than
// PATH_MAX (see Server.beneath). Each use checks that the name still names
// the very inode. It is bounded; when full an arbitrary entry goes, and a
// handle without a hint falls back to a search of the tree.
type hintCache struct {
	mu sync.Mutex
	m  map[string]hint
}

type hint struct {
	dir  []byte // the directory's handle, the cache's own copy
	name string
}

const maxHints = 1 << 16

// put records that fh was given out as name in the directory of handle
// dir. It copies dir: the handles of a call's arguments are views of its
// record, which the next call overwrites. (A hint kept as such a view came
// to name the file itself as its directory, and every open of the file
// opened it again through its hint, without end.)
func (c *hintCache) put(fh, dir []byte, name string) {
	dir = bytes.Clone(dir)
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.m == nil {
		c.m = make(map[string]hint)
	}
	if _, ok := c.m[string(fh)]; !ok && len(c.m) >= maxHints {
		for k := range c.m {
			delete(c.m, k)
			break
		}
	}
	c.m[string(fh)] = hint{dir: dir, name: name}
}

func (c *hintCache) get(fh []byte) (hint, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	h, ok := c.m[string(fh)]
	return h, ok
}

func (c *hintCache) drop(fh []byte) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.m, string(fh))
}

// check reports whether the hint of n's handle places n inside the export:
// its directory opens (and lies inside the export) and the name in it is n's
// inode. The directory is opened as one (openDirNode): a directory needs
// no hint to be placed, so checking a hint never consults another.
func (c *hintCache) check(s *Server, n *node) bool {
	h, ok := c.get(n.fh)
	if !ok {
		return false
	}
	dir, err := s.openDirNode(h.dir)
	if err != nil {
		return false
	}
	defer dir.close()
	return s.sameInode(dir.fd, h.name, &n.st)
}

// remember records the hint for a file's handle given out as name in dir;
// directories need none.
func (s *Server) remember(fh []byte, mode uint16, dir []byte, name string) {
	if mode&unix.S_IFMT != unix.S_IFDIR && name != "." && name != ".." {
		s.hints.put(fh, dir, name)
	}
}
