package fs

import (
	"context"
	"math"
	"sync"
	"sync/atomic"
	"syscall"

	gofs "github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"

	"github.com/rdmafs/rdmafs/nfs3"
	"github.com/rdmafs/rdmafs/sunrpc"
)

// fileHandle is an open regular file. Its reads and writes go out with
// the credential of the process that opened it, as the kernel client's do.
type fileHandle struct {
	fs     *FS
	obj    *object
	cred   *sunrpc.Cred
	stable nfs3.StableHow // Unstable: write-behind; else each write waits for the server
	closed atomic.Bool    // a FLUSH came and no I/O since (counted in obj.closed)
}

// markClosed records a FLUSH: close(2) of a descriptor of h. Its RELEASE
// follows (asynchronously) unless another descriptor shares h.
func (h *fileHandle) markClosed() {
	h.obj.mu.Lock()
	if !h.closed.Swap(true) {
		h.obj.closed++
	}
	h.obj.mu.Unlock()
}

// inUse records I/O on h: it is not on its way to being released.
func (h *fileHandle) inUse() {
	if !h.closed.Load() {
		return
	}
	h.obj.mu.Lock()
	if h.closed.Swap(false) {
		h.obj.closed--
	}
	h.obj.mu.Unlock()
}

var (
	_ = (gofs.FileReader)((*fileHandle)(nil))
	_ = (gofs.FileWriter)((*fileHandle)(nil))
	_ = (gofs.FileFlusher)((*fileHandle)(nil))
	_ = (gofs.FileFsyncer)((*fileHandle)(nil))
	_ = (gofs.FileReleaser)((*fileHandle)(nil))
)

// Open implements gofs.NodeOpener. It checks the caller's access with the
// server and, for close-to-open consistency, fetches fresh attributes: if
// the file changed since the kernel cached its data, the cache is dropped.
func (n *node) Open(ctx context.Context, flags uint32) (gofs.FileHandle, uint32, syscall.Errno) {
	ctx, release := killable(ctx)
	defer release()
	f := n.fs
	writing := flags&syscall.O_ACCMODE != syscall.O_RDONLY || flags&syscall.O_TRUNC != 0
	if writing && f.opts.ReadOnly {
		return nil, 0, syscall.EROFS
	}
	if en := f.checkAccess(ctx, n.obj, openMask(flags)); en != 0 {
		return nil, 0, en
	}
	before := n.obj.cachedAttr()
	a, err := f.getattr(ctx, n.obj, !f.opts.NoCTO)
	if err != nil {
		return nil, 0, errno(err)
	}
	h, fuseFlags := f.open(ctx, n.obj, flags, &a)
	if fuseFlags&fuse.FOPEN_KEEP_CACHE == 0 || attrChanged(&before, &a) {
		n.refreshKernelAttr(&a)
	}
	return h, fuseFlags, 0
}

// open makes the handle of an open of obj, whose current attributes are a.
func (f *FS) open(ctx context.Context, obj *object, flags uint32, a *nfs3.Fattr) (*fileHandle, uint32) {
	obj.mu.Lock()
	keep := obj.dataValid && obj.dataAttr.Mtime == a.Mtime && obj.dataAttr.Ctime == a.Ctime && obj.dataAttr.Size == a.Size
	if !keep {
		obj.dataAttr = *a
		obj.dataValid = true
	}
	obj.opens++
	obj.mu.Unlock()

	h := &fileHandle{fs: f, obj: obj, cred: f.cred(ctx), stable: nfs3.Unstable}
	var fuseFlags uint32
	if keep {
		fuseFlags |= fuse.FOPEN_KEEP_CACHE
	}
	switch {
	case flags&syscall.O_DIRECT != 0:
		// As the kernel client, O_DIRECT data is durable when the write
		// returns; in one FILE_SYNC WRITE rather than WRITE and COMMIT.
		fuseFlags |= fuse.FOPEN_DIRECT_IO
		h.stable = nfs3.FileSync
	case flags&syscall.O_SYNC == syscall.O_SYNC || f.opts.Sync:
		h.stable = nfs3.FileSync
	case flags&syscall.O_DSYNC != 0:
		h.stable = nfs3.DataSync
	}
	return h, fuseFlags
}

// readResult hands FUSE the data of a READ reply without copying it; the
// reply is released once FUSE has sent it.
type readResult struct {
	res    nfs3.ReadResult
	slices [1][]byte
}

var readResults = sync.Pool{New: func() any { return new(readResult) }}

func (r *readResult) Bytes(buf []byte) ([]byte, fuse.Status) { return r.res.Data, fuse.OK }
func (r *readResult) Size() int                              { return len(r.res.Data) }

// Slices lets go-fuse write the reply with writev straight from the READ
// reply's buffer.
func (r *readResult) Slices() ([][]byte, fuse.Status) {
	r.slices[0] = r.res.Data
	return r.slices[:], fuse.OK
}
func (r *readResult) Done() {
	r.slices[0] = nil
	r.res.Release()
	readResults.Put(r)
}

