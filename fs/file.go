package fs

import (
	"context"
	"fmt"
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
	writer bool           // opened for writing: its close writes back and reports
	// errsSeen counts the file's write-back failures this descriptor has
	// reported or was opened after (writeback.sync). Only its FUSE
	// requests touch it, under the writeback's mutex.
	errsSeen uint64
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

// open makes the handle of an open of obj, whose current attributes are a.
func (f *FS) open(ctx context.Context, obj *object, flags uint32, a *nfs3.Fattr) (*fileHandle, uint32) {
	writer := flags&syscall.O_ACCMODE != syscall.O_RDONLY
	obj.mu.Lock()
	keep := obj.keepDataLocked(a)
	obj.opens++
	if writer {
		obj.writers++
	}
	obj.mu.Unlock()

	h := &fileHandle{fs: f, obj: obj, cred: f.cred(ctx), stable: nfs3.Unstable, writer: writer}
	if wb := obj.writeback(); wb != nil {
		h.errsSeen = wb.sample()
	}
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

// Readv lets go-fuse's ProtocolServer (the io_uring channel) put the data
// in the reply's buffer, dst: where the transport placed it there already
// (ReadInto), there is nothing to copy.
func (r *readResult) Readv(dst [][]byte) (int, fuse.Status) {
	data := r.res.Data
	if len(data) > 0 && len(dst) > 0 && len(dst[0]) >= len(data) && &dst[0][0] == &data[0] {
		return len(data), fuse.OK
	}
	n := 0
	for _, d := range dst {
		if n == len(data) {
			break
		}
		n += copy(d, data[n:])
	}
	return n, fuse.OK
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
//
// That end is the furthest of this client's writes the server may not
// have had when it answered: those pending when the READ went out, and
// those pending when its reply is looked at. A write pending at the start
// may have landed and gone from the client by the time the reply, sent
// before it landed, is looked at (the kernel's readahead races the
// write-back of the data that extended the file).
func (h *fileHandle) Read(ctx context.Context, dest []byte, off int64) (fuse.ReadResult, syscall.Errno) {
	h.inUse()
	ctx, release := h.fs.kills.killable(ctx)
	defer release()
	f := h.fs
	var pendingEnd int64
	if wb := h.obj.writeback(); wb != nil {
		// The server must have what this client wrote before it is read.
		if err := wb.waitSent(ctx, off, off+int64(len(dest))); err != nil {
			return nil, errno(err)
		}
		pendingEnd = wb.end()
	}
	if len(dest) <= f.opts.RSize {
		rr := readResults.Get().(*readResult)
		since := f.attrGen.Load()
		// Through io_uring, dest is the ring entry's buffer, where
		// the RDMA transport has the server write the data.
		if err := f.nfs.ReadInto(ctx, h.cred, &h.obj.fh, uint64(off), dest, &rr.res); err != nil {
			rr.Done()
			return nil, h.readFailed(off, len(dest), err)
		}
		f.readDone(h.obj, &rr.res, since)
		got := len(rr.res.Data)
		if got == len(dest) {
			return rr, 0
		}
		if rr.res.EOF && max(pendingEnd, h.obj.pendingEnd()) <= off+int64(got) {
			h.obj.kernelReadShort(off + int64(got))
			return rr, 0
		}
		n := copy(dest, rr.res.Data)
		eof := rr.res.EOF
		rr.Done()
		return h.readInto(ctx, dest, off, n, eof, pendingEnd)
	}
	return h.readInto(ctx, dest, off, 0, false, pendingEnd)
}

// readInto fills dest[n:] from off+n with as many READs as it takes, as
// the kernel client does with a short READ: one that is not at the end of
// the file is continued where it stopped, and one that returns nothing
// before the end of the file is an I/O error. eof says the server has
// already reported the end of the file at off+n; pendingEnd is the end of
// this client's writes pending when the first READ went out (see Read).
func (h *fileHandle) readInto(ctx context.Context, dest []byte, off int64, n int, eof bool, pendingEnd int64) (fuse.ReadResult, syscall.Errno) {
	f := h.fs
	for n < len(dest) && !eof {
		count := min(len(dest)-n, f.opts.RSize)
		var res nfs3.ReadResult
		since := f.attrGen.Load()
		err := f.nfs.Read(ctx, h.cred, &h.obj.fh, uint64(off)+uint64(n), uint32(count), &res)
		if err != nil {
			res.Release()
			if n > 0 {
				return fuse.ReadResultData(dest[:n]), 0
			}
			return nil, h.readFailed(off+int64(n), count, err)
		}
		f.readDone(h.obj, &res, since)
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
	if end := max(pendingEnd, h.obj.pendingEnd()); eof && off+int64(n) < end {
		hole := dest[n:min(int64(len(dest)), end-off)]
		clear(hole)
		n += len(hole)
	}
	if n < len(dest) {
		h.obj.kernelReadShort(off + int64(n))
	}
	return fuse.ReadResultData(dest[:n]), 0
}

// readFailed returns the errno of a READ of count bytes at off that
// failed with err, and logs it (at most once a second, with how many it
// held back) unless its caller was interrupted: a program may take any
// errno for an I/O error and say no more (SQLite's "disk I/O error"),
// and the log says what the server or the transport answered.
func (h *fileHandle) readFailed(off int64, count int, err error) syscall.Errno {
	en := errno(err)
	if en == syscall.EINTR {
		return en
	}
	if ok, held := h.fs.readFailures.allow(); ok {
		more := ""
		if held > 0 {
			more = fmt.Sprintf(" (and %d more READs failed since the last logged)", held)
		}
		h.fs.logf("READ of %d bytes at %d of file %d failed with %v: %v%s", count, off, h.obj.fileID, en, err, more)
	}
	return en
}

func (f *FS) readDone(obj *object, res *nfs3.ReadResult, since uint64) {
	if res.HasAttr {
		f.setAttrSince(obj, &res.Attr, since)
	}
}

// Write implements gofs.FileWriter.
func (h *fileHandle) Write(ctx context.Context, data []byte, off int64) (uint32, syscall.Errno) {
	h.inUse()
	ctx, release := h.fs.kills.killable(ctx)
	defer release()
	f := h.fs
	if f.opts.ReadOnly {
		return 0, syscall.EROFS
	}
	h.obj.kernelWrote(off + int64(len(data)))
	wb := f.writebackFor(h.obj)
	if h.stable == nfs3.Unstable {
		if err := wb.write(ctx, h.cred, &h.errsSeen, off, data); err != nil {
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
		since := f.attrGen.Load()
		if err := f.nfs.Write(ctx, h.cred, &h.obj.fh, uint64(off)+uint64(done), chunk, h.stable, &res); err != nil {
			if done > 0 {
				break
			}
			return 0, errno(err)
		}
		f.writeDone(h.obj, &res.Wcc, since)
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

// Flush implements gofs.FileFlusher: close(2) of a descriptor open for
// writing sends and commits what was written to the file, and reports a
// failure of write-behind that no fsync has reported, or that happened
// meanwhile (writeback.close). As the kernel client's, the close of a
// read-only descriptor does neither.
func (h *fileHandle) Flush(ctx context.Context) syscall.Errno {
	h.markClosed()
	wb := h.obj.writeback()
	if !h.writer || wb == nil {
		return 0
	}
	ctx, release := h.fs.kills.killable(ctx)
	defer release()
	return errno(wb.close(ctx))
}

// Fsync implements gofs.FileFsyncer: it sends and commits what was written
// to the file, and reports a failure of write-behind this descriptor has
// not seen (writeback.sync).
func (h *fileHandle) Fsync(ctx context.Context, flags uint32) syscall.Errno {
	ctx, release := h.fs.kills.killable(ctx)
	defer release()
	if wb := h.obj.writeback(); wb != nil {
		return errno(wb.sync(ctx, &h.errsSeen))
	}
	return 0
}

// Release implements gofs.FileReleaser. When the last handle of a file
// that was unlinked while open goes, its hidden name is removed.
func (h *fileHandle) Release(ctx context.Context) syscall.Errno {
	h.fs.closeObject(h)
	return 0
}
