package fs

import (
	"context"
	"errors"
	"fmt"
	"syscall"

	gofs "github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"

	"github.com/rdmafs/rdmafs/nfs3"
	"github.com/rdmafs/rdmafs/sunrpc"
)

// A directory is listed a page at a time with READDIRPLUS (or READDIR
// with nordirplus), following the server's cookies and cookie verifier.
// FUSE offsets are positions in the listing: 1 and 2 are "." and "..",
// which the handle makes itself, and position p > 2 is the (p-2)th entry
// of the server's; the handle remembers each entry's cookie so that a seek
// back to a position can continue from the server's cookie. What a listing
// keeps in memory is bounded (dircache.go).

// dirPageMax bounds the reply to one READDIRPLUS.
const dirPageMax = 128 << 10

type dirEntry struct {
	name    string
	fileID  uint64
	attr    nfs3.Fattr
	hasAttr bool
	fh      nfs3.FH
	hasFH   bool
}

type dirHandle struct {
	n    *node
	cred *sunrpc.Cred
	plus bool

	pos     uint64       // position of the last entry delivered
	cookies cookieWindow // of the last entries fetched: entry i is at position i+3
	verf    nfs3.Verf
	next    uint64 // cookie to continue from
	eof     bool
	page    []dirEntry // fetched, not yet delivered
	last    *dirEntry  // the entry delivered last, for Lookup
}

var (
	_ = (gofs.FileReaddirenter)((*dirHandle)(nil))
	_ = (gofs.FileLookuper)((*dirHandle)(nil))
	_ = (gofs.FileSeekdirer)((*dirHandle)(nil))
	_ = (gofs.FileFsyncdirer)((*dirHandle)(nil))
	_ = (gofs.FileReleasedirer)((*dirHandle)(nil))
)

// newDirHandle returns the handle of a listing of n, made as cred.
func newDirHandle(n *node, cred *sunrpc.Cred) *dirHandle {
	return &dirHandle{n: n, cred: cred, plus: !n.fs.opts.NoReaddirPlus, cookies: cookieWindow{total: &n.fs.dirCookies}}
}

// Readdirent implements gofs.FileReaddirenter.
func (h *dirHandle) Readdirent(ctx context.Context) (*fuse.DirEntry, syscall.Errno) {
	ctx, release := h.n.fs.kills.killable(ctx)
	defer release()
	switch h.pos {
	case 0, 1:
		h.pos++
		h.last = nil
		name, ino := ".", h.n.obj.fileID
		if h.pos == 2 {
			name = ".."
			if _, parent := h.n.Parent(); parent != nil {
				ino = parent.StableAttr().Ino
			}
		}
		return &fuse.DirEntry{Name: name, Ino: ino, Mode: syscall.S_IFDIR, Off: h.pos}, 0
	}
	for len(h.page) == 0 {
		if h.eof {
			return nil, 0
		}
		if err := h.fetch(ctx); err != nil {
			if errors.Is(err, errReaddirLoop) {
				return nil, syscall.ELOOP
			}
			return nil, errno(err)
		}
	}
	e := &h.page[0]
	h.page = h.page[1:]
	h.pos++
	h.last = e
	de := &fuse.DirEntry{Name: e.name, Ino: e.fileID, Off: h.pos}
	if e.hasAttr {
		de.Mode = e.attr.Type.Mode()
	}
	return de, 0
}

// fetch reads the next page from the server.
func (h *dirHandle) fetch(ctx context.Context) error {
	f := h.n.fs
	first := h.cookies.next()
	last := h.next
	var loop error
	collect := func(e *nfs3.DirEntry) {
		if loop != nil {
			return
		}
		last = e.Cookie
		name := string(e.Name)
		if name == "." || name == ".." {
			return // the handle makes its own
		}
		if e.Cookie == 0 || !h.cookies.add(e.Cookie) {
			// A cookie names a place in the listing: seen twice, the
			// server would lead the listing round in a circle.
			loop = fmt.Errorf("directory %d: the server gave cookie %d twice (entry %q): a readdir loop", h.n.obj.fileID, e.Cookie, name)
			return
		}
		h.page = append(h.page, dirEntry{name: name, fileID: e.FileID, attr: e.Attr, hasAttr: e.HasAttr, fh: e.FH, hasFH: e.HasFH})
	}
	var page nfs3.DirPage
	var err error
	size := min(uint32(f.opts.RSize), dirPageMax)
	if h.plus {
		page, err = f.nfs.Readdirplus(ctx, h.cred, &h.n.obj.fh, h.next, h.verf, size/2, size, collect)
	} else {
		page, err = f.nfs.Readdir(ctx, h.cred, &h.n.obj.fh, h.next, h.verf, size, collect)
	}
	if err == nil {
		err = loop
	}
	if err != nil {
		h.cookies.truncate(first)
		h.page = h.page[:0]
		if loop != nil {
			f.logf("%v", loop)
			return errReaddirLoop
		}
		return err
	}
	if page.HasDirAttr {
		f.setAttr(h.n.obj, &page.DirAttr)
	}
	if page.Entries == 0 && !page.EOF {
		// No entry and no end: the server would send the same again.
		return nfs3.ErrIO
	}
	h.verf = page.Verf
	h.eof = page.EOF
	h.next = last
	return nil
}

