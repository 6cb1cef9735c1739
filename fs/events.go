package fs

import (
	"sync/atomic"
	"syscall"

	"github.com/hanwen/go-fuse/v2/fuse"
)

// The "events:" and "bytes:" lines of /proc/self/mountstats count what the
// VFS asked of the kernel NFS client. Under FUSE the VFS's requests reach
// rdmafs as FUSE requests, so they are counted where they come in: in a
// wrapper of go-fuse's raw file system, which sees every request whatever
// node or handle answers it. WriteStats documents what each counter means
// for rdmafs.

// event is an index of the "events:" line, in the kernel's order
// (enum nfs_stat_eventcounters, include/uapi/linux/nfs_iostat.h).
type event int

const (
	evInodeRevalidate event = iota
	evDentryRevalidate
	evDataInvalidate
	evAttrInvalidate
	evVFSOpen
	evVFSLookup
	evVFSAccess
	evVFSUpdatePage
	evVFSReadPage
	evVFSReadPages
	evVFSWritePage
	evVFSWritePages
	evVFSGetdents
	evVFSSetattr
	evVFSFlush
	evVFSFsync
	evVFSLock
	evVFSRelease
	evCongestionWait
	evSetattrTrunc
	evExtendWrite
	evSillyRename
	evShortRead
	evShortWrite
	evDelay
	evPNFSRead
	evPNFSWrite
	numEvents
)

// byteCount is an index of the "bytes:" line, in the kernel's order
// (enum nfs_stat_bytecounters).
type byteCount int

const (
	bytesNormalRead byteCount = iota
	bytesNormalWritten
	bytesDirectRead
	bytesDirectWritten
	bytesServerRead
	bytesServerWritten
	bytesReadPages
	bytesWritePages
	numByteCounts
)

// pageSize is the unit of the readpages and writepages counters.
const pageSize = 4096

// ioEvents holds the counters of the "events:" and "bytes:" lines that the
// FUSE requests feed.
type ioEvents struct {
	events [numEvents]atomic.Uint64
	bytes  [numByteCounts]atomic.Uint64
}

func (e *ioEvents) inc(ev event) { e.events[ev].Add(1) }

// read counts n bytes handed to the kernel for a READ request of a file
// opened with openFlags.
func (e *ioEvents) read(openFlags uint32, n int) {
	e.bytes[bytesServerRead].Add(uint64(n))
	if openFlags&syscall.O_DIRECT != 0 {
		e.bytes[bytesDirectRead].Add(uint64(n))
		return
	}
	e.inc(evVFSReadPages)
	e.bytes[bytesNormalRead].Add(uint64(n))
	e.bytes[bytesReadPages].Add(pages(n))
}

// write counts n bytes taken from the kernel by a WRITE request of a file
// opened with openFlags.
func (e *ioEvents) write(openFlags uint32, n uint32) {
	if openFlags&syscall.O_DIRECT != 0 {
		e.bytes[bytesDirectWritten].Add(uint64(n))
		return
	}
	e.inc(evVFSWritePages)
	e.bytes[bytesNormalWritten].Add(uint64(n))
	e.bytes[bytesWritePages].Add(pages(int(n)))
}

func pages(n int) uint64 { return uint64((n + pageSize - 1) / pageSize) }

// countingFS is go-fuse's raw file system with every request that the
// statistics count counted on its way through.
type countingFS struct {
	fuse.RawFileSystem
	ev      *ioEvents
	locking bool       // locks go to the server (Config.Locks)
	owners  lockOwners // the lock owners of each open file
}

var _ fuse.RawFileSystem = (*countingFS)(nil)

func (c *countingFS) Lookup(cancel <-chan struct{}, h *fuse.InHeader, name string, out *fuse.EntryOut) fuse.Status {
	c.ev.inc(evVFSLookup)
	return c.RawFileSystem.Lookup(cancel, h, name, out)
}

func (c *countingFS) GetAttr(cancel <-chan struct{}, in *fuse.GetAttrIn, out *fuse.AttrOut) fuse.Status {
	c.ev.inc(evInodeRevalidate)
	return c.RawFileSystem.GetAttr(cancel, in, out)
}

func (c *countingFS) Statx(cancel <-chan struct{}, in *fuse.StatxIn, out *fuse.StatxOut) fuse.Status {
	c.ev.inc(evInodeRevalidate)
	return c.RawFileSystem.Statx(cancel, in, out)
}

func (c *countingFS) SetAttr(cancel <-chan struct{}, in *fuse.SetAttrIn, out *fuse.AttrOut) fuse.Status {
	c.ev.inc(evVFSSetattr)
	if in.Valid&fuse.FATTR_SIZE != 0 {
		c.ev.inc(evSetattrTrunc)
	}
	return c.RawFileSystem.SetAttr(cancel, in, out)
}

func (c *countingFS) Access(cancel <-chan struct{}, in *fuse.AccessIn) fuse.Status {
	c.ev.inc(evVFSAccess)
	return c.RawFileSystem.Access(cancel, in)
}

