package nfs3

import (
	"context"
	"fmt"
	"time"

	"github.com/rdmafs/rdmafs/sunrpc"
	"github.com/rdmafs/rdmafs/sunrpc/xdr"
)

// caller is the call plumbing of the programs whose results begin with an
// NFS status: NFS itself (Client) and NFSACL (ACLClient), which the Linux
// client sends on the same connection and treats alike, NFS3ERR_JUKEBOX
// included.
type caller struct {
	rpc          *sunrpc.Client
	jukeboxDelay time.Duration
	procNames    []string // the program's procedures, for malformed-reply errors
}

// newCaller returns a caller that calls through rpc the program whose
// procedures procNames names.
func newCaller(rpc *sunrpc.Client, cfg ClientConfig, procNames []string) caller {
	c := caller{rpc: rpc, jukeboxDelay: cfg.JukeboxDelay, procNames: procNames}
	if c.jukeboxDelay <= 0 {
		c.jukeboxDelay = DefaultJukeboxDelay
	}
	return c
}

// RPC returns the underlying RPC client.
func (c *caller) RPC() *sunrpc.Client { return c.rpc }

// start returns a new call of proc and an encoder for its arguments.
func (c *caller) start(proc uint32, cred *sunrpc.Cred) (*sunrpc.Call, xdr.Encoder) {
	call := c.rpc.NewCall(proc, cred)
	return call, call.Args()
}

// finish sends the call with the arguments in e and returns a decoder of
// the results after the status. A status other than OK is returned as the
// error, and the decoder then holds the rest of the failure results.
func (c *caller) finish(ctx context.Context, call *sunrpc.Call, e xdr.Encoder) (xdr.Decoder, error) {
	call.SetArgs(e)
	for {
		if err := c.rpc.Do(ctx, call); err != nil {
			return xdr.Decoder{}, err
		}
		d := xdr.NewDecoder(call.Reply.Body)
		st := Status(d.Uint32())
		if d.Err() != nil {
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
func (c *caller) check(proc int, d *xdr.Decoder) error {
	if err := d.Err(); err != nil {
		return fmt.Errorf("%w: %s: %v", ErrBadReply, c.procNames[proc], err)
	}
	return nil
}
