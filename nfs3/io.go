package nfs3

import (
	"context"
	"fmt"

	"github.com/rdmafs/rdmafs/sunrpc"
)

// ReadResult is what READ returns. Data points into the reply, which stays
// valid until Release.
type ReadResult struct {
	Attr    Fattr
	HasAttr bool
	EOF     bool
	Data    []byte
	call    *sunrpc.Call
}

// Release gives back the reply that holds Data.
func (r *ReadResult) Release() {
	if r.call != nil {
		r.call.Release()
		r.call = nil
	}
	r.Data = nil
}

// Read reads up to count bytes of fh at off into res; the caller must
// Release res when it is done with res.Data, whatever the error.
func (c *Client) Read(ctx context.Context, cred *sunrpc.Cred, fh *FH, off uint64, count uint32, res *ReadResult) error {
	return c.read(ctx, cred, fh, off, count, nil, res)
}

// ReadInto is Read of len(dest) bytes that asks the transport to place
// the data in dest (sunrpc.Call.ReplyInto): where it does, res.Data is a
// prefix of dest, and otherwise it lies in the reply as Read's does.
func (c *Client) ReadInto(ctx context.Context, cred *sunrpc.Cred, fh *FH, off uint64, dest []byte, res *ReadResult) error {
	return c.read(ctx, cred, fh, off, uint32(len(dest)), dest, res)
}

func (c *Client) read(ctx context.Context, cred *sunrpc.Cred, fh *FH, off uint64, count uint32, into []byte, res *ReadResult) error {
	call, e := c.start(ProcRead, cred)
	res.call = call
	putFH(&e, fh)
	e.Uint64(off)
	e.Uint32(count)
	call.ReplyPayload = int(count)
	call.ReplyInto = into
	d, err := c.finish(ctx, call, e)
	if err != nil {
		return err
	}
	res.HasAttr = getPostOpAttr(&d, &res.Attr)
	n := d.Uint32()
	res.EOF = d.Bool()
	res.Data = ddpOpaque(&d, &call.Reply, int(count))
	if d.Err() == nil && int(n) != len(res.Data) {
		d.Fail(fmt.Errorf("count %d but %d bytes of data", n, len(res.Data)))
	}
	return c.check(ProcRead, &d)
}

// WriteResult is what WRITE returns.
type WriteResult struct {
	Wcc       Wcc
	Count     uint32
	Committed StableHow
	Verf      Verf
}

// Write writes data to fh at off with the durability stable asks for. The
// data is the call's payload: it is not copied, and must not change until
// Write returns.
func (c *Client) Write(ctx context.Context, cred *sunrpc.Cred, fh *FH, off uint64, data []byte, stable StableHow, res *WriteResult) error {
	call, e := c.start(ProcWrite, cred)
	defer call.Release()
	putFH(&e, fh)
	e.Uint64(off)
	e.Uint32(uint32(len(data)))
	e.Uint32(uint32(stable))
	e.Uint32(uint32(len(data)))
	call.Payload = data
	d, err := c.finish(ctx, call, e)
	if err != nil {
		return err
	}
	getWcc(&d, &res.Wcc)
	res.Count = d.Uint32()
	res.Committed = StableHow(d.Uint32())
	getVerf(&d, &res.Verf)
	if d.Err() == nil {
		if int(res.Count) > len(data) {
			d.Fail(fmt.Errorf("wrote %d bytes of %d", res.Count, len(data)))
		} else if res.Committed > FileSync {
			d.Fail(fmt.Errorf("committed %v", res.Committed))
		}
	}
	return c.check(ProcWrite, &d)
}

// Commit asks the server to make count bytes of fh at off (0: to the end)
// durable and returns its write verifier.
func (c *Client) Commit(ctx context.Context, cred *sunrpc.Cred, fh *FH, off uint64, count uint32, wcc *Wcc) (Verf, error) {
	call, e := c.start(ProcCommit, cred)
	defer call.Release()
	putFH(&e, fh)
	e.Uint64(off)
	e.Uint32(count)
	var verf Verf
	d, err := c.finish(ctx, call, e)
	if err != nil {
		return verf, err
	}
	getWcc(&d, wcc)
	getVerf(&d, &verf)
	return verf, c.check(ProcCommit, &d)
}
