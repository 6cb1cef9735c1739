package fs

import (
	"context"
	"errors"
	"sync"
	"syscall"

	"github.com/rdmafs/rdmafs/nfs3"
	"github.com/rdmafs/rdmafs/sunrpc"
)

// Write-behind. A write(2) copies the data into an extent of the file's
// writeback and returns; the extent goes to the server as an UNSTABLE WRITE
// when it is full (wsize bytes, aligned to wsize) or when something needs
// the data there (close, fsync, a read of the range, a setattr). The
// server's answer keeps the extent until a COMMIT returns the same write
// verifier as the WRITE did; a different verifier means the server
// restarted and may have lost the data, so the extent is sent again. Data
// the server wrote FILE_SYNC is dropped at once.
//
// Extents are sent in the order they were written, and one that overlaps
// an earlier extent still on its way waits for it, so the server sees
// overlapping writes in the program's order.

type extentState int

const (
	extDirty    extentState = iota // not sent yet
	extSending                     // WRITE in flight
	extUnstable                    // written UNSTABLE, not committed
)

type extent struct {
	off    int64
	mem    *sunrpc.Buffer // data is mem.B[:n]
	n      int
	room   int // the extent's size when full: up to the next wsize boundary
	state  extentState
	queued bool // a dirty extent that may be sent
	stable nfs3.StableHow
	verf   nfs3.Verf
	cred   *sunrpc.Cred
}

func (e *extent) end() int64 { return e.off + int64(e.n) }

func (e *extent) data() []byte { return e.mem.B[:e.n] }

// An extent starts with a buffer for the first write, at least
// minExtentBuffer, and doubles it as sequential writes fill it, so small
// files hold little memory and large ones copy little.
const minExtentBuffer = 64 << 10

func getBuffer(n int) *sunrpc.Buffer {
	b := sunrpc.GetBuffer(n)
	b.B = b.B[:cap(b.B)]
	return b
}

// extentBuffer returns the buffer of a new extent of room bytes whose first
// write has first bytes. A transport that places payloads directly gives
// one of its buffers, of the whole room, so the data is copied only from
// the FUSE request into memory the transport can send from.
func (f *FS) extentBuffer(room, first int) *sunrpc.Buffer {
	if f.opts.Payloads != nil {
		if b := f.opts.Payloads.PayloadBuffer(room); b != nil {
			return b
		}
	}
	return getBuffer(min(room, max(first, minExtentBuffer)))
}

// grow makes room for need bytes.
func (e *extent) grow(need int) {
	bigger := getBuffer(min(e.room, max(need, 2*len(e.mem.B))))
	copy(bigger.B, e.mem.B[:e.n])
	e.mem.Release()
	e.mem = bigger
}

func (e *extent) overlaps(off, end int64) bool { return e.off < end && off < e.end() }

// sendsPerFile bounds the WRITEs of one file in flight; the FS bounds all.
const sendsPerFile = 16

type writeback struct {
	f   *FS
	obj *object

	mu       sync.Mutex
	cond     *sync.Cond
	extents  []*extent // in the order written
	filling  *extent   // the extent taking sequential writes, not queued
	sending  int
	held     int64 // bytes in extents
	unstable int64 // bytes in unstable extents
	commits  int   // background commits running

	// The failures of background WRITEs, reported as Linux reports a
	// write-back error (errseq_t, which the kernel client's fsync and
	// close report from): fsync reports one to every descriptor open
	// when it happened, and to one opened after it while no fsync has
	// reported it, once each; a close reports one no fsync has reported,
	// or one that happened during the close. Each descriptor counts the
	// failures it has seen (fileHandle.errsSeen).
	err      error  // the latest failure
	errs     uint64 // failures so far
	reported bool   // an fsync reported err (errseq's "seen")

	// syncing holds a token while a sync runs: one at a time. It is a
	// channel, not a mutex, so that a caller being killed stops waiting
	// for another's sync (a close behind a close that waits for a dead
	// server).
	syncing chan struct{}
}

// writeback returns obj's writeback, nil if nothing was ever written.
func (obj *object) writeback() *writeback {
	obj.mu.Lock()
	defer obj.mu.Unlock()
	return obj.wb
}

// writebackFor returns obj's writeback, creating it.
func (f *FS) writebackFor(obj *object) *writeback {
	obj.mu.Lock()
	defer obj.mu.Unlock()
	if obj.wb == nil {
		obj.wb = &writeback{f: f, obj: obj, syncing: make(chan struct{}, 1)}
		obj.wb.cond = sync.NewCond(&obj.wb.mu)
	}
	return obj.wb
}

