package server

import (
	"errors"

	"golang.org/x/sys/unix"

	"github.com/rdmafs/rdmafs/nfs3"
	"github.com/rdmafs/rdmafs/nfs3/acl"
	"github.com/rdmafs/rdmafs/sunrpc"
	"github.com/rdmafs/rdmafs/sunrpc/xdr"
)

// The NFSACL side protocol (program 100227, version 3), as knfsd serves it
// (fs/nfsd/nfs3acl.c): GETACL reads a file's POSIX ACLs and SETACL writes
// them, as the system.posix_acl_access and system.posix_acl_default
// extended attributes of the real file, under the caller's credentials and
// the export's rules like every NFS procedure. The Linux client sends its
// NFSACL calls on the NFS connection, so the program shares NFS's port.

// registerNFSACL serves NFSACL v3 on rpc.
func (s *Server) registerNFSACL(rpc *sunrpc.Server) {
	procs := make([]sunrpc.Proc, acl.ProcSetACL+1)
	procs[acl.ProcNull] = sunrpc.NullProc
	procs[acl.ProcGetACL] = sunrpc.Proc{Front: s.aclFront, Serve: s.serveACL}
	procs[acl.ProcSetACL] = sunrpc.Proc{Front: s.aclFront, Serve: s.serveACL}
	rpc.Register(acl.Program, acl.Version, procs)
}

// aclCall is a GETACL or SETACL call the front let through.
type aclCall struct {
	cred cred
	args acl.SetArgs // GETACL's handle and mask too
}

// aclFront applies the export's rules and decodes the arguments, as
// nfsFront does for NFS.
func (s *Server) aclFront(r *sunrpc.Request) []byte {
	if !r.Peer.Admitted {
		return deniedReply(r.Xid, sunrpc.RejectAuthError, sunrpc.AuthTooWeak)
	}
	if !r.Peer.Secure && !s.opts.Export.Insecure {
		return aclStatusReply(r.Xid, nfs3.ErrPerm, nil)
	}
	c := &aclCall{cred: s.opts.Export.squash(r.Cred)}
	d := xdr.NewDecoder(r.Args)
	if r.Proc == acl.ProcGetACL {
		c.args.FH, c.args.Mask = acl.GetGetArgs(&d)
	} else {
		acl.GetSetArgs(&d, &c.args)
	}
	if d.Err() != nil || d.Len() != 0 || r.Proc == acl.ProcSetACL && c.args.Mask&^acl.MaskAll != 0 {
		return garbageArgs(r.Xid)
	}
	switch {
	case !wellFormedHandle(c.args.FH):
		return aclStatusReply(r.Xid, nfs3.ErrStale, nil)
	case c.args.Mask&^acl.MaskAll != 0:
		return aclStatusReply(r.Xid, nfs3.ErrInval, nil)
	}
	// The arguments alias the call message, which is not ours after the
	// front.
	c.args.FH = append([]byte(nil), c.args.FH...)
	r.State = c
	return nil
}

// serveACL answers a GETACL or SETACL call in a worker.
func (s *Server) serveACL(r *sunrpc.Request) []byte {
	c := r.State.(*aclCall)
	n, err := s.open(c.args.FH)
	if err != nil {
		return aclStatusReply(r.Xid, nfs3.ErrStale, nil)
	}
	defer n.close()
	if r.Proc == acl.ProcGetACL {
		return s.getACL(r.Xid, c, n)
	}
	return s.setACL(r.Xid, c, n)
}

// aclStatusReply is a reply of a status and the file's attributes: every
// SETACL reply, and GETACL's when it fails.
func aclStatusReply(xid uint32, st nfs3.Status, attr *unix.Statx_t) []byte {
	out := successHeader(xid)
	putStatus(out, st)
	putPostOpAttr(out, attr)
	return out.Buf
}

