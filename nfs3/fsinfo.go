package nfs3

import (
	"context"

	"github.com/rdmafs/rdmafs/sunrpc"
)

// Fsstat returns the file system's space and file counts.
func (c *Client) Fsstat(ctx context.Context, cred *sunrpc.Cred, root *FH) (FSStat, error) {
	call, e := c.start(ProcFsstat, cred)
	defer call.Release()
	putFH(&e, root)
	var st FSStat
	d, err := c.finish(ctx, call, e)
	if err != nil {
		return st, err
	}
	var attr Fattr
	getPostOpAttr(&d, &attr)
	st.TBytes, st.FBytes, st.ABytes = d.Uint64(), d.Uint64(), d.Uint64()
	st.TFiles, st.FFiles, st.AFiles = d.Uint64(), d.Uint64(), d.Uint64()
	st.Invarsec = d.Uint32()
	return st, c.check(ProcFsstat, &d)
}

// Fsinfo returns the server's limits and preferences for the file system.
func (c *Client) Fsinfo(ctx context.Context, cred *sunrpc.Cred, root *FH) (FSInfo, error) {
	call, e := c.start(ProcFsinfo, cred)
	defer call.Release()
	putFH(&e, root)
	var fi FSInfo
	d, err := c.finish(ctx, call, e)
	if err != nil {
		return fi, err
	}
	var attr Fattr
	getPostOpAttr(&d, &attr)
	fi.Rtmax, fi.Rtpref, fi.Rtmult = d.Uint32(), d.Uint32(), d.Uint32()
	fi.Wtmax, fi.Wtpref, fi.Wtmult = d.Uint32(), d.Uint32(), d.Uint32()
	fi.Dtpref = d.Uint32()
	fi.MaxFileSize = d.Uint64()
	fi.TimeDelta = getTime(&d)
	fi.Properties = d.Uint32()
	return fi, c.check(ProcFsinfo, &d)
}

// Pathconf returns the POSIX limits of the file system of fh.
func (c *Client) Pathconf(ctx context.Context, cred *sunrpc.Cred, fh *FH) (PathConf, error) {
	call, e := c.start(ProcPathconf, cred)
	defer call.Release()
	putFH(&e, fh)
	var pc PathConf
	d, err := c.finish(ctx, call, e)
	if err != nil {
		return pc, err
	}
	var attr Fattr
	getPostOpAttr(&d, &attr)
	pc.LinkMax, pc.NameMax = d.Uint32(), d.Uint32()
	pc.NoTrunc, pc.ChownRestricted = d.Bool(), d.Bool()
	pc.CaseInsensitive, pc.CasePreserving = d.Bool(), d.Bool()
	return pc, c.check(ProcPathconf, &d)
}