// end returns the end of the data this client wrote and the server has
// not committed yet, 0 if none. The file is at least that long, whatever
// the server says meanwhile.
func (wb *writeback) end() int64 {
	wb.mu.Lock()
	defer wb.mu.Unlock()
	var end int64
	for _, e := range wb.extents {
		end = max(end, e.end())
	}
	return end
}

// pendingEnd returns the end of the data this client wrote and the server
// has not committed, 0 if none.
func (obj *object) pendingEnd() int64 {
	if wb := obj.writeback(); wb != nil {
		return wb.end()
	}
	return 0
}

// unsentWrites reports whether obj has written data the server has not
// taken yet.
func (obj *object) unsentWrites() bool {
	wb := obj.writeback()
	if wb == nil {
		return false
	}
	wb.mu.Lock()
	defer wb.mu.Unlock()
	for _, e := range wb.extents {
		if e.state != extUnstable {
			return true
		}
	}
	return false
}

// write takes data written at off, for cred, through a descriptor that
// has seen *seen write-back failures.
func (wb *writeback) write(ctx context.Context, cred *sunrpc.Cred, seen *uint64, off int64, data []byte) error {
	wsize := int64(wb.f.opts.WSize)
	wb.mu.Lock()
	if wb.errs != *seen && outOfSpace(wb.err) {
		// Like the kernel client, a write reports a failed write-back
		// only when the server is out of space; any other failure waits
		// for fsync or close, and the data is taken.
		err := wb.unseenLocked(seen)
		wb.mu.Unlock()
		return err
	}
	var added int64
	for len(data) > 0 {
		e := wb.filling
		if e == nil || off < e.off || off > e.end() || off >= e.off+int64(e.room) {
			// Not a rewrite or an extension of the extent being filled.
			if e != nil {
				wb.queue(e)
			}
			room := int((off/wsize+1)*wsize - off)
			e = &extent{off: off, room: room, cred: cred, mem: wb.f.extentBuffer(room, len(data))}
			wb.extents = append(wb.extents, e)
			wb.filling = e
		}
		k := int(min(int64(len(data)), e.off+int64(e.room)-off))
		need := int(off-e.off) + k
		if need > len(e.mem.B) {
			e.grow(need)
		}
		copy(e.mem.B[off-e.off:], data[:k])
		if need > e.n {
			added += int64(need - e.n)
			e.n = need
		}
		off += int64(k)
		data = data[k:]
		if e.n == e.room {
			wb.queue(e)
		}
	}
	wb.held += added
	wb.pump()
	wb.mu.Unlock()
	wb.f.dirty.hold(wb, added)
	return wb.f.dirty.waitForRoom(ctx)
}

// outOfSpace reports whether err says the server has no room for the data.
func outOfSpace(err error) bool {
	switch errno(err) {
	case syscall.ENOSPC, syscall.EDQUOT, syscall.EFBIG:
		return true
	}
	return false
}

// queue marks e ready to send. The caller holds wb.mu.
func (wb *writeback) queue(e *extent) {
	e.queued = true
	if wb.filling == e {
		wb.filling = nil
	}
}

// pump starts the WRITEs of queued extents that may go now. The caller
// holds wb.mu.
func (wb *writeback) pump() {
	for i, e := range wb.extents {
		if wb.sending >= sendsPerFile {
			return
		}
		if e.state != extDirty || !e.queued || wb.blocked(i) {
			continue
		}
		e.state = extSending
		wb.sending++
		go wb.send(e)
	}
}

// blocked reports whether an earlier extent that overlaps extent i has not
// reached the server yet.
func (wb *writeback) blocked(i int) bool {
	e := wb.extents[i]
	for _, prev := range wb.extents[:i] {
		if prev.state != extUnstable && prev.overlaps(e.off, e.end()) {
			return true
		}
	}
	return false
}

