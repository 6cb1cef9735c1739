package nfs3

import (
	"context"
	"errors"
	"time"

	"github.com/rdmafs/rdmafs/sunrpc"
	"github.com/rdmafs/rdmafs/sunrpc/xdr"
)

// DefaultJukeboxDelay is how long a client waits before it asks again
// after NFS3ERR_JUKEBOX unless its ClientConfig says otherwise: the Linux
// client's NFS_JUKEBOX_RETRY_TIME, which no mount option changes.
const DefaultJukeboxDelay = 5 * time.Second

// ClientConfig is what a Client may be told beyond its RPC client. The
// zero value is the Linux client's behaviour.
type ClientConfig struct {
	// JukeboxDelay is how long a call waits before it is sent again
	// after the server answered NFS3ERR_JUKEBOX ("busy, ask later");
	// 0 means DefaultJukeboxDelay.
	JukeboxDelay time.Duration
}

// Client calls the NFSv3 procedures of one server. It is safe for
// concurrent use.
type Client struct {
	caller
}

// NewClient returns a Client that calls through rpc, which must be set up
// for Program and Version.
func NewClient(rpc *sunrpc.Client, cfg ClientConfig) *Client {
	return &Client{caller: newCaller(rpc, cfg, ProcNames)}
}

// answered reports whether err is the server's status, whose failure
// results the decoder of finish then holds: a failed call that changes a
// directory still says what the directory is like afterwards, which the
// caller must not ignore (the kernel client does not).
func answered(err error) bool {
	var st Status
	return errors.As(err, &st)
}

// finishWcc is finish for the procedures whose results, OK or not, are
// the directory's or file's wcc_data alone (SETATTR, REMOVE, RMDIR): it
// decodes them into wcc.
func (c *Client) finishWcc(ctx context.Context, call *sunrpc.Call, e xdr.Encoder, wcc *Wcc) error {
	d, err := c.finish(ctx, call, e)
	if err != nil {
		if answered(err) {
			getWcc(&d, wcc)
		}
		return err
	}
	getWcc(&d, wcc)
	return c.check(int(call.Proc), &d)
}

// Null calls NULL, to see that the server answers.
func (c *Client) Null(ctx context.Context) error {
	call, e := c.start(ProcNull, nil)
	defer call.Release()
	call.SetArgs(e)
	return c.rpc.Do(ctx, call)
}

// Getattr returns the attributes of fh.
func (c *Client) Getattr(ctx context.Context, cred *sunrpc.Cred, fh *FH, attr *Fattr) error {
	call, e := c.start(ProcGetattr, cred)
	defer call.Release()
	putFH(&e, fh)
	d, err := c.finish(ctx, call, e)
	if err != nil {
		return err
	}
	getFattr(&d, attr)
	return c.check(ProcGetattr, &d)
}

// Setattr sets the attributes of fh. With guard, the server refuses
// (NFS3ERR_NOT_SYNC) unless the file's ctime is *guard.
func (c *Client) Setattr(ctx context.Context, cred *sunrpc.Cred, fh *FH, attr *Sattr, guard *Time, wcc *Wcc) error {
	call, e := c.start(ProcSetattr, cred)
	defer call.Release()
	putFH(&e, fh)
	putSattr(&e, attr)
	e.Bool(guard != nil)
	if guard != nil {
		putTime(&e, *guard)
	}
	return c.finishWcc(ctx, call, e, wcc)
}

// LookupResult is what LOOKUP returns.
type LookupResult struct {
	FH         FH
	Attr       Fattr
	HasAttr    bool
	DirAttr    Fattr
	HasDirAttr bool
}

// Lookup looks name up in dir.
func (c *Client) Lookup(ctx context.Context, cred *sunrpc.Cred, dir *FH, name string, res *LookupResult) error {
	call, e := c.start(ProcLookup, cred)
	defer call.Release()
	putDirOp(&e, dir, name)
	d, err := c.finish(ctx, call, e)
	if err != nil {
		if answered(err) {
			res.HasDirAttr = getPostOpAttr(&d, &res.DirAttr)
		}
		return err
	}
	getFH(&d, &res.FH)
	res.HasAttr = getPostOpAttr(&d, &res.Attr)
	res.HasDirAttr = getPostOpAttr(&d, &res.DirAttr)
	if d.Err() == nil && res.FH.IsZero() {
		d.Fail(errEmptyHandle)
	}
	return c.check(ProcLookup, &d)
}

// Access asks which of the ACCESS bits in mask the caller has on fh, and
// returns the bits granted.
func (c *Client) Access(ctx context.Context, cred *sunrpc.Cred, fh *FH, mask uint32, attr *Fattr) (granted uint32, hasAttr bool, err error) {
	call, e := c.start(ProcAccess, cred)
	defer call.Release()
	putFH(&e, fh)
	e.Uint32(mask)
	d, err := c.finish(ctx, call, e)
	if err != nil {
		return 0, false, err
	}
	hasAttr = getPostOpAttr(&d, attr)
	granted = d.Uint32()
	return granted & mask, hasAttr, c.check(ProcAccess, &d)
}

// Readlink returns the target of the symbolic link fh.
func (c *Client) Readlink(ctx context.Context, cred *sunrpc.Cred, fh *FH) (string, error) {
	call, e := c.start(ProcReadlink, cred)
	defer call.Release()
	putFH(&e, fh)
	call.ReplyPayload = MaxPathLen
	d, err := c.finish(ctx, call, e)
	if err != nil {
		return "", err
	}
	var attr Fattr
	getPostOpAttr(&d, &attr)
	target := ddpOpaque(&d, &call.Reply, MaxPathLen)
	if err := c.check(ProcReadlink, &d); err != nil {
		return "", err
	}
	return string(target), nil
}

// ddpOpaque decodes a variable-length opaque result of at most max bytes
// that a transport may have placed apart from the reply body: its length
// stays in the body, its bytes are then in the reply's Payload.
func ddpOpaque(d *xdr.Decoder, r *sunrpc.Reply, max int) []byte {
	if r.Payload == nil {
		return d.Opaque(max)
	}
	n := d.Uint32()
	if d.Err() != nil {
		return nil
	}
	if uint64(n) > uint64(max) || int(n) > len(r.Payload) {
		d.Fail(errPayloadLength(n, len(r.Payload), max))
		return nil
	}
	return r.Payload[:n]
}
