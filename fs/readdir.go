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
// back to a position can continue from the server's cookie.

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

	pos     uint64              // position of the last entry delivered
	cookies []uint64            // cookies[i]: cookie of the server's entry at position i+3
	seen    map[uint64]struct{} // the cookies of cookies, to find a loop
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
)

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
	first := len(h.cookies)
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
		if _, dup := h.seen[e.Cookie]; dup || e.Cookie == 0 {
			// A cookie names a place in the listing: seen twice, the
			// server would lead the listing round in a circle.
			loop = fmt.Errorf("directory %d: the server gave cookie %d twice (entry %q): a readdir loop", h.n.obj.fileID, e.Cookie, name)
			return
		}
		h.seen[e.Cookie] = struct{}{}
		h.cookies = append(h.cookies, e.Cookie)
		h.page = append(h.page, dirEntry{name: name, fileID: e.FileID, attr: e.Attr, hasAttr: e.HasAttr, fh: e.FH, hasFH: e.HasFH})
	}
	if h.seen == nil {
		h.seen = make(map[uint64]struct{})
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
		h.forgetFrom(first)
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
// entry READDIRPLUS returned make its Inode without a LOOKUP.
func (h *dirHandle) Lookup(ctx context.Context, name string, out *fuse.EntryOut) (*gofs.Inode, syscall.Errno) {
	ctx, release := h.n.fs.kills.killable(ctx)
	defer release()
	if e := h.last; e != nil && e.name == name && e.hasAttr && e.hasFH {
		return h.n.found(ctx, e.fh, &e.attr, true, out)
	}
	return h.n.Lookup(ctx, name, out)
}

// Seekdir implements gofs.FileSeekdirer.
func (h *dirHandle) Seekdir(ctx context.Context, off uint64) syscall.Errno {
	h.page = h.page[:0]
	h.last = nil
	switch {
	case off <= 2:
		h.pos, h.next, h.eof, h.verf = off, 0, false, nfs3.Verf{}
		h.forgetFrom(0)
	case off-3 < uint64(len(h.cookies)):
		h.pos, h.next, h.eof = off, h.cookies[off-3], false
		h.forgetFrom(int(off - 2))
	default:
		return syscall.EINVAL
	}
	return 0
}

// forgetFrom drops the cookies of the entries from position i+3 on.
func (h *dirHandle) forgetFrom(i int) {
	for _, c := range h.cookies[i:] {
		delete(h.seen, c)
	}
	h.cookies = h.cookies[:i]
}

// errReaddirLoop fails a listing whose cookies go round in a circle; the
// program gets ELOOP, as from the kernel client.
var errReaddirLoop = errors.New("readdir loop")

// Fsyncdir implements gofs.FileFsyncdirer: fsync(2) of a directory. Every
// change of an NFSv3 directory is made on the server before its call
// returns, so there is nothing to flush, as in the kernel client.
func (h *dirHandle) Fsyncdir(ctx context.Context, flags uint32) syscall.Errno { return 0 }
