package server

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"io/fs"
	"math"
	"net"
	"sync"

	billy "github.com/go-git/go-billy/v5"
	nfs "github.com/willscott/go-nfs"
	"golang.org/x/sys/unix"
)

// handler is the go-nfs Handler of one worker. go-nfs never shows a handler
// the call it serves, but it serves one call at a time per connection and
// each worker is its own go-nfs connection with its own handler, so the
// handler's filesystem knows the worker's current call.
type handler struct {
	srv *Server
	fs  *billyFS
}

var (
	_ nfs.Handler        = (*handler)(nil)
	_ nfs.CachingHandler = (*handler)(nil)
)

// Mount exports the root as "/" and nothing else, for AUTH_SYS. The front
// answers MNT itself (see mountReply) with the same policy, because go-nfs
// fails on an empty path before asking; this keeps the Handler truthful.
func (h *handler) Mount(_ context.Context, _ net.Conn, req nfs.MountRequest) (nfs.MountStatus, billy.Filesystem, []nfs.AuthFlavor) {
	if string(req.Dirpath) != "/" {
		return nfs.MountStatusErrNoEnt, nil, nil
	}
	return nfs.MountStatusOk, h.fs, []nfs.AuthFlavor{nfs.AuthFlavorUnix}
}

func (h *handler) Change(billy.Filesystem) billy.Change { return h.fs }

// FSStat reports the root filesystem's statfs. go-nfs zeroes the available
// space and files of a read-only export before calling; that is kept.
func (h *handler) FSStat(_ context.Context, _ billy.Filesystem, st *nfs.FSStat) error {
	var sfs unix.Statfs_t
	if err := unix.Fstatfs(h.srv.rootfd, &sfs); err != nil {
		return err
	}
	unit := uint64(sfs.Frsize)
	if unit == 0 {
		unit = uint64(sfs.Bsize)
	}
	st.TotalSize = sfs.Blocks * unit
	st.FreeSize = sfs.Bfree * unit
	st.TotalFiles = sfs.Files
	st.FreeFiles = sfs.Ffree
	if !h.srv.opts.ReadOnly {
		st.AvailableSize = sfs.Bavail * unit
		st.AvailableFiles = sfs.Ffree
	}
	st.CacheHint = 0
	return nil
}

// ToHandle cannot fail in go-nfs's interface. When the object vanished
// meanwhile the handle is empty, which a client treats as "no handle given"
// (it looks the name up again) or, if it sends it back, gets STALE for.
func (h *handler) ToHandle(_ billy.Filesystem, path []string) []byte {
	fh, err := h.srv.handleFor(joinRel(path...))
	if err != nil {
		// go-nfs asks for the handle of a REMOVE's target before removing
		// it, missing or not.
		if !errors.Is(err, unix.ENOENT) {
			h.srv.logf("%v", err)
		}
		return []byte{}
	}
	return fh
}

func (h *handler) FromHandle(fh []byte) (billy.Filesystem, []string, error) {
	rel, err := h.srv.pathFor(fh)
	if err != nil {
		h.fs.cur.fsErr = err
		return nil, nil, err
	}
	return h.fs, splitRel(rel), nil
}

// InvalidateHandle is called after REMOVE and RENAME. Handles are not
// state, so there is nothing to invalidate but the remembered path.
func (h *handler) InvalidateHandle(_ billy.Filesystem, fh []byte) error {
	h.srv.hints.drop(fh)
	return nil
}

// HandleLimit bounds how many entries go-nfs puts in one READDIR(PLUS)
// reply (half of it). Handles are not state, so there is no limit; the
// byte counts of the call bound the reply.
func (h *handler) HandleLimit() int { return math.MaxInt32 }

// VerifierFor and DataForVerifier make go-nfs's READDIR(PLUS) cookies work:
// go-nfs pages through a sorted listing by index, and needs the same listing
// for every page of one pass. The listing is cached under its cookie
// verifier, shared by all workers (the pages of one pass may be served by
// different workers and connections).
func (h *handler) VerifierFor(path string, contents []fs.FileInfo) uint64 {
	return h.srv.dirs.put(path, contents)
}

// DataForVerifier returns a cached listing only to a caller who may still
// read the directory: the listing was made with someone's credentials.
func (h *handler) DataForVerifier(path string, verifier uint64) []fs.FileInfo {
	list := h.srv.dirs.get(path, verifier)
	if list == nil {
		return nil
	}
	err := h.srv.self.runAs(h.fs.cur.rpc.cred, func() error {
		fd, err := h.srv.openBeneath(path, unix.O_PATH|unix.O_DIRECTORY, 0)
		if err != nil {
			return err
		}
		defer unix.Close(fd)
		return unix.Faccessat2(fd, "", unix.R_OK|unix.X_OK, unix.AT_EMPTY_PATH|unix.AT_EACCESS)
	})
	if err != nil {
		return nil
	}
	return list
}

// dirCache holds recent directory listings by cookie verifier. The
// verifier is a hash of the directory's path and names, like go-nfs's own,
// so a listing evicted (or lost in a restart) is rebuilt with the same
// verifier as long as the directory did not change, and the client's
// cookies stay good.
type dirCache struct {
	mu      sync.Mutex
	m       map[uint64]dirListing
	order   []uint64 // oldest first
	entries int
}

type dirListing struct {
	path string
	list []fs.FileInfo
}

// Bounds on the cache: a few dozen listings and a quarter million entries
// (a few tens of MB); the newest listing is always kept, however big.
const (
	maxDirListings = 64
	maxDirEntries  = 1 << 18
)

func (c *dirCache) put(path string, list []fs.FileInfo) uint64 {
	sum := sha256.New()
	sum.Write(binary.BigEndian.AppendUint64(nil, uint64(len(path))))
	sum.Write([]byte(path))
	for _, fi := range list {
		sum.Write([]byte(fi.Name()))
		sum.Write([]byte{0})
	}
	v := binary.BigEndian.Uint64(sum.Sum(nil))
	if v == 0 {
		v = 1 // go-nfs treats verifier 0 as "none"
	}

	c.mu.Lock()
	defer c.mu.Unlock()
	if c.m == nil {
		c.m = make(map[uint64]dirListing)
	}
	if old, ok := c.m[v]; ok {
		c.entries -= len(old.list)
		c.order = deleteValue(c.order, v)
	}
	c.m[v] = dirListing{path: path, list: list}
	c.order = append(c.order, v)
	c.entries += len(list)
	for len(c.order) > 1 && (len(c.order) > maxDirListings || c.entries > maxDirEntries) {
		old := c.order[0]
		c.order = c.order[1:]
		c.entries -= len(c.m[old].list)
		delete(c.m, old)
	}
	return v
}

func (c *dirCache) get(path string, v uint64) []fs.FileInfo {
	c.mu.Lock()
	defer c.mu.Unlock()
	if l, ok := c.m[v]; ok && l.path == path {
		return l.list
	}
	return nil
}

func deleteValue(s []uint64, v uint64) []uint64 {
	for i, x := range s {
		if x == v {
			return append(s[:i], s[i+1:]...)
		}
	}
	return s
}