// Lookup implements gofs.FileLookuper: the attributes and handle of an
// entry READDIRPLUS returned make its Inode without a LOOKUP, while the
// mount holds few enough files (dircache.go); beyond, the entry goes to
// the kernel without one.
func (h *dirHandle) Lookup(ctx context.Context, name string, out *fuse.EntryOut) (*gofs.Inode, syscall.Errno) {
	ctx, release := h.n.fs.kills.killable(ctx)
	defer release()
	if !h.n.fs.mayMakeInode() {
		// go-fuse then sends the entry with node id 0: the kernel lists
		// the name and makes no dentry (fuse_direntplus_link).
		return nil, syscall.ENOBUFS
	}
	had := h.n.GetChild(name)
	var ino *gofs.Inode
	var en syscall.Errno
	if e := h.last; e != nil && e.name == name && e.hasAttr && e.hasFH {
		ino, en = h.n.found(ctx, e.fh, &e.attr, true, out)
	} else {
		ino, en = h.n.Lookup(ctx, name, out)
	}
	if en == 0 && (had == nil || had.StableAttr() != ino.StableAttr()) {
		// A name the kernel did not have for this file: go-fuse keeps it
		// until the file goes.
		h.n.fs.objects.addPlusName(ino.Operations().(*node).obj)
	}
	return ino, en
}

// Seekdir implements gofs.FileSeekdirer. A position whose cookie the
// listing no longer remembers is reached by listing again from the start.
func (h *dirHandle) Seekdir(ctx context.Context, off uint64) syscall.Errno {
	h.page = h.page[:0]
	h.last = nil
	if off <= 2 {
		h.pos, h.next, h.eof, h.verf = off, 0, false, nfs3.Verf{}
		h.cookies.reset()
		return 0
	}
	i := off - 3 // the entry delivered last
	if i >= h.cookies.next() {
		return syscall.EINVAL
	}
	if c, ok := h.cookies.cookie(i); ok {
		h.pos, h.next, h.eof = off, c, false
		h.cookies.truncate(i + 1)
		return 0
	}
	ctx, release := h.n.fs.kills.killable(ctx)
	defer release()
	h.pos, h.next, h.eof, h.verf = 2, 0, false, nfs3.Verf{}
	h.cookies.reset()
	for h.pos < off {
		if len(h.page) == 0 {
			if h.eof {
				return 0 // the directory got shorter: at its end
			}
			if err := h.fetch(ctx); err != nil {
				if errors.Is(err, errReaddirLoop) {
					return syscall.ELOOP
				}
				return errno(err)
			}
			continue
		}
		skip := min(uint64(len(h.page)), off-h.pos)
		h.page = h.page[skip:]
		h.pos += skip
	}
	return 0
}

// Releasedir implements gofs.FileReleasedirer: the listing's cookies no
// longer count against the mount's.
func (h *dirHandle) Releasedir(ctx context.Context, releaseFlags uint32) {
	h.cookies.reset()
}

// errReaddirLoop fails a listing whose cookies go round in a circle; the
// program gets ELOOP, as from the kernel client.
var errReaddirLoop = errors.New("readdir loop")

// Fsyncdir implements gofs.FileFsyncdirer: fsync(2) of a directory. Every
// change of an NFSv3 directory is made on the server before its call
// returns, so there is nothing to flush, as in the kernel client.
func (h *dirHandle) Fsyncdir(ctx context.Context, flags uint32) syscall.Errno { return 0 }
