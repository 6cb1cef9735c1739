package nfs3

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/rdmafs/rdmafs/nfs3/acl"
	"github.com/rdmafs/rdmafs/sunrpc"
	"github.com/rdmafs/rdmafs/sunrpc/xdr"
)

func newCannedACLClient(body []byte) *ACLClient {
	return newCannedACLClientWith(ClientConfig{}, body)
}

func newCannedACLClientWith(cfg ClientConfig, body []byte) *ACLClient {
	t := &cannedTransport{body: body}
	rpc := sunrpc.NewClient(t, sunrpc.Config{Prog: acl.Program, Vers: acl.Version, ProcNames: acl.ProcNames,
		Auth: sunrpc.Auth{Flavor: sunrpc.AuthSys, Machine: "test"}})
	return NewACLClient(rpc, cfg)
}

// getACLReply is a GETACL result as knfsd sends it.
func getACLReply(access, dflt acl.ACL) []byte {
	var e xdr.Encoder
	e.Uint32(uint32(OK))
	e.Bool(true)
	fattrBytes(&e, TypeDir, 9, 4096)
	_ = acl.PutResult(&e, &acl.Result{Mask: acl.MaskACL | acl.MaskDefault, Access: access, Default: dflt}, 1000, 1000)
	return e.Buf
}

func TestGetACL(t *testing.T) {
	named := acl.ACL{ent(acl.TagUserObj, acl.UndefinedID, 7), ent(acl.TagUser, 1001, 5), ent(acl.TagGroupObj, acl.UndefinedID, 5), ent(acl.TagMask, acl.UndefinedID, 5), ent(acl.TagOther, acl.UndefinedID, 0)}
	c := newCannedACLClient(getACLReply(acl.FromMode(0o750), named))
	var res acl.Result
	var attr Fattr
	hasAttr, err := c.GetACL(context.Background(), nil, &testFH, acl.MaskACL|acl.MaskDefault, &res, &attr)
	if err != nil || !hasAttr || attr.FileID != 9 {
		t.Fatalf("GETACL: %v, attributes %v %+v", err, hasAttr, attr)
	}
	if !slices.Equal(res.Access, acl.FromMode(0o750)) || !slices.Equal(res.Default, named) {
		t.Fatalf("GETACL: access %v default %v", res.Access, res.Default)
	}
	// An ACL Linux would refuse (a named user without a mask) is a
	// malformed reply, not something to hand the kernel.
	bad := acl.ACL{ent(acl.TagUserObj, 0, 7), ent(acl.TagUser, 5, 7), ent(acl.TagGroupObj, 0, 5), ent(acl.TagOther, 0, 0)}
	c = newCannedACLClient(getACLReply(bad, nil))
	if _, err := c.GetACL(context.Background(), nil, &testFH, acl.MaskACL|acl.MaskDefault, &res, &attr); err == nil {
		t.Fatal("GETACL accepted an invalid ACL")
	}
}

// FuzzACLReplies feeds arbitrary results to GETACL's and SETACL's
// decoders: none may panic, and an ACL GETACL accepts is one Linux
// accepts.
func FuzzACLReplies(f *testing.F) {
	f.Add(true, getACLReply(acl.FromMode(0o644), nil))
	f.Add(false, []byte{0, 0, 0, 1, 0, 0, 0, 0})
	f.Fuzz(func(t *testing.T, get bool, body []byte) {
		c := newCannedACLClientWith(ClientConfig{JukeboxDelay: time.Millisecond}, body)
		ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
		defer cancel()
		var attr Fattr
		if get {
			var res acl.Result
			if _, err := c.GetACL(ctx, nil, &testFH, acl.MaskACL|acl.MaskDefault, &res, &attr); err == nil {
				if res.Access.Valid() != nil || res.Default.Valid() != nil {
					t.Fatalf("GETACL accepted %v, %v", res.Access, res.Default)
				}
			}
			return
		}
		_, _ = c.SetACL(ctx, nil, &testFH, &acl.SetArgs{Mask: acl.MaskACL, Access: acl.FromMode(0o600)}, 0, 0, &attr)
	})
}

func ent(tag acl.Tag, id uint32, perm uint16) acl.Entry {
	return acl.Entry{Tag: tag, ID: id, Perm: perm}
}
