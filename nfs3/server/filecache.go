package server

import (
	"sync"

	"golang.org/x/sys/unix"
)

// fileCache keeps regular files open between the READs and WRITEs of
// callers the server serves as itself (root, see identity.is), as knfsd's
// file cache does: such a READ costs a pread and a stat instead of turning
// the handle into a path and opening the file. Other callers open the file
// for each call, as themselves, so the kernel checks their permissions.
//
// A cached file whose last link is gone answers STALE and leaves the cache,
// as a handle of a deleted file does.
type fileCache struct {
	mu    sync.Mutex
	files map[string]*cachedFile
	clock uint64
}

// maxCachedFiles bounds the open files the cache keeps.
const maxCachedFiles = 256

type cachedFile struct {
	fd   int
	refs int
	used uint64
	gone bool // evicted: close at the last release
}

// acquire returns the open file of handle fh, if cached.
func (c *fileCache) acquire(fh []byte) *cachedFile {
	c.mu.Lock()
	defer c.mu.Unlock()
	f := c.files[string(fh)]
	if f != nil {
		f.refs++
		c.clock++
		f.used = c.clock
	}
	return f
}

// add caches fd, a regular file opened read-write (read-only on a
// read-only server) as the server, for fh, and returns it acquired. The
// cache owns fd from now on.
func (c *fileCache) add(fh []byte, fd int) *cachedFile {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.files == nil {
		c.files = make(map[string]*cachedFile)
	}
	if old := c.files[string(fh)]; old != nil {
		// Another worker cached it meanwhile: use that one.
		unix.Close(fd)
		old.refs++
		return old
	}
	if len(c.files) >= maxCachedFiles {
		c.evictOldestLocked()
	}
	c.clock++
	f := &cachedFile{fd: fd, refs: 1, used: c.clock}
	c.files[string(fh)] = f
	return f
}

func (c *fileCache) evictOldestLocked() {
	var oldest string
	var at uint64
	for k, f := range c.files {
		if oldest == "" || f.used < at {
			oldest, at = k, f.used
		}
	}
	c.dropLocked(oldest)
}

// drop forgets the file of fh (its file is gone).
func (c *fileCache) drop(fh []byte) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.dropLocked(string(fh))
}

func (c *fileCache) dropLocked(key string) {
	f := c.files[key]
	if f == nil {
		return
	}
	delete(c.files, key)
	f.gone = true
	if f.refs == 0 {
		unix.Close(f.fd)
	}
}

// release ends a use of f.
func (c *fileCache) release(f *cachedFile) {
	c.mu.Lock()
	defer c.mu.Unlock()
	f.refs--
	if f.refs == 0 && f.gone {
		unix.Close(f.fd)
	}
}

// closeAll closes every cached file.
func (c *fileCache) closeAll() {
	c.mu.Lock()
	defer c.mu.Unlock()
	for k := range c.files {
		c.dropLocked(k)
	}
}