// Read implements gofs.FileReader. A read never comes back short below
// the end of the file as this client knows it: FUSE takes a short read for
// the end of the file and shrinks its size to match, which would hide data
// (and make mmap fault) while a write that extended the file is still on
// its way to the server.
func (h *fileHandle) Read(ctx context.Context, dest []byte, off int64) (fuse.ReadResult, syscall.Errno) {
	h.inUse()
	ctx, release := killable(ctx)
	defer release()
	f := h.fs
	if wb := h.obj.writeback(); wb != nil {
		// The server must have what this client wrote before it is read.
		if err := wb.waitSent(ctx, off, off+int64(len(dest))); err != nil {
			return nil, errno(err)
		}
	}
	if len(dest) <= f.opts.RSize {
		rr := readResults.Get().(*readResult)
		if err := f.nfs.Read(ctx, h.cred, &h.obj.fh, uint64(off), uint32(len(dest)), &rr.res); err != nil {
			rr.Done()
			return nil, errno(err)
		}
		f.readDone(h.obj, &rr.res)
		got := len(rr.res.Data)
		if got == len(dest) || rr.res.EOF && h.obj.pendingEnd() <= off+int64(got) {
			return rr, 0
		}
		n := copy(dest, rr.res.Data)
		eof := rr.res.EOF
		rr.Done()
		return h.readInto(ctx, dest, off, n, eof)
	}
	return h.readInto(ctx, dest, off, 0, false)
}

// readInto fills dest[n:] from off+n with as many READs as it takes, as
// the kernel client does with a short READ: one that is not at the end of
// the file is continued where it stopped, and one that returns nothing
// before the end of the file is an I/O error. eof says the server has
// already reported the end of the file at off+n.
func (h *fileHandle) readInto(ctx context.Context, dest []byte, off int64, n int, eof bool) (fuse.ReadResult, syscall.Errno) {
	f := h.fs
	for n < len(dest) && !eof {
		count := min(len(dest)-n, f.opts.RSize)
		var res nfs3.ReadResult
		err := f.nfs.Read(ctx, h.cred, &h.obj.fh, uint64(off)+uint64(n), uint32(count), &res)
		if err != nil {
			res.Release()
			if n > 0 {
				return fuse.ReadResultData(dest[:n]), 0
			}
			return nil, errno(err)
		}
		f.readDone(h.obj, &res)
		got := copy(dest[n:], res.Data)
		eof = res.EOF
		res.Release()
		if got == 0 && !eof {
			f.logf("READ of file %d at %d: the server returned no data and no end of file", h.obj.fileID, off+int64(n))
			return nil, syscall.EIO
		}
		n += got
	}
	// Where the server's file ends, a write of this client still on its
	// way may extend it: up to there the file holds zeros (a hole).
	if end := h.obj.pendingEnd(); eof && off+int64(n) < end {
		hole := dest[n:min(int64(len(dest)), end-off)]
		clear(hole)
		n += len(hole)
	}
	return fuse.ReadResultData(dest[:n]), 0
}

func (f *FS) readDone(obj *object, res *nfs3.ReadResult) {
	if res.HasAttr {
		f.setAttr(obj, &res.Attr)
	}
}

// Write implements gofs.FileWriter.
func (h *fileHandle) Write(ctx context.Context, data []byte, off int64) (uint32, syscall.Errno) {
	h.inUse()
	ctx, release := killable(ctx)
	defer release()
	f := h.fs
	if f.opts.ReadOnly {
		return 0, syscall.EROFS
	}
	h.obj.kernelWrote(off + int64(len(data)))
	wb := f.writebackFor(h.obj)
	if h.stable == nfs3.Unstable {
		if err := wb.write(ctx, h.cred, off, data); err != nil {
			return 0, errno(err)
		}
		return uint32(len(data)), 0
	}
	// A synchronous write goes straight from the FUSE buffer, after any
	// write-behind data it overlaps.
	if err := wb.waitSent(ctx, off, off+int64(len(data))); err != nil {
		return 0, errno(err)
	}
	done := 0
	for done < len(data) {
		chunk := data[done:min(len(data), done+f.opts.WSize)]
		var res nfs3.WriteResult
		if err := f.nfs.Write(ctx, h.cred, &h.obj.fh, uint64(off)+uint64(done), chunk, h.stable, &res); err != nil {
			if done > 0 {
				break
			}
			return 0, errno(err)
		}
		f.writeDone(h.obj, &res.Wcc)
		if res.Count == 0 {
			return uint32(done), syscall.EIO
		}
		if res.Committed == nfs3.Unstable {
			// The server did not keep its promise; make it durable now.
			if _, err := f.nfs.Commit(ctx, h.cred, &h.obj.fh, 0, 0, &nfs3.Wcc{}); err != nil {
				return 0, errno(err)
			}
		}
		done += int(res.Count)
	}
	return uint32(done), 0
}

// Flush implements gofs.FileFlusher: close(2) sends and commits what was
// written, and reports a failure of write-behind.
func (h *fileHandle) Flush(ctx context.Context) syscall.Errno {
	h.markClosed()
	return h.sync(ctx)
}

