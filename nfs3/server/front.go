package server

import (
	"errors"
	"fmt"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/rdmafs/rdmafs/nfs3"
	"github.com/rdmafs/rdmafs/sunrpc"
	"github.com/rdmafs/rdmafs/sunrpc/xdr"
)

// The numbers of the protocols the front answers (programs, procedures,
// statuses) are package nfs3's, those of RPC messages themselves package
// sunrpc's.

const (
	nobody = 65534 // knfsd's default anonuid and anongid

	// minCallLen is the smallest valid call: xid, mtype, rpcvers, prog, vers,
	// proc and two empty opaque_auth.
	minCallLen = 40
)

// errNotCall means the message is not an RPC call the front could even answer
// (too short, not a CALL, or a header field runs past the end). The transport
// should drop the connection: its byte stream can no longer be trusted.
var errNotCall = errors.New("server: not an RPC call message")

// rpcCall is a parsed call header.
type rpcCall struct {
	xid, prog, vers, proc uint32
	cred                  cred
	args                  []byte // procedure arguments; aliases the message
}

// parseCall parses the header of one RPC call message (without record mark).
// It returns either the call, or the reply the front must send instead (an
// RPC-level refusal), or errNotCall. It never panics and allocates only the
// credential's group list (at most sunrpc.MaxGroups entries).
func parseCall(msg []byte) (*rpcCall, []byte, error) {
	r := xdr.NewDecoder(msg)
	xid := r.Uint32()
	mtype := r.Uint32()
	if r.Err() != nil || mtype != sunrpc.MsgCall {
		return nil, nil, errNotCall
	}
	if v := r.Uint32(); r.Err() == nil && v != sunrpc.RPCVersion {
		return nil, deniedReply(xid, sunrpc.RejectRPCMismatch, sunrpc.RPCVersion, sunrpc.RPCVersion), nil
	}
	c := &rpcCall{xid: xid}
	c.prog = r.Uint32()
	c.vers = r.Uint32()
	c.proc = r.Uint32()
	credFlavor := r.Uint32()
	credLen := r.Uint32()
	if r.Err() != nil {
		return nil, nil, errNotCall
	}
	if credLen > sunrpc.MaxAuthBody {
		return nil, deniedReply(xid, sunrpc.RejectAuthError, sunrpc.AuthBadCred), nil
	}
	credBody := r.Fixed(int(credLen))
	r.Uint32() // verifier flavor: AUTH_NONE and AUTH_SYS calls carry no verifier worth checking
	verfLen := r.Uint32()
	if r.Err() != nil {
		return nil, nil, errNotCall
	}
	if verfLen > sunrpc.MaxAuthBody {
		return nil, deniedReply(xid, sunrpc.RejectAuthError, sunrpc.AuthBadVerf), nil
	}
	r.Fixed(int(verfLen))
	if r.Err() != nil || r.Offset() < minCallLen {
		return nil, nil, errNotCall
	}
	c.args = msg[r.Offset():]

	switch credFlavor {
	case uint32(sunrpc.AuthNone):
		c.cred = anonymousCred()
	case uint32(sunrpc.AuthSys):
		cr, ok := parseAuthSys(credBody)
		if !ok {
			return nil, deniedReply(xid, sunrpc.RejectAuthError, sunrpc.AuthBadCred), nil
		}
		c.cred = cr
	default:
		return nil, deniedReply(xid, sunrpc.RejectAuthError, sunrpc.AuthBadCred), nil
	}

	var maxProc uint32
	switch c.prog {
	case nfs3.Program:
		if c.vers != nfs3.Version {
			return nil, acceptedReply(xid, sunrpc.ProgMismatch, nfs3.Version, nfs3.Version), nil
		}
		maxProc = nfs3.ProcCommit // the last
	case nfs3.MountProgram:
		if c.vers != nfs3.MountVersion {
			return nil, acceptedReply(xid, sunrpc.ProgMismatch, nfs3.MountVersion, nfs3.MountVersion), nil
		}
		maxProc = nfs3.MountProcExport // the last
	default:
		return nil, acceptedReply(xid, sunrpc.ProgUnavail), nil
	}
	if c.proc > maxProc {
		return nil, acceptedReply(xid, sunrpc.ProcUnavail), nil
	}
	return c, nil, nil
}

// parseAuthSys decodes an authsys_parms body. The body must be exactly one
// well-formed authsys_parms: anything else is AUTH_BADCRED. The ids are the
// caller's claim; the export maps them (Export.squash).
func parseAuthSys(body []byte) (cred, bool) {
	r := xdr.NewDecoder(body)
	r.Uint32() // stamp
	r.Opaque(sunrpc.MaxMachineName)
	uid := r.Uint32()
	gid := r.Uint32()
	n := r.Uint32()
	if r.Err() != nil || n > sunrpc.MaxGroups {
		return cred{}, false
	}
	groups := make([]int, 0, n)
	for i := uint32(0); i < n; i++ {
		groups = append(groups, int(r.Uint32()))
	}
	if r.Err() != nil || r.Offset() != len(body) {
		return cred{}, false
	}
	return cred{uid: uid, gid: gid, groups: groups}, true
}

// anonymousCred is the identity of an AUTH_NONE call before the export maps
// it: ids no one has, which Export.squash makes anonymous.
func anonymousCred() cred { return cred{uid: ^uint32(0), gid: ^uint32(0)} }

