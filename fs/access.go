package fs

import (
	"context"
	"hash/fnv"
	"syscall"
	"time"

	"github.com/rdmafs/rdmafs/nfs3"
	"github.com/rdmafs/rdmafs/sunrpc"
)

// Without default_permissions the kernel leaves permission checks to the
// file system, as it leaves them to the NFS server for the kernel client:
// open and access(2) ask the server with ACCESS, for the caller's
// credential, and remember the answer while the file's attributes stay
// fresh.

// The access(2) mask bits.
const (
	mayExec  = 1
	mayWrite = 2
	mayRead  = 4
)

// maxAccessEntries is how many callers' answers a file keeps.
const maxAccessEntries = 8

type accessKey struct {
	uid, gid uint32
	groups   uint64 // hash of the supplementary groups
}

type accessEntry struct {
	key     accessKey
	granted uint32 // may* bits
	expires time.Time
}

type accessCache struct {
	entries []accessEntry
}

func (c *accessCache) clear() { c.entries = c.entries[:0] }

func (c *accessCache) get(k accessKey, now time.Time) (uint32, bool) {
	for _, e := range c.entries {
		if e.key == k && now.Before(e.expires) {
			return e.granted, true
		}
	}
	return 0, false
}

func (c *accessCache) put(e accessEntry) {
	for i := range c.entries {
		if c.entries[i].key == e.key {
			c.entries[i] = e
			return
		}
	}
	if len(c.entries) == maxAccessEntries {
		copy(c.entries, c.entries[1:])
		c.entries = c.entries[:maxAccessEntries-1]
	}
	c.entries = append(c.entries, e)
}

func keyOf(cred *sunrpc.Cred) accessKey {
	if cred == nil {
		return accessKey{uid: ^uint32(0), gid: ^uint32(0)}
	}
	h := fnv.New64a()
	var b [4]byte
	for _, g := range cred.Groups {
		b[0], b[1], b[2], b[3] = byte(g), byte(g>>8), byte(g>>16), byte(g>>24)
		h.Write(b[:])
	}
	return accessKey{uid: cred.UID, gid: cred.GID, groups: h.Sum64()}
}

// checkAccess returns 0 if the caller in ctx has all the may* bits of mask
// on obj, EACCES if not.
func (f *FS) checkAccess(ctx context.Context, obj *object, mask uint32) syscall.Errno {
	if mask == 0 {
		return 0
	}
	cred := f.cred(ctx)
	key := keyOf(cred)
	now := time.Now()
	obj.mu.Lock()
	granted, ok := obj.access.get(key, now)
	obj.mu.Unlock()
	if !ok {
		// Ask for every bit at once, so one answer serves later checks.
		const all = nfs3.AccessRead | nfs3.AccessLookup | nfs3.AccessModify | nfs3.AccessExtend | nfs3.AccessDelete | nfs3.AccessExecute
		var attr nfs3.Fattr
		bits, hasAttr, err := f.nfs.Access(ctx, cred, &obj.fh, all, &attr)
		if err != nil {
			return errno(err)
		}
		if hasAttr {
			f.setAttr(obj, &attr)
		}
		granted = mayBits(obj.typ, bits)
		obj.mu.Lock()
		obj.access.put(accessEntry{key: key, granted: granted, expires: obj.attrExpires})
		obj.mu.Unlock()
	}
	if mask&^granted != 0 {
		return syscall.EACCES
	}
	return 0
}

// mayBits converts the ACCESS bits the server granted into may* bits, as
// the Linux client does.
func mayBits(t nfs3.FileType, bits uint32) uint32 {
	var m uint32
	if bits&nfs3.AccessRead != 0 {
		m |= mayRead
	}
	if t == nfs3.TypeDir {
		if bits&(nfs3.AccessModify|nfs3.AccessExtend|nfs3.AccessDelete) != 0 {
			m |= mayWrite
		}
		if bits&nfs3.AccessLookup != 0 {
			m |= mayExec
		}
	} else {
		if bits&(nfs3.AccessModify|nfs3.AccessExtend) != 0 {
			m |= mayWrite
		}
		if bits&nfs3.AccessExecute != 0 {
			m |= mayExec
		}
	}
	return m
}

// openMask returns the may* bits an open with flags needs.
func openMask(flags uint32) uint32 {
	var m uint32
	switch flags & syscall.O_ACCMODE {
	case syscall.O_RDONLY:
		m = mayRead
	case syscall.O_WRONLY:
		m = mayWrite
	case syscall.O_RDWR:
		m = mayRead | mayWrite
	}
	if flags&syscall.O_TRUNC != 0 {
		m |= mayWrite
	}
	return m
}