func (c *countingFS) Create(cancel <-chan struct{}, in *fuse.CreateIn, name string, out *fuse.CreateOut) fuse.Status {
	c.ev.inc(evVFSOpen)
	return c.RawFileSystem.Create(cancel, in, name, out)
}

// Open counts the open and, when the reply lets the kernel drop the file's
// cached pages (no FOPEN_KEEP_CACHE: the file changed, or it had no cached
// data yet), a data cache invalidation.
func (c *countingFS) Open(cancel <-chan struct{}, in *fuse.OpenIn, out *fuse.OpenOut) fuse.Status {
	c.ev.inc(evVFSOpen)
	st := c.RawFileSystem.Open(cancel, in, out)
	if st == fuse.OK && out.OpenFlags&(fuse.FOPEN_KEEP_CACHE|fuse.FOPEN_DIRECT_IO) == 0 {
		c.ev.inc(evDataInvalidate)
	}
	return st
}

func (c *countingFS) OpenDir(cancel <-chan struct{}, in *fuse.OpenIn, out *fuse.OpenOut) fuse.Status {
	c.ev.inc(evVFSOpen)
	return c.RawFileSystem.OpenDir(cancel, in, out)
}

func (c *countingFS) Read(cancel <-chan struct{}, in *fuse.ReadIn, buf []byte) (fuse.ReadResult, fuse.Status) {
	res, st := c.RawFileSystem.Read(cancel, in, buf)
	if st == fuse.OK && res != nil {
		c.ev.read(in.Flags, res.Size())
	}
	return res, st
}

func (c *countingFS) Write(cancel <-chan struct{}, in *fuse.WriteIn, data []byte) (uint32, fuse.Status) {
	n, st := c.RawFileSystem.Write(cancel, in, data)
	if st == fuse.OK {
		c.ev.write(in.Flags, n)
	}
	return n, st
}

func (c *countingFS) Writev(cancel <-chan struct{}, in *fuse.WriteIn, data [][]byte) (uint32, fuse.Status) {
	n, st := c.RawFileSystem.Writev(cancel, in, data)
	if st == fuse.OK {
		c.ev.write(in.Flags, n)
	}
	return n, st
}

func (c *countingFS) ReadDir(cancel <-chan struct{}, in *fuse.ReadIn, out *fuse.DirEntryList) fuse.Status {
	c.ev.inc(evVFSGetdents)
	return c.RawFileSystem.ReadDir(cancel, in, out)
}

func (c *countingFS) ReadDirPlus(cancel <-chan struct{}, in *fuse.ReadIn, out *fuse.DirEntryList) fuse.Status {
	c.ev.inc(evVFSGetdents)
	return c.RawFileSystem.ReadDirPlus(cancel, in, out)
}

func (c *countingFS) Flush(cancel <-chan struct{}, in *fuse.FlushIn) fuse.Status {
	c.ev.inc(evVFSFlush)
	if c.locking && in.LockOwner != 0 {
		// close(2): the closing process's fcntl locks on the file go.
		unlockAll(c.RawFileSystem, cancel, &in.InHeader, in.Fh, in.LockOwner)
	}
	return c.RawFileSystem.Flush(cancel, in)
}

func (c *countingFS) Fsync(cancel <-chan struct{}, in *fuse.FsyncIn) fuse.Status {
	c.ev.inc(evVFSFsync)
	return c.RawFileSystem.Fsync(cancel, in)
}

func (c *countingFS) FsyncDir(cancel <-chan struct{}, in *fuse.FsyncIn) fuse.Status {
	c.ev.inc(evVFSFsync)
	return c.RawFileSystem.FsyncDir(cancel, in)
}

func (c *countingFS) GetLk(cancel <-chan struct{}, in *fuse.LkIn, out *fuse.LkOut) fuse.Status {
	c.ev.inc(evVFSLock)
	return c.RawFileSystem.GetLk(cancel, in, out)
}

func (c *countingFS) SetLk(cancel <-chan struct{}, in *fuse.LkIn) fuse.Status {
	c.ev.inc(evVFSLock)
	st := c.RawFileSystem.SetLk(cancel, in)
	if st.Ok() && in.Lk.Typ != syscall.F_UNLCK {
		c.owners.add(in.Fh, in.Owner)
	}
	return st
}

func (c *countingFS) SetLkw(cancel <-chan struct{}, in *fuse.LkIn) fuse.Status {
	c.ev.inc(evVFSLock)
	st := c.RawFileSystem.SetLkw(cancel, in)
	if st.Ok() && in.Lk.Typ != syscall.F_UNLCK {
		c.owners.add(in.Fh, in.Owner)
	}
	return st
}

func (c *countingFS) Release(cancel <-chan struct{}, in *fuse.ReleaseIn) {
	c.ev.inc(evVFSRelease)
	// The last close of an open file: its OFD and flock locks go, and
	// whatever else was taken through it.
	for owner := range c.owners.take(in.Fh) {
		unlockAll(c.RawFileSystem, cancel, &in.InHeader, in.Fh, owner)
	}
	c.RawFileSystem.Release(cancel, in)
}
