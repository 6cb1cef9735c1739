package fs

// POSIX ACLs through NFSACL, as the Linux NFSv3 client has them: a file's
// access ACL and a directory's default ACL are the extended attributes
// system.posix_acl_access and system.posix_acl_default, read with GETACL
// and written with SETACL. With FUSE_POSIX_ACL (MountOptions) the kernel
// reads them to check permissions itself, so a named-user or named-group
// entry grants what the mode bits do not. A file's ACLs are cached with
// its attributes and dropped whenever those change (a server changes the
// ctime with an ACL) or go stale.

import (
	"context"
	"errors"
	"syscall"
	"time"

	gofs "github.com/hanwen/go-fuse/v2/fs"

	"github.com/rdmafs/rdmafs/nfs3"
	"github.com/rdmafs/rdmafs/nfs3/acl"
	"github.com/rdmafs/rdmafs/sunrpc"
)

var (
	_ = (gofs.NodeSetxattrer)((*node)(nil))
	_ = (gofs.NodeRemovexattrer)((*node)(nil))
	_ = (gofs.NodeListxattrer)((*node)(nil))
)

// aclCache is the ACLs of one object, as GETACL last returned them.
type aclCache struct {
	valid           bool
	access, dfault  acl.ACL
	accessIsMinimal bool
}

func (c *aclCache) clear() { *c = aclCache{} }

// usesACLs reports whether the mount speaks NFSACL with its server.
func (f *FS) usesACLs() bool { return f.acl != nil && !f.aclGone.Load() }

// isACLXattr reports whether name is one of the ACL attributes.
func isACLXattr(name string) bool { return name == acl.XattrAccess || name == acl.XattrDefault }

// acls returns obj's ACLs, from the cache while obj's attributes are fresh.
func (f *FS) acls(ctx context.Context, obj *object) (aclCache, error) {
	obj.mu.Lock()
	c := obj.acls
	fresh := time.Now().Before(obj.attrExpires)
	obj.mu.Unlock()
	if c.valid && fresh {
		return c, nil
	}
	mask := uint32(acl.MaskACL | acl.MaskACLCount)
	if obj.typ == nfs3.TypeDir {
		mask |= acl.MaskDefault | acl.MaskDefaultCount
	}
	var res acl.Result
	var attr nfs3.Fattr
	hasAttr, err := f.acl.GetACL(ctx, f.cred(ctx), &obj.fh, mask, &res, &attr)
	if err != nil {
		return aclCache{}, f.aclError(err)
	}
	c = aclCache{valid: true, access: res.Access, dfault: res.Default, accessIsMinimal: res.Access.Minimal()}
	if hasAttr {
		// The attributes first: new ones drop the cached ACLs.
		f.setAttr(obj, &attr)
		obj.mu.Lock()
		obj.acls = c
		obj.mu.Unlock()
	}
	return c, nil
}

// aclError turns a failed NFSACL call into an error for the program. A
// server that turns out not to serve NFSACL (PROG_UNAVAIL) is used without
// ACLs from then on, as the kernel client does.
func (f *FS) aclError(err error) error {
	var ae *sunrpc.AcceptError
	if errors.As(err, &ae) && (ae.Stat == sunrpc.ProgUnavail || ae.Stat == sunrpc.ProgMismatch || ae.Stat == sunrpc.ProcUnavail) {
		if !f.aclGone.Swap(true) {
			f.logf("server does not serve NFSACL (%v): no ACLs", err)
		}
		return syscall.EOPNOTSUPP
	}
	return err
}

// getACLXattr answers getxattr of an ACL attribute. A minimal access ACL
// (one the mode bits say) is no ACL, as the kernel client reports it:
// ENODATA, and getfacl shows the mode.
func (n *node) getACLXattr(ctx context.Context, name string, dest []byte) (uint32, syscall.Errno) {
	ctx, release := n.fs.kills.killable(ctx)
	defer release()
	c, err := n.fs.acls(ctx, n.obj)
	if err != nil {
		return 0, toErrno(err)
	}
	var a acl.ACL
	if name == acl.XattrAccess {
		if !c.accessIsMinimal {
			a = c.access
		}
	} else {
		a = c.dfault
	}
	if len(a) == 0 {
		return 0, syscall.ENODATA
	}
	b := a.Xattr()
	if len(dest) == 0 {
		return uint32(len(b)), 0
	}
	if len(dest) < len(b) {
		return uint32(len(b)), syscall.ERANGE
	}
	return uint32(copy(dest, b)), 0
}