// acceptedReply builds a MSG_ACCEPTED reply with an AUTH_NONE verifier,
// followed by the given words (the body for sunrpc.Success, or the version
// range for sunrpc.ProgMismatch).
func acceptedReply(xid uint32, stat sunrpc.AcceptStat, words ...uint32) []byte {
	w := xdr.Encoder{Buf: make([]byte, 0, 24+4*len(words))}
	w.Uint32(xid)
	w.Uint32(sunrpc.MsgReply)
	w.Uint32(sunrpc.MsgAccepted)
	w.Uint32(uint32(sunrpc.AuthNone))
	w.Uint32(0)
	w.Uint32(uint32(stat))
	for _, v := range words {
		w.Uint32(v)
	}
	return w.Buf
}

// deniedReply builds a MSG_DENIED reply: RPC_MISMATCH with the version
// range, or AUTH_ERROR with an auth_stat.
func deniedReply(xid, stat uint32, words ...uint32) []byte {
	w := xdr.Encoder{}
	w.Uint32(xid)
	w.Uint32(sunrpc.MsgReply)
	w.Uint32(sunrpc.MsgDenied)
	w.Uint32(stat)
	for _, v := range words {
		w.Uint32(v)
	}
	return w.Buf
}

// successHeader starts a successful reply; the procedure's result follows.
func successHeader(xid uint32) *xdr.Encoder {
	return &xdr.Encoder{Buf: acceptedReply(xid, sunrpc.Success)}
}

// inlineReply answers the calls that need neither the filesystem nor a
// worker: both NULL procedures and the MOUNT procedures other than MNT
// (which mountReply answers). It returns nil for the other calls.
func (ss *Session) inlineReply(c *rpcCall) []byte {
	switch {
	case c.proc == 0:
		return acceptedReply(c.xid, sunrpc.Success)
	case c.prog != nfs3.MountProgram:
		return nil
	}
	switch c.proc {
	case nfs3.MountProcDump:
		// The server keeps no mount list: an empty mountlist.
		return acceptedReply(c.xid, sunrpc.Success, 0)
	case nfs3.MountProcUmnt, nfs3.MountProcUmntAll:
		return acceptedReply(c.xid, sunrpc.Success)
	case nfs3.MountProcExport:
		// One export, "/", with the clients it allows as its groups, as
		// mountd lists them (showmount -e).
		w := successHeader(c.xid)
		w.Bool(true)
		w.Opaque([]byte("/"))
		for _, name := range ss.srv.opts.Export.clientNames(ss.peer.local) {
			w.Bool(true)
			w.Opaque([]byte(name))
		}
		w.Bool(false) // end of groups
		w.Bool(false) // no further export
		return w.Buf
	}
	return nil
}

// mountStatusReply is a MNT reply without a handle.
func mountStatusReply(xid uint32, status nfs3.MountStatus) []byte {
	w := successHeader(xid)
	w.Uint32(uint32(status))
	return w.Buf
}

// mountReply answers MOUNTPROC3_MNT: the handle of the export's root, or of a
// directory below it (knfsd's mountd mounts subdirectories of an export too),
// and AUTH_SYS. The path is looked up as the server, confined like every
// lookup (no symlinks, no other mounts, nothing outside the export).
func (s *Server) mountReply(xid uint32, dirpath string) []byte {
	rel, ok := mountPath(dirpath)
	if !ok {
		return mountStatusReply(xid, nfs3.MountErrNoEnt)
	}
	fh := s.rootHandle
	if rel != "." {
		fd, err := openat2(s.rootfd, rel, unix.O_PATH|unix.O_DIRECTORY, 0)
		if err != nil {
			return mountStatusReply(xid, mountStatus(err))
		}
		fh, err = s.handleAt(fd, "")
		unix.Close(fd)
		if err != nil {
			return mountStatusReply(xid, mountStatus(err))
		}
	}
	w := successHeader(xid)
	w.Uint32(uint32(nfs3.MountOK))
	w.Opaque(fh)
	w.Uint32(1) // auth_flavors: [AUTH_SYS]
	w.Uint32(uint32(sunrpc.AuthSys))
	return w.Buf
}

// mountPath turns a MOUNT dirpath (absolute, within the export, which is
// "/") into a path relative to the export's root: "." for the root itself.
// Empty components and "." are dropped; ".." is resolved by the confined
// lookup, which refuses to climb out. A relative path is not an export,
// but the empty path is the root, as nfs-utils' mountd takes it (libnfs
// sends it for nfs://host/file).
func mountPath(dirpath string) (string, bool) {
	if dirpath == "" {
		return ".", true
	}
	if !strings.HasPrefix(dirpath, "/") || strings.IndexByte(dirpath, 0) >= 0 {
		return "", false
	}
	var parts []string
	for p := range strings.SplitSeq(dirpath, "/") {
		if p != "" && p != "." {
			parts = append(parts, p)
		}
	}
	if len(parts) == 0 {
		return ".", true
	}
	return strings.Join(parts, "/"), true
}

// mountStatus maps a lookup error to a mountstat3.
func mountStatus(err error) nfs3.MountStatus {
	switch {
	case errors.Is(err, unix.ENOENT):
		return nfs3.MountErrNoEnt
	case errors.Is(err, unix.ENOTDIR):
		return nfs3.MountErrNotDir
	case errors.Is(err, unix.ENAMETOOLONG):
		return nfs3.MountErrNameTooLong
	case errors.Is(err, unix.EACCES), errors.Is(err, unix.EXDEV), errors.Is(err, unix.ELOOP), errors.Is(err, errOtherMount):
		return nfs3.MountErrAcces
	}
	return nfs3.MountErrIO
}

// garbageArgs is the reply to a call whose arguments do not decode.
func garbageArgs(xid uint32) []byte { return acceptedReply(xid, sunrpc.GarbageArgs) }

func (c *rpcCall) String() string {
	return fmt.Sprintf("xid %#x prog %d vers %d proc %d", c.xid, c.prog, c.vers, c.proc)
}
