package server

import (
	"sync"
	"time"

	"golang.org/x/sys/unix"
)

// fileCache keeps regular files open between the READs, WRITEs and COMMITs
// of callers the server serves as itself (root under no_root_squash, see
// identity.is), as knfsd's file cache does: such a READ costs a pread and a
// stat instead of opening the file by handle. Other callers open the file
// for each call, as themselves, so the kernel checks their permissions.
//
// Like knfsd's cache, it lets go of a file as soon as its name is removed or
// renamed over (drop, from REMOVE and RENAME), so the space of a deleted
// file comes back at once, and closes files unused for fileIdle, so a file
// written through NFS is not held open for writing (a local exec would fail
// with ETXTBSY) and a file deleted on the server side does not keep its
// space for long. A cached file whose last link is gone answers STALE and
// leaves the cache, as a handle of a deleted file does.
type fileCache struct {
	mu      sync.Mutex
	files   map[string]*cachedFile
	clock   uint64
	sweeper bool          // a goroutine closes idle files
	stop    chan struct{} // closed by closeAll
}

// maxCachedFiles bounds the open files the cache keeps.
const maxCachedFiles = 256

// fileIdle is how long a cached file stays open unused: knfsd's file cache
// closes files after about two seconds.
const fileIdle = 2 * time.Second

type cachedFile struct {
	fd      int
	refs    int
	used    uint64    // clock of the last use: the least recently used goes first
	lastUse time.Time // for closing idle files
	gone    bool      // evicted: close at the last release
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
		c.stop = make(chan struct{})
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
	f := &cachedFile{fd: fd, refs: 1, used: c.clock, lastUse: time.Now()}
	c.files[string(fh)] = f
	if !c.sweeper {
		c.sweeper = true
		go c.sweep(c.stop)
	}
	return f
}

// sweep closes files unused for fileIdle, until the cache is empty.
func (c *fileCache) sweep(stop <-chan struct{}) {
	t := time.NewTicker(fileIdle / 2)
	defer t.Stop()
	for {
		select {
		case <-stop:
			return
		case now := <-t.C:
			c.mu.Lock()
			for k, f := range c.files {
				if f.refs == 0 && now.Sub(f.lastUse) >= fileIdle {
					c.dropLocked(k)
				}
			}
			if len(c.files) == 0 {
				c.sweeper = false
				c.mu.Unlock()
				return
			}
			c.mu.Unlock()
		}
	}
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

// drop forgets the file of fh (its name is gone).
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
	f.lastUse = time.Now()
	if f.refs == 0 && f.gone {
		unix.Close(f.fd)
	}
}

// closeAll closes every cached file and stops the sweeper.
func (c *fileCache) closeAll() {
	c.mu.Lock()
	defer c.mu.Unlock()
	for k := range c.files {
		c.dropLocked(k)
	}
	if c.stop != nil {
		close(c.stop)
		c.stop = nil
		c.files = nil
	}
	c.sweeper = false
}
