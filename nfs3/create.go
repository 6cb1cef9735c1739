package nfs3

import (
	"context"

	"github.com/rdmafs/rdmafs/sunrpc"
	"github.com/rdmafs/rdmafs/sunrpc/xdr"
)

// CreateResult is what CREATE, MKDIR, SYMLINK and MKNOD return. A server
// may leave out the new object's handle or attributes; the caller then
// looks it up.
type CreateResult struct {
	FH      FH
	HasFH   bool
	Attr    Fattr
	HasAttr bool
	DirWcc  Wcc
}

func (c *Client) finishCreate(ctx context.Context, call *sunrpc.Call, e xdr.Encoder, res *CreateResult) error {
	d, err := c.finish(ctx, call, e)
	if err != nil {
		if answered(err) {
			getWcc(&d, &res.DirWcc)
		}
		return err
	}
	res.HasFH = getPostOpFH(&d, &res.FH)
	res.HasAttr = getPostOpAttr(&d, &res.Attr)
	getWcc(&d, &res.DirWcc)
	return c.check(int(call.Proc), &d)
}

// Create creates the regular file name in dir. With Exclusive, verf is the
// create verifier and attr is not sent; the caller sets the attributes
// afterwards, as RFC 1813 says.
func (c *Client) Create(ctx context.Context, cred *sunrpc.Cred, dir *FH, name string, how CreateMode, attr *Sattr, verf Verf, res *CreateResult) error {
	call, e := c.start(ProcCreate, cred)
	defer call.Release()
	putDirOp(&e, dir, name)
	e.Uint32(uint32(how))
	if how == Exclusive {
		e.Fixed(verf[:])
	} else {
		putSattr(&e, attr)
	}
	return c.finishCreate(ctx, call, e, res)
}

// Mkdir creates the directory name in dir.
func (c *Client) Mkdir(ctx context.Context, cred *sunrpc.Cred, dir *FH, name string, attr *Sattr, res *CreateResult) error {
	call, e := c.start(ProcMkdir, cred)
	defer call.Release()
	putDirOp(&e, dir, name)
	putSattr(&e, attr)
	return c.finishCreate(ctx, call, e, res)
}

// Symlink creates the symbolic link name in dir pointing at target. The
// target is the call's payload.
func (c *Client) Symlink(ctx context.Context, cred *sunrpc.Cred, dir *FH, name, target string, attr *Sattr, res *CreateResult) error {
	call, e := c.start(ProcSymlink, cred)
	defer call.Release()
	putDirOp(&e, dir, name)
	putSattr(&e, attr)
	e.Uint32(uint32(len(target)))
	call.Payload = []byte(target)
	return c.finishCreate(ctx, call, e, res)
}

// Mknod creates the special file name in dir: a device (TypeChr, TypeBlk,
// with rdev), a socket or a FIFO.
func (c *Client) Mknod(ctx context.Context, cred *sunrpc.Cred, dir *FH, name string, typ FileType, attr *Sattr, rdev [2]uint32, res *CreateResult) error {
	call, e := c.start(ProcMknod, cred)
	defer call.Release()
	putDirOp(&e, dir, name)
	e.Uint32(uint32(typ))
	switch typ {
	case TypeChr, TypeBlk:
		putSattr(&e, attr)
		e.Uint32(rdev[0])
		e.Uint32(rdev[1])
	case TypeSock, TypeFifo:
		putSattr(&e, attr)
	}
	return c.finishCreate(ctx, call, e, res)
}

// Remove removes the non-directory name from dir.
func (c *Client) Remove(ctx context.Context, cred *sunrpc.Cred, dir *FH, name string, wcc *Wcc) error {
	return c.dirOp(ctx, ProcRemove, cred, dir, name, wcc)
}

// Rmdir removes the empty directory name from dir.
func (c *Client) Rmdir(ctx context.Context, cred *sunrpc.Cred, dir *FH, name string, wcc *Wcc) error {
	return c.dirOp(ctx, ProcRmdir, cred, dir, name, wcc)
}

func (c *Client) dirOp(ctx context.Context, proc uint32, cred *sunrpc.Cred, dir *FH, name string, wcc *Wcc) error {
	call, e := c.start(proc, cred)
	defer call.Release()
	putDirOp(&e, dir, name)
	return c.finishWcc(ctx, call, e, wcc)
}

// Rename renames fromName in fromDir to toName in toDir, replacing what
// toName named.
func (c *Client) Rename(ctx context.Context, cred *sunrpc.Cred, fromDir *FH, fromName string, toDir *FH, toName string, fromWcc, toWcc *Wcc) error {
	call, e := c.start(ProcRename, cred)
	defer call.Release()
	putDirOp(&e, fromDir, fromName)
	putDirOp(&e, toDir, toName)
	d, err := c.finish(ctx, call, e)
	if err != nil {
		if answered(err) {
			getWcc(&d, fromWcc)
			getWcc(&d, toWcc)
		}
		return err
	}
	getWcc(&d, fromWcc)
	getWcc(&d, toWcc)
	return c.check(ProcRename, &d)
}

// Link makes name in dir a hard link to fh and returns fh's attributes.
func (c *Client) Link(ctx context.Context, cred *sunrpc.Cred, fh *FH, dir *FH, name string, attr *Fattr, dirWcc *Wcc) (hasAttr bool, err error) {
	call, e := c.start(ProcLink, cred)
	defer call.Release()
	putFH(&e, fh)
	putDirOp(&e, dir, name)
	d, err := c.finish(ctx, call, e)
	if err != nil {
		if answered(err) {
			hasAttr = getPostOpAttr(&d, attr)
			getWcc(&d, dirWcc)
		}
		return hasAttr, err
	}
	hasAttr = getPostOpAttr(&d, attr)
	getWcc(&d, dirWcc)
	return hasAttr, c.check(ProcLink, &d)
}
