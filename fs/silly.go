package fs

// Silly rename. NFS has no open-but-unlinked files: a file unlinked (or
// renamed over) while open is renamed to a hidden name instead, and the
// hidden name is removed at its last close, as the kernel client does:
// with the credentials of whoever unlinked it, so the REMOVE may fail (the
// unlinker has since lost write or search permission on the directory),
// and the hidden name then stays, as it does with the kernel client.

import (
	"context"
	"fmt"
	"time"

	"github.com/rdmafs/rdmafs/nfs3"
	"github.com/rdmafs/rdmafs/sunrpc"
)

// silly is the hidden name of a file unlinked while open.
type silly struct {
	dir  *object
	name string
	cred *sunrpc.Cred // of the unlink, which the REMOVE at the last close uses
}

// hideIfOpen renames name in dir to a hidden name if obj is open, and
// reports whether it did.
func (f *FS) hideIfOpen(ctx context.Context, dir *object, name string, obj *object) (bool, error) {
	f.awaitRelease(ctx, obj)
	obj.mu.Lock()
	open := obj.opens > 0 && obj.silly == nil
	obj.mu.Unlock()
	if !open {
		return false, nil
	}
	hidden := &silly{dir: dir, name: fmt.Sprintf(".nfs%016x%08x", obj.fileID, f.sillyCount.Add(1)), cred: f.cred(ctx)}
	var fromWcc, toWcc nfs3.Wcc
	if err := f.nfs.Rename(ctx, hidden.cred, &dir.fh, name, &dir.fh, hidden.name, &fromWcc, &toWcc); err != nil {
		return false, err
	}
	f.setWcc(dir, &toWcc)
	f.invalidate(obj) // the rename changed its ctime
	obj.mu.Lock()
	closed := obj.opens == 0
	if !closed {
		obj.silly = hidden
	}
	obj.mu.Unlock()
	if closed {
		// The last close came during the RENAME (FUSE sends RELEASE
		// after close(2) has returned, so an unlink right after a
		// close often finds the file still open): closeObject saw no
		// hidden name, so the hidden file is removed here.
		f.removeHidden(hidden)
	}
	return true, nil
}

// releaseWait is how long an unlink waits for the RELEASE of a file whose
// every handle its program has closed.
const releaseWait = 500 * time.Millisecond

// awaitRelease waits a little for obj's handles to be released when the
// programs closed them all already. FUSE sends RELEASE after close(2) has
// returned; without the wait, an unlink right after a close would find the
// file open and rename it to a hidden name, which keeps the file's link
// count up until the release comes (the kernel client, whose close is
// synchronous, removes it at once). A handle still in use, or shared by
// another descriptor (dup, fork), is not waited for beyond releaseWait.
func (f *FS) awaitRelease(ctx context.Context, obj *object) {
	obj.mu.Lock()
	if obj.opens == 0 || obj.closed < obj.opens || obj.silly != nil {
		obj.mu.Unlock()
		return
	}
	if obj.lastClose == nil {
		obj.lastClose = make(chan struct{})
	}
	released := obj.lastClose
	obj.mu.Unlock()
	timer := time.NewTimer(releaseWait)
	defer timer.Stop()
	select {
	case <-released:
	case <-timer.C:
	case <-ctx.Done():
	}
}

// closeObject counts the release of h and removes its object's hidden name
// after the last. The handle stops counting as closing and as open in one
// step: an unlink between the two would find the file open and not
// closing, so it would not wait for this release (awaitRelease).
func (f *FS) closeObject(h *fileHandle) {
	obj := h.obj
	obj.mu.Lock()
	if h.closed.Swap(false) {
		obj.closed--
	}
	obj.opens--
	if h.writer {
		obj.writers--
	}
	var s *silly
	if obj.opens == 0 {
		s, obj.silly = obj.silly, nil
		if obj.lastClose != nil {
			close(obj.lastClose)
			obj.lastClose = nil
		}
	}
	obj.mu.Unlock()
	if s != nil {
		f.removeHidden(s)
	}
}

// removeHidden removes the hidden name of an unlinked file that is no
// longer open, as whoever unlinked it. It runs to completion even if the
// closing program is interrupted.
func (f *FS) removeHidden(s *silly) {
	var wcc nfs3.Wcc
	if err := f.nfs.Remove(context.Background(), s.cred, &s.dir.fh, s.name, &wcc); err != nil {
		f.logf("removing %s of an unlinked file: %v", s.name, err)
	}
	f.setWcc(s.dir, &wcc)
}
