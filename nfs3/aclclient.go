package nfs3

import (
	"context"
	"fmt"

	"github.com/rdmafs/rdmafs/nfs3/acl"
	"github.com/rdmafs/rdmafs/sunrpc"
)

// ACLClient calls the NFSACL v3 procedures (GETACL, SETACL; package acl)
// of one server. The Linux client sends them on its NFS connection, and so
// may this one: give NewACLClient the NFS RPC client's Sibling for
// acl.Program and acl.Version. It is safe for concurrent use.
type ACLClient struct {
	caller
}

// NewACLClient returns an ACLClient that calls through rpc.
func NewACLClient(rpc *sunrpc.Client, cfg ClientConfig) *ACLClient {
	return &ACLClient{caller: newCaller(rpc, cfg, acl.ProcNames)}
}

// aclReplyMax bounds a GETACL reply: the RPC header, the status, the
// attributes and two ACLs of acl.MaxEntries entries, on a transport that
// needs to know beforehand (RPC-over-RDMA's reply chunk).
const aclReplyMax = 512 + 2*(8+12*acl.MaxEntries)

// Null calls NULL: whether the server offers NFSACL (a server without it
// answers PROG_UNAVAIL).
func (c *ACLClient) Null(ctx context.Context) error {
	call := c.rpc.NewCall(acl.ProcNull, nil)
	defer call.Release()
	return c.rpc.Do(ctx, call)
}

// GetACL returns the ACLs of fh that mask asks for (acl.MaskACL,
// acl.MaskDefault and their counts) and, if the server sent them, fh's
// attributes.
func (c *ACLClient) GetACL(ctx context.Context, cred *sunrpc.Cred, fh *FH, mask uint32, res *acl.Result, attr *Fattr) (hasAttr bool, err error) {
	call, e := c.start(acl.ProcGetACL, cred)
	defer call.Release()
	acl.PutGetArgs(&e, fh.Bytes(), mask)
	call.ReplyMax = aclReplyMax
	d, err := c.finish(ctx, call, e)
	if err != nil {
		if answered(err) {
			hasAttr = getPostOpAttr(&d, attr)
		}
		return hasAttr, err
	}
	hasAttr = getPostOpAttr(&d, attr)
	acl.GetResult(&d, res)
	if d.Err() == nil {
		for _, a := range []acl.ACL{res.Access, res.Default} {
			if err := a.Valid(); err != nil {
				d.Fail(err)
			}
		}
	}
	return hasAttr, c.check(acl.ProcGetACL, &d)
}

// SetACL sets the ACLs of fh that args.Mask names (an empty one is
// removed) and returns fh's attributes afterwards if the server sent
// them. uid and gid are fh's owner's, which the Linux client sends in the
// owner's entries.
func (c *ACLClient) SetACL(ctx context.Context, cred *sunrpc.Cred, fh *FH, args *acl.SetArgs, uid, gid uint32, attr *Fattr) (hasAttr bool, err error) {
	call, e := c.start(acl.ProcSetACL, cred)
	defer call.Release()
	a := *args
	a.FH = fh.Bytes()
	if err := acl.PutSetArgs(&e, &a, uid, gid); err != nil {
		return false, fmt.Errorf("nfs3: SETACL: %w", err)
	}
	d, err := c.finish(ctx, call, e)
	if answered(err) || err == nil {
		hasAttr = getPostOpAttr(&d, attr)
	}
	if err != nil {
		return hasAttr, err
	}
	return hasAttr, c.check(acl.ProcSetACL, &d)
}
