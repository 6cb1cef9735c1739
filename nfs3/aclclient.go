package nfs3

import (
	"context"
	"fmt"
	"time"

	"github.com/rdmafs/rdmafs/nfs3/acl"
	"github.com/rdmafs/rdmafs/sunrpc"
	"github.com/rdmafs/rdmafs/sunrpc/xdr"
)

// ACLClient calls the NFSACL v3 procedures (GETACL, SETACL; package acl)
// of one server. The Linux client sends them on its NFS connection, and so
// may this one: give NewACLClient the NFS RPC client's Sibling for
// acl.Program and acl.Version. It is safe for concurrent use.
type ACLClient struct {
	rpc          *sunrpc.Client
	jukeboxDelay time.Duration
}

// NewACLClient returns an ACLClient that calls through rpc.
func NewACLClient(rpc *sunrpc.Client, cfg ClientConfig) *ACLClient {
	c := &ACLClient{rpc: rpc, jukeboxDelay: cfg.JukeboxDelay}
	if c.jukeboxDelay <= 0 {
		c.jukeboxDelay = DefaultJukeboxDelay
	}
	return c
}

// RPC returns the underlying RPC client.
func (c *ACLClient) RPC() *sunrpc.Client { return c.rpc }

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
	call := c.rpc.NewCall(acl.ProcGetACL, cred)
	defer call.Release()
	e := call.Args()
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
	call := c.rpc.NewCall(acl.ProcSetACL, cred)
	defer call.Release()
	e := call.Args()
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

// finish is Client.finish for NFSACL: it sends the call and returns a
// decoder of the results after the status, which is the error unless OK.
func (c *ACLClient) finish(ctx context.Context, call *sunrpc.Call, e xdr.Encoder) (xdr.Decoder, error) {
	call.SetArgs(e)
	for {
		if err := c.rpc.Do(ctx, call); err != nil {
			return xdr.Decoder{}, err
		}
		d := xdr.NewDecoder(call.Reply.Body)
		st := Status(d.Uint32())
		if err := d.Err(); err != nil {
			return d, c.check(int(call.Proc), &d)
		}
		if st == OK {
			return d, nil
		}
		if st != ErrJukebox {
			return d, st
		}
		timer := time.NewTimer(c.jukeboxDelay)
		select {
		case <-timer.C:
		case <-ctx.Done():
			timer.Stop()
			return d, ctx.Err()
		}
		c.rpc.Reissue(call)
	}
}

// check returns the decoder's error as a malformed-reply error of proc.
func (c *ACLClient) check(proc int, d *xdr.Decoder) error {
	if err := d.Err(); err != nil {
		return fmt.Errorf("%w: %s: %v", ErrBadReply, acl.ProcNames[proc], err)
	}
	return nil
}
