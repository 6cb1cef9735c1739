package fs

import (
	"context"
	"sync"

	"github.com/hanwen/go-fuse/v2/fuse"
)

// The caller's umask. With ACLs rdmafs asks the kernel to leave the umask
// to it (FUSE_DONT_MASK), since in a directory with a default ACL it must
// not apply at all (createMode). The kernel then sends the caller's umask
// with each CREATE, MKDIR and MKNOD, which go-fuse's node API does not
// pass on: umaskFS takes it from the request for the node method that
// serves it. The request is the only source that is always right: a
// caller's /proc/PID/status costs three system calls per create, and a
// caller in another PID namespace than the daemon's has no PID there.

// requestUmasks holds the umask of each create request being served, by
// the request's cancel channel: go-fuse makes one for each request, and
// gives it to the node method as its context's Cancel.
type requestUmasks struct{ byCancel sync.Map }

// defaultUmask stands for the umask of a request that brought none, which
// only a request not from the kernel lacks.
const defaultUmask = 0o022

// of returns the umask of the request that go-fuse gave its node method
// ctx (not a context derived from it).
func (u *requestUmasks) of(ctx context.Context) uint32 {
	if c, ok := ctx.(*fuse.Context); ok && c.Cancel != nil {
		if v, ok := u.byCancel.Load(c.Cancel); ok {
			return v.(uint32)
		}
	}
	return defaultUmask
}

// serve runs a request that carries umask, which of tells meanwhile.
func (u *requestUmasks) serve(cancel <-chan struct{}, umask uint32, run func() fuse.Status) fuse.Status {
	if cancel == nil {
		return run() // not a kernel request: of has nothing to go by
	}
	u.byCancel.Store(cancel, umask)
	defer u.byCancel.Delete(cancel)
	return run()
}

// umaskFS is go-fuse's raw file system with the umask of each create
// request kept for the node method that serves it.
type umaskFS struct {
	fuse.RawFileSystem
	umasks *requestUmasks
}

var _ fuse.RawFileSystem = (*umaskFS)(nil)

func (u *umaskFS) Create(cancel <-chan struct{}, in *fuse.CreateIn, name string, out *fuse.CreateOut) fuse.Status {
	return u.umasks.serve(cancel, in.Umask, func() fuse.Status { return u.RawFileSystem.Create(cancel, in, name, out) })
}

func (u *umaskFS) Mkdir(cancel <-chan struct{}, in *fuse.MkdirIn, name string, out *fuse.EntryOut) fuse.Status {
	return u.umasks.serve(cancel, in.Umask, func() fuse.Status { return u.RawFileSystem.Mkdir(cancel, in, name, out) })
}

func (u *umaskFS) Mknod(cancel <-chan struct{}, in *fuse.MknodIn, name string, out *fuse.EntryOut) fuse.Status {
	return u.umasks.serve(cancel, in.Umask, func() fuse.Status { return u.RawFileSystem.Mknod(cancel, in, name, out) })
}