// send writes e to the server, in several WRITEs if the server writes
// less than asked.
func (wb *writeback) send(e *extent) {
	f := wb.f
	f.writeSlots <- struct{}{}
	committed := nfs3.FileSync
	var verf nfs3.Verf
	var err error
	for done := 0; done < e.n && err == nil; {
		var res nfs3.WriteResult
		since := f.attrGen.Load()
		err = f.nfs.Write(context.Background(), e.cred, &wb.obj.fh, uint64(e.off)+uint64(done), e.data()[done:], e.stable, &res)
		if err != nil {
			break
		}
		if res.Count == 0 {
			err = errors.New("server wrote nothing")
			break
		}
		f.writeDone(wb.obj, &res.Wcc, since)
		if done > 0 && res.Verf != verf {
			// The server restarted between the parts: make COMMIT see a
			// verifier that cannot match, so the whole extent goes again.
			committed, res.Verf = nfs3.Unstable, nfs3.Verf{}
		}
		verf = res.Verf
		committed = min(committed, res.Committed)
		done += int(res.Count)
	}
	<-f.writeSlots

	wb.mu.Lock()
	wb.sending--
	switch {
	case err != nil:
		f.logf("write-behind of %d bytes at %d to file %d failed: %v", e.n, e.off, wb.obj.fileID, err)
		wb.err, wb.reported = err, false
		wb.errs++
		wb.remove(e)
	case committed != nfs3.Unstable:
		wb.remove(e)
	default:
		e.state = extUnstable
		e.verf = verf
		wb.unstable += int64(e.n)
	}
	wb.pump()
	wb.cond.Broadcast()
	wb.mu.Unlock()
	wb.maybeCommit()
}

// maybeCommit starts a background COMMIT when the file holds much
// unstable data or write-behind as a whole is over its limit.
func (wb *writeback) maybeCommit() {
	wb.mu.Lock()
	unstable := wb.unstable
	wb.mu.Unlock()
	if unstable > 0 && (unstable > wb.f.dirty.commitThreshold() || wb.f.dirty.over()) {
		wb.commitInBackground()
	}
}

// remove drops e and gives its memory back. The caller holds wb.mu.
func (wb *writeback) remove(e *extent) {
	for i, x := range wb.extents {
		if x == e {
			wb.extents = append(wb.extents[:i], wb.extents[i+1:]...)
			break
		}
	}
	if e.state == extUnstable {
		wb.unstable -= int64(e.n)
	}
	wb.held -= int64(e.n)
	e.mem.Release()
	e.mem = nil
	wb.f.dirty.hold(wb, -int64(e.n))
}

// waitSent queues every extent that overlaps [off, end) and waits until
// none of them is dirty or in flight.
func (wb *writeback) waitSent(ctx context.Context, off, end int64) error {
	wb.mu.Lock()
	idle := true
	for _, e := range wb.extents {
		idle = idle && (e.state == extUnstable || !e.overlaps(off, end))
	}
	wb.mu.Unlock()
	if idle {
		return nil // the common case: nothing to wait for, nothing to set up
	}
	stop := context.AfterFunc(ctx, func() {
		wb.mu.Lock()
		wb.cond.Broadcast()
		wb.mu.Unlock()
	})
	defer stop()
	wb.mu.Lock()
	defer wb.mu.Unlock()
	for {
		busy := false
		for _, e := range wb.extents {
			if e.state != extUnstable && e.overlaps(off, end) {
				busy = true
				if e.state == extDirty {
					wb.queue(e)
				}
			}
		}
		if !busy {
			return nil
		}
		wb.pump()
		if err := ctx.Err(); err != nil {
			return err
		}
		wb.cond.Wait()
	}
}

// sample returns the count of write-back failures a descriptor opened now
// starts from: all so far, unless the latest was never reported, which the
// new descriptor then reports (as Linux's errseq_sample).
func (wb *writeback) sample() uint64 {
	wb.mu.Lock()
	defer wb.mu.Unlock()
	if wb.errs > 0 && !wb.reported {
		return wb.errs - 1
	}
	return wb.errs
}

// unseenLocked returns the latest write-back failure if a descriptor that
// has seen *seen failures has not seen it, moves *seen past it and marks
// it reported. The caller holds wb.mu.
func (wb *writeback) unseenLocked(seen *uint64) error {
	if *seen == wb.errs {
		return nil
	}
	*seen = wb.errs
	wb.reported = true
	return wb.err
}

// unreported returns the latest write-back failure if no fsync has
// reported it.
func (wb *writeback) unreported() error {
	wb.mu.Lock()
	defer wb.mu.Unlock()
	if wb.errs > 0 && !wb.reported {
		return wb.err
	}
	return nil
}

// sync sends everything and commits it, for fsync(2) through a
// descriptor that has seen *seen write-back failures: the data is durable
// on the server when it returns nil. It returns a failure of a background
// WRITE the descriptor has not seen.
func (wb *writeback) sync(ctx context.Context, seen *uint64) error {
	if err := wb.flush(ctx); err != nil {
		return err
	}
	wb.mu.Lock()
	defer wb.mu.Unlock()
	return wb.unseenLocked(seen)
}

