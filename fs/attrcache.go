package fs

// The attribute cache. As in the Linux client, a file's attributes are
// cached between acregmin and acregmax (acdirmin and acdirmax for
// directories), the time growing while they come back unchanged; the
// attributes of every reply refresh them, and an operation that changes a
// file without saying how makes the next look ask the server.

import (
	"context"
	"math"
	"time"

	"github.com/hanwen/go-fuse/v2/fuse"
	"golang.org/x/sys/unix"

	"github.com/rdmafs/rdmafs/nfs3"
)

// acBounds returns the attribute cache bounds for a file of type t.
func (f *FS) acBounds(t nfs3.FileType) (lo, hi time.Duration) {
	if t == nfs3.TypeDir {
		return f.opts.ACDirMin, f.opts.ACDirMax
	}
	return f.opts.ACRegMin, f.opts.ACRegMax
}

// setAttr records fresh attributes of obj. As in the Linux client, the
// time they stay fresh doubles while they come back unchanged, from the
// minimum to the maximum of the attribute cache, and falls back to the
// minimum when they change.
func (f *FS) setAttr(obj *object, a *nfs3.Fattr) {
	f.setAttrSince(obj, a, math.MaxUint64)
}

// setAttrSince records the attributes of a READ or WRITE reply to a call
// made when FS.attrGen was since, unless obj's attributes were set after
// the call began and these are not newer (by ctime): a reply on its way
// while a truncate completes carries the file as it was before the
// truncate. The kernel client orders attribute updates so too (its
// attribute generation counter, and the ctime). setAttr always applies.
func (f *FS) setAttrSince(obj *object, a *nfs3.Fattr, since uint64) {
	f.applyAttr(obj, a, since, nil)
}

// applyAttr is setAttrSince for the attributes a after a change this
// client made, whose attributes before it were before (nil if unknown).
func (f *FS) applyAttr(obj *object, a *nfs3.Fattr, since uint64, before *nfs3.WccAttr) {
	lo, hi := f.acBounds(obj.typ)
	gen := f.attrGen.Add(1)
	obj.mu.Lock()
	defer obj.mu.Unlock()
	if obj.attrGen > since && !newer(a.Ctime, obj.attr.Ctime) {
		return
	}
	obj.attrGen = gen
	// A change whose ctime before is the cached one is this client's
	// own, and did not touch what the ctime would tell of otherwise.
	own := before != nil && before.Ctime == obj.attr.Ctime
	if obj.attrExpires.IsZero() || a.Mode != obj.attr.Mode || a.UID != obj.attr.UID || a.GID != obj.attr.GID || (a.Ctime != obj.attr.Ctime && !own) {
		// Who may do what follows from these; a server that keeps
		// ACLs changes the ctime when it changes one.
		obj.access.clear()
		obj.acls.clear()
	}
	if obj.attrExpires.IsZero() || a.Mtime != obj.attr.Mtime || a.Ctime != obj.attr.Ctime || a.Size != obj.attr.Size {
		obj.attrTimeo = lo
	} else {
		obj.attrTimeo = min(max(2*obj.attrTimeo, lo), hi)
	}
	obj.attr = *a
	obj.attrExpires = time.Now().Add(obj.attrTimeo)
	obj.sawAttrLocked(a)
}

// setWcc records what an operation says of obj's attributes afterwards;
// without them, the cached ones are stale. When its attributes before are
// the cached ones, the change is this client's own, as the kernel client
// takes it (nfs_wcc_update_inode): obj keeps its cached permissions and
// ACLs, which every create in a directory would otherwise drop (the
// directory's ctime moves), so that the next create asked GETACL again.
func (f *FS) setWcc(obj *object, w *nfs3.Wcc) {
	if !w.HasAfter {
		f.invalidate(obj)
		return
	}
	var before *nfs3.WccAttr
	if w.HasBefore {
		before = &w.Before
	}
	f.applyAttr(obj, &w.After, math.MaxUint64, before)
}

// invalidate makes the next getattr of obj ask the server.
func (f *FS) invalidate(obj *object) {
	obj.mu.Lock()
	obj.attrExpires = time.Now()
	obj.access.clear()
	obj.acls.clear()
	obj.mu.Unlock()
}

// cachedAttr returns obj's cached attributes, fresh or not.
func (obj *object) cachedAttr() nfs3.Fattr {
	obj.mu.Lock()
	defer obj.mu.Unlock()
	return obj.attr
}

// attrChanged reports whether the attributes a program sees differ
// between a and b.
func attrChanged(a, b *nfs3.Fattr) bool {
	return a.Size != b.Size || a.Mtime != b.Mtime || a.Ctime != b.Ctime ||
		a.Mode != b.Mode || a.UID != b.UID || a.GID != b.GID || a.Nlink != b.Nlink
}

// getattr returns obj's attributes, from the cache while they are fresh
// unless force.
func (f *FS) getattr(ctx context.Context, obj *object, force bool) (nfs3.Fattr, error) {
	obj.mu.Lock()
	if !force && time.Now().Before(obj.attrExpires) {
		a := obj.attr
		obj.mu.Unlock()
		return a, nil
	}
	obj.mu.Unlock()
	var a nfs3.Fattr
	if err := f.nfs.Getattr(ctx, f.cred(ctx), &obj.fh, &a); err != nil {
		return a, err
	}
	f.setAttr(obj, &a)
	return a, nil
}

// fillAttr converts attributes for FUSE. The size counts data written but
// not yet sent, as the kernel client's does.
func (f *FS) fillAttr(obj *object, a *nfs3.Fattr, out *fuse.Attr) {
	out.Ino = a.FileID
	out.Size = a.Size
	out.Size = max(out.Size, uint64(obj.pendingEnd()))
	obj.toldKernel(int64(out.Size))
	out.Blocks = (a.Used + 511) / 512
	out.Atime, out.Atimensec = uint64(a.Atime.Sec), a.Atime.Nsec
	out.Mtime, out.Mtimensec = uint64(a.Mtime.Sec), a.Mtime.Nsec
	out.Ctime, out.Ctimensec = uint64(a.Ctime.Sec), a.Ctime.Nsec
	out.Mode = a.Type.Mode() | a.Mode&07777
	out.Nlink = a.Nlink
	out.Uid, out.Gid = a.UID, a.GID
	out.Rdev = uint32(unix.Mkdev(a.Rdev[0], a.Rdev[1]))
	out.Blksize = uint32(f.opts.WSize)
}

// attrTimeout is how long the kernel may keep obj's attributes.
func (f *FS) attrTimeout(obj *object) time.Duration {
	obj.mu.Lock()
	defer obj.mu.Unlock()
	return max(time.Until(obj.attrExpires), 0)
}

// fillEntry fills a lookup reply for child, found in directory dir.
func (f *FS) fillEntry(dir, child *object, a *nfs3.Fattr, out *fuse.EntryOut) {
	f.fillAttr(child, a, &out.Attr)
	if child.unsentWrites() {
		// These attributes count data that has not reached the server,
		// which may yet refuse it. The kernel client's stat writes the
		// data back before it answers; here Getattr does, so the kernel
		// must not answer a stat from a lookup's attributes.
		out.SetAttrTimeout(0)
	} else {
		out.SetAttrTimeout(f.attrTimeout(child))
	}
	if f.opts.LookupPositive {
		dir.mu.Lock()
		out.SetEntryTimeout(dir.attrTimeo)
		dir.mu.Unlock()
	}
}

// newer reports whether time a is after time b.
func newer(a, b nfs3.Time) bool {
	return a.Sec > b.Sec || a.Sec == b.Sec && a.Nsec > b.Nsec
}