// Fsync implements gofs.FileFsyncer.
func (h *fileHandle) Fsync(ctx context.Context, flags uint32) syscall.Errno {
	return h.sync(ctx)
}

// sync sends and commits what was written through h's file.
func (h *fileHandle) sync(ctx context.Context) syscall.Errno {
	ctx, release := killable(ctx)
	defer release()
	if wb := h.obj.writeback(); wb != nil {
		return errno(wb.sync(ctx))
	}
	return 0
}

// Release implements gofs.FileReleaser. When the last handle of a file
// that was unlinked while open goes, its hidden name is removed.
func (h *fileHandle) Release(ctx context.Context) syscall.Errno {
	h.inUse() // no longer counted as closing: it is gone
	h.fs.closeObject(ctx, h.obj)
	return 0
}

// Setattr implements gofs.NodeSetattrer: chmod, chown, truncate, utimes.
func (n *node) Setattr(ctx context.Context, fh gofs.FileHandle, in *fuse.SetAttrIn, out *fuse.AttrOut) syscall.Errno {
	ctx, release := killable(ctx)
	defer release()
	f := n.fs
	if f.opts.ReadOnly {
		return syscall.EROFS
	}
	var sa nfs3.Sattr
	if m, ok := in.GetMode(); ok {
		sa.SetMode, sa.Mode = true, m&07777
	}
	if uid, ok := in.GetUID(); ok {
		sa.SetUID, sa.UID = true, uid
	}
	if gid, ok := in.GetGID(); ok {
		sa.SetGID, sa.GID = true, gid
	}
	if size, ok := in.GetSize(); ok {
		if n.obj.typ == nfs3.TypeDir {
			return syscall.EISDIR
		}
		sa.SetSize, sa.Size = true, size
		if _, open := fh.(*fileHandle); !open {
			// truncate(2), or open(2) with O_TRUNC, which FUSE turns
			// into this without the file handle: the caller needs write
			// permission, and the server lets a file's owner truncate
			// it whatever its mode (knfsd's owner override), so the
			// check is the client's, as the kernel client's is.
			// ftruncate(2) comes with the handle of a descriptor the
			// kernel has checked is open for writing.
			if en := f.checkAccess(ctx, n.obj, mayWrite); en != 0 {
				return en
			}
		}
	}
	sa.Atime, sa.AtimeVal = setTime(in.Valid, fuse.FATTR_ATIME, fuse.FATTR_ATIME_NOW, in.Atime, in.Atimensec)
	sa.Mtime, sa.MtimeVal = setTime(in.Valid, fuse.FATTR_MTIME, fuse.FATTR_MTIME_NOW, in.Mtime, in.Mtimensec)

	// Data still on its way would undo a truncate or a new mtime when it
	// lands: make it durable first, as the kernel client does.
	if wb := n.obj.writeback(); wb != nil {
		if err := wb.sync(ctx); err != nil {
			return errno(err)
		}
	}
	cred := f.cred(ctx)
	if h, ok := fh.(*fileHandle); ok && sa.SetSize {
		cred = h.cred // ftruncate on an open file, as the opener
	}
	var wcc nfs3.Wcc
	if err := f.nfs.Setattr(ctx, cred, &n.obj.fh, &sa, nil, &wcc); err != nil {
		return errno(err)
	}
	f.setWcc(n.obj, &wcc)
	a, err := f.getattr(ctx, n.obj, false)
	if err != nil {
		return errno(err)
	}
	f.fillAttr(n.obj, &a, &out.Attr)
	out.SetTimeout(f.attrTimeout(n.obj))
	return 0
}

// setTime converts a FUSE time change into an NFS one.
func setTime(valid, set, now uint32, sec uint64, nsec uint32) (nfs3.SetTime, nfs3.Time) {
	switch {
	case valid&now != 0:
		return nfs3.ServerTime, nfs3.Time{}
	case valid&set != 0:
		return nfs3.ClientTime, clampTime(int64(sec), nsec)
	}
	return nfs3.DontChange, nfs3.Time{}
}

// clampTime converts a time to NFSv3's unsigned 32-bit seconds. A time
// outside that range becomes the nearest one it has, with no fraction, as
// the Linux NFSv3 client's superblock limits make it: never wrapped round.
func clampTime(sec int64, nsec uint32) nfs3.Time {
	switch {
	case sec < 0:
		return nfs3.Time{}
	case sec >= math.MaxUint32:
		return nfs3.Time{Sec: math.MaxUint32}
	}
	return nfs3.Time{Sec: uint32(sec), Nsec: nsec}
}

// Readlink implements gofs.NodeReadlinker.
func (n *node) Readlink(ctx context.Context) ([]byte, syscall.Errno) {
	ctx, release := killable(ctx)
	defer release()
	target, err := n.fs.nfs.Readlink(ctx, n.fs.cred(ctx), &n.obj.fh)
	if err != nil {
		return nil, errno(err)
	}
	return []byte(target), 0
}
