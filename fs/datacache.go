package fs

// The kernel's cached data of a file. FUSE keeps a file's pages between
// opens when the open answers FOPEN_KEEP_CACHE; rdmafs decides that as the
// kernel NFS client decides whether to drop its page cache:
//   - at open, the data is kept if the file's mtime, ctime and size are
//     those the data was valid for (close-to-open);
//   - a change this client made, whose reply shows the file as it was
//     just before (weak cache consistency), leaves the data valid;
//   - a change seen while the file is open for writing is taken for this
//     client's own write-behind racing the attributes (the kernel's "could
//     it be a race with writeback?"): the data stays, and is dropped at the
//     next open that finds the file open nowhere else.

import "github.com/rdmafs/rdmafs/nfs3"

// dataOf returns the attributes of a that say whether its data changed.
func dataOf(a *nfs3.Fattr) nfs3.WccAttr {
	return nfs3.WccAttr{Size: a.Size, Mtime: a.Mtime, Ctime: a.Ctime}
}

// keepDataLocked reports, at an open that found the file's attributes a,
// whether the kernel's cached data stays valid, and makes it valid for a
// from now on. obj.mu is held.
func (obj *object) keepDataLocked(a *nfs3.Fattr) bool {
	keep := obj.dataValid && dataOf(&obj.dataAttr) == dataOf(a)
	if obj.dataStale && obj.opens == 0 {
		keep = false
	}
	if !keep {
		obj.dataAttr = *a
		obj.dataValid = true
		obj.dataStale = false
	}
	return keep
}

// ownChange records a change this client made to obj, whose reply gave
// its attributes before and after: if before is what the cached data was
// valid for, the data is valid for after.
func (obj *object) ownChange(w *nfs3.Wcc) {
	obj.mu.Lock()
	if obj.dataValid && w.HasBefore && w.HasAfter && w.Before == dataOf(&obj.dataAttr) {
		obj.dataAttr = w.After
	}
	obj.mu.Unlock()
}

// sawAttrLocked records fresh attributes a of obj: a change of its data
// while it is open for writing leaves the cached data valid until the next
// open that finds it open nowhere else. obj.mu is held.
func (obj *object) sawAttrLocked(a *nfs3.Fattr) {
	if obj.writers > 0 && obj.dataValid && dataOf(&obj.dataAttr) != dataOf(a) {
		obj.dataAttr = *a
		obj.dataStale = true
	}
}