// close sends everything and commits it, for close(2) of a descriptor
// open for writing, and returns a failure of a background WRITE that no
// fsync has reported or that happened meanwhile. It marks nothing
// reported: as the kernel client's close (nfs_file_flush), it leaves the
// failure for the fsync of every descriptor.
func (wb *writeback) close(ctx context.Context) error {
	since := wb.sample()
	if err := wb.flush(ctx); err != nil {
		return err
	}
	wb.mu.Lock()
	defer wb.mu.Unlock()
	if wb.errs != since {
		return wb.err
	}
	return nil
}

// settle sends everything and commits it, as sync does, for an operation
// that must not run while data is on its way (a SETATTR: a WRITE landing
// after it would undo a truncate or a new mtime). Whether the data made it
// is for the descriptors to learn, at their next fsync or close: settle
// fails only if ctx ends, leaving a failed COMMIT's data uncommitted. The
// kernel client's SETATTR likewise ignores what writing back the file's
// data returned, so a chown by root succeeds while another user's
// write-back is refused.
func (wb *writeback) settle(ctx context.Context) error {
	if err := wb.flush(ctx); err != nil && ctx.Err() != nil {
		return err
	}
	return nil
}

// flush sends everything and commits it. Its error is a COMMIT's, or
// ctx's; a WRITE's failure is recorded for the descriptors (sync).
func (wb *writeback) flush(ctx context.Context) error {
	select {
	case wb.syncing <- struct{}{}:
	case <-ctx.Done():
		return ctx.Err()
	}
	defer func() { <-wb.syncing }()
	wb.mu.Lock()
	if len(wb.extents) == 1 && wb.extents[0].state == extDirty {
		// All there is to make durable fits in one WRITE: make it
		// FILE_SYNC and save the COMMIT, as the kernel client does.
		wb.extents[0].stable = nfs3.FileSync
	}
	wb.mu.Unlock()
	for {
		if err := wb.waitSent(ctx, 0, 1<<63-1); err != nil {
			return err
		}
		again, err := wb.commit(ctx)
		if err != nil || !again {
			return err
		}
	}
}

// commit sends COMMIT for the extents the server holds unstable and drops
// those written under the verifier it returns. Those written under another
// verifier are queued again and again is true.
func (wb *writeback) commit(ctx context.Context) (again bool, err error) {
	wb.mu.Lock()
	var pending []*extent
	for _, e := range wb.extents {
		if e.state == extUnstable {
			pending = append(pending, e)
		}
	}
	wb.mu.Unlock()
	if len(pending) == 0 {
		return false, nil
	}
	var wcc nfs3.Wcc
	verf, err := wb.f.nfs.Commit(ctx, pending[0].cred, &wb.obj.fh, 0, 0, &wcc)
	if err != nil {
		return false, err
	}
	wb.f.setWcc(wb.obj, &wcc)
	wb.mu.Lock()
	defer wb.mu.Unlock()
	for _, e := range pending {
		if e.mem == nil || e.state != extUnstable {
			continue // dropped or already being sent again
		}
		if e.verf == verf {
			wb.remove(e)
			continue
		}
		e.state = extDirty
		wb.unstable -= int64(e.n)
		wb.queue(e)
		again = true
	}
	if again {
		wb.f.logf("file %d: the server's write verifier changed; sending uncommitted data again", wb.obj.fileID)
		wb.pump()
	}
	return again, nil
}

// commitInBackground commits what the server holds unstable, to free
// memory while a large file is being written.
func (wb *writeback) commitInBackground() {
	wb.mu.Lock()
	if wb.commits > 0 {
		wb.mu.Unlock()
		return
	}
	wb.commits++
	wb.mu.Unlock()
	go func() {
		if _, err := wb.commit(context.Background()); err != nil {
			wb.f.logf("file %d: background COMMIT: %v", wb.obj.fileID, err)
		}
		wb.mu.Lock()
		wb.commits--
		wb.mu.Unlock()
		// Data sent again after a changed verifier, or sent while this
		// COMMIT was out, may need the next one.
		wb.maybeCommit()
	}()
}

// writeDone records the attributes a WRITE, sent when FS.attrGen was
// since, returned (see setAttrSince). When the file was what the kernel's
// cached data was valid for just before, the change is this client's own,
// and the cached data stays valid.
func (f *FS) writeDone(obj *object, w *nfs3.Wcc, since uint64) {
	if !w.HasAfter {
		f.invalidate(obj)
		return
	}
	obj.ownChange(w)
	f.setAttrSince(obj, &w.After, since)
}