// getACL answers GETACL as knfsd does: a file without an access ACL has the
// minimal one of its mode; a directory without a default ACL, and every
// other file, an empty default ACL.
func (s *Server) getACL(xid uint32, c *aclCall, n *node) []byte {
	res := acl.Result{Mask: c.args.Mask}
	err := s.self.runAs(c.cred, func() error {
		var err error
		if c.args.Mask&(acl.MaskACL|acl.MaskACLCount) != 0 {
			res.Access, err = readACL(n, acl.XattrAccess)
			if err != nil {
				return err
			}
			if len(res.Access) == 0 {
				res.Access = acl.FromMode(uint32(n.st.Mode))
			}
		}
		if c.args.Mask&(acl.MaskDefault|acl.MaskDefaultCount) != 0 && n.isDir() {
			res.Default, err = readACL(n, acl.XattrDefault)
		}
		return err
	})
	if err != nil {
		return aclStatusReply(xid, statusOf(err), &n.st)
	}
	out := successHeader(xid)
	putStatus(out, nfs3.OK)
	putPostOpAttr(out, &n.st)
	if err := acl.PutResult(out, &res, n.st.Uid, n.st.Gid); err != nil {
		return aclStatusReply(xid, nfs3.ErrInval, &n.st)
	}
	return out.Buf
}

// maxACLXattr is the size of the xattr of an ACL of acl.MaxEntries entries.
const maxACLXattr = 4 + 8*acl.MaxEntries

// readACL reads the ACL in the extended attribute name of n: none if the
// file has none, or is a symbolic link, or its file system keeps no ACLs.
func readACL(n *node, name string) (acl.ACL, error) {
	if n.isLink() {
		return nil, nil
	}
	buf := make([]byte, maxACLXattr)
	k, err := unix.Getxattr(procFD(n.fd), name, buf)
	switch {
	case errors.Is(err, unix.ENODATA), errors.Is(err, unix.EOPNOTSUPP):
		return nil, nil
	case errors.Is(err, unix.ERANGE):
		return nil, unix.ENOSPC // more entries than NFSACL can carry
	case err != nil:
		return nil, err
	}
	return acl.FromXattr(buf[:k])
}

// setACL answers SETACL as knfsd does: the access ACL is set (an empty one
// removed), then the default ACL (an empty one removed from a directory;
// a non-directory can have none). The local file system checks that the
// caller owns the file and updates the mode bits from the access ACL.
func (s *Server) setACL(xid uint32, c *aclCall, n *node) []byte {
	if s.opts.ReadOnly {
		return aclStatusReply(xid, nfs3.ErrROFS, &n.st)
	}
	if n.isLink() {
		return aclStatusReply(xid, nfs3.ErrNotSupp, &n.st)
	}
	for _, a := range []acl.ACL{c.args.Access, c.args.Default} {
		if err := a.Valid(); err != nil {
			return aclStatusReply(xid, nfs3.ErrInval, &n.st)
		}
	}
	err := s.self.runAs(c.cred, func() error {
		if err := writeACL(n, acl.XattrAccess, c.args.Access); err != nil {
			return err
		}
		if !n.isDir() {
			if len(c.args.Default) > 0 {
				return unix.EACCES // as set_posix_acl refuses it
			}
			return nil
		}
		return writeACL(n, acl.XattrDefault, c.args.Default)
	})
	return aclStatusReply(xid, statusOf(err), attrsOf(n.fd))
}

// writeACL sets the ACL in the extended attribute name of n, or removes it
// if a is empty (a file that has none is left as it is).
func writeACL(n *node, name string, a acl.ACL) error {
	if len(a) == 0 {
		err := unix.Removexattr(procFD(n.fd), name)
		if errors.Is(err, unix.ENODATA) {
			return nil
		}
		return err
	}
	return unix.Setxattr(procFD(n.fd), name, a.Xattr(), 0)
}

// hasDefaultACL reports whether the directory dir has a default ACL, which
// then decides the permissions of what is created in it instead of the
// umask.
func hasDefaultACL(dir *node) bool {
	n, err := unix.Getxattr(procFD(dir.fd), acl.XattrDefault, nil)
	return err == nil && n > 0
}