// Setxattr implements gofs.NodeSetxattrer: an ACL attribute is set with
// SETACL; NFSv3 has no other extended attributes.
func (n *node) Setxattr(ctx context.Context, name string, data []byte, flags uint32) syscall.Errno {
	if !isACLXattr(name) || !n.fs.usesACLs() {
		return syscall.EOPNOTSUPP
	}
	a, err := acl.FromXattr(data)
	if err != nil {
		return syscall.EINVAL
	}
	return n.setACL(ctx, name, a)
}

// Removexattr implements gofs.NodeRemovexattrer: removing an ACL attribute
// sets an empty ACL.
func (n *node) Removexattr(ctx context.Context, name string) syscall.Errno {
	if !isACLXattr(name) || !n.fs.usesACLs() {
		return syscall.EOPNOTSUPP
	}
	return n.setACL(ctx, name, nil)
}

// Listxattr implements gofs.NodeListxattrer: the ACL attributes the file
// has.
func (n *node) Listxattr(ctx context.Context, dest []byte) (uint32, syscall.Errno) {
	if !n.fs.usesACLs() {
		return 0, 0
	}
	ctx, release := n.fs.kills.killable(ctx)
	defer release()
	c, err := n.fs.acls(ctx, n.obj)
	if err != nil {
		if errors.Is(err, syscall.EOPNOTSUPP) {
			return 0, 0
		}
		return 0, toErrno(err)
	}
	var b []byte
	if !c.accessIsMinimal && len(c.access) > 0 {
		b = append(append(b, acl.XattrAccess...), 0)
	}
	if len(c.dfault) > 0 {
		b = append(append(b, acl.XattrDefault...), 0)
	}
	if len(dest) == 0 {
		return uint32(len(b)), 0
	}
	if len(dest) < len(b) {
		return uint32(len(b)), syscall.ERANGE
	}
	return uint32(copy(dest, b)), 0
}

// setACL sets one of the file's ACLs (a nil one removes it) as the Linux
// client does: a directory's SETACL carries both ACLs, so the one not
// being set goes along as it is; an access ACL removed becomes the minimal
// ACL of the file's mode.
func (n *node) setACL(ctx context.Context, name string, a acl.ACL) syscall.Errno {
	f := n.fs
	if f.opts.ReadOnly {
		return syscall.EROFS
	}
	isDir := n.obj.typ == nfs3.TypeDir
	if name == acl.XattrDefault && !isDir {
		if len(a) == 0 {
			return 0
		}
		return syscall.EACCES
	}
	ctx, release := n.fs.kills.killable(ctx)
	defer release()
	cur, err := f.acls(ctx, n.obj)
	if err != nil {
		return toErrno(err)
	}
	args := acl.SetArgs{Mask: acl.MaskACL, Access: cur.access}
	if isDir {
		args.Mask |= acl.MaskDefault
		args.Default = cur.dfault
	}
	if name == acl.XattrAccess {
		args.Access = a
	} else {
		args.Default = a
	}
	if len(args.Access) == 0 {
		args.Access = acl.FromMode(cur.access.Mode())
	}
	attr := n.obj.cachedAttr()
	var after nfs3.Fattr
	hasAttr, err := f.acl.SetACL(ctx, f.cred(ctx), &n.obj.fh, &args, attr.UID, attr.GID, &after)
	if hasAttr {
		f.setAttr(n.obj, &after)
	} else {
		f.invalidate(n.obj)
	}
	n.obj.mu.Lock()
	n.obj.acls.clear()
	n.obj.mu.Unlock()
	if err != nil {
		return toErrno(f.aclError(err))
	}
	return 0
}

// toErrno is errno for an error that may already be one.
func toErrno(err error) syscall.Errno {
	var en syscall.Errno
	if errors.As(err, &en) {
		return en
	}
	return errno(err)
}

// createMode is the mode to ask the server for a new object in dir. With
// ACLs the kernel leaves the umask to the file system (FUSE_DONT_MASK, see
// MountOptions), as a local file system applies it: not at all in a
// directory with a default ACL, where the server's file system makes the
// permissions from the ACL and the mode asked, and the caller's umask
// anywhere else.
func (f *FS) createMode(ctx context.Context, dir *object, mode, umask uint32) uint32 {
	if f.acl == nil {
		return mode // the kernel applied the umask
	}
	if f.usesACLs() {
		if c, err := f.acls(ctx, dir); err == nil && len(c.dfault) > 0 {
			return mode
		}
	}
	return mode &^ umask
}
