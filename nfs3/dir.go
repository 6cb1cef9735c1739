package nfs3

import (
	"context"

	"github.com/rdmafs/rdmafs/sunrpc"
	"github.com/rdmafs/rdmafs/sunrpc/xdr"
)

// replyOverhead bounds what a directory reply adds to the count the call
// asks for: the RPC reply header and the transport's own.
const replyOverhead = 512

// DirPage is what READDIR and READDIRPLUS return besides the entries.
type DirPage struct {
	DirAttr    Fattr
	HasDirAttr bool
	Verf       Verf // the cookie verifier to send with the next page
	EOF        bool
	Entries    int
}

// DirEntry is one entry of a directory page. Name points into the reply
// and is valid only during the callback that receives it. Attr and FH are
// set by READDIRPLUS when the server sends them.
type DirEntry struct {
	FileID  uint64
	Name    []byte
	Cookie  uint64
	Attr    Fattr
	HasAttr bool
	FH      FH
	HasFH   bool
}

// Readdir reads a page of entries of dir after cookie, of at most count
// bytes, calling fn for each.
func (c *Client) Readdir(ctx context.Context, cred *sunrpc.Cred, dir *FH, cookie uint64, verf Verf, count uint32, fn func(*DirEntry)) (DirPage, error) {
	call, e := c.start(ProcReaddir, cred)
	defer call.Release()
	putFH(&e, dir)
	e.Uint64(cookie)
	e.Fixed(verf[:])
	e.Uint32(count)
	call.ReplyMax = int(count) + replyOverhead
	return c.finishDir(ctx, call, e, false, fn)
}

// Readdirplus reads a page of entries of dir after cookie, with their
// attributes and handles: dircount bounds the names and cookies, maxcount
// the whole reply. It calls fn for each entry.
func (c *Client) Readdirplus(ctx context.Context, cred *sunrpc.Cred, dir *FH, cookie uint64, verf Verf, dircount, maxcount uint32, fn func(*DirEntry)) (DirPage, error) {
	call, e := c.start(ProcReaddirplus, cred)
	defer call.Release()
	putFH(&e, dir)
	e.Uint64(cookie)
	e.Fixed(verf[:])
	e.Uint32(dircount)
	e.Uint32(maxcount)
	call.ReplyMax = int(maxcount) + replyOverhead
	return c.finishDir(ctx, call, e, true, fn)
}

func (c *Client) finishDir(ctx context.Context, call *sunrpc.Call, e xdr.Encoder, plus bool, fn func(*DirEntry)) (DirPage, error) {
	var page DirPage
	d, err := c.finish(ctx, call, e)
	if err != nil {
		return page, err
	}
	page.HasDirAttr = getPostOpAttr(&d, &page.DirAttr)
	getVerf(&d, &page.Verf)
	var ent DirEntry
	// Each entry takes at least 24 bytes of the reply, so the loop ends
	// with the reply even if the server never says it is the last.
	for d.Bool() {
		ent = DirEntry{}
		ent.FileID = d.Uint64()
		ent.Name = getName(&d)
		ent.Cookie = d.Uint64()
		if plus {
			ent.HasAttr = getPostOpAttr(&d, &ent.Attr)
			ent.HasFH = getPostOpFH(&d, &ent.FH)
		}
		if d.Err() != nil {
			break
		}
		page.Entries++
		fn(&ent)
	}
	page.EOF = d.Bool()
	if err := c.check(int(call.Proc), &d); err != nil {
		return page, err
	}
	return page, nil
}
