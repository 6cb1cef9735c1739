package sunrpc

import (
	"errors"
	"fmt"

	"github.com/rdmafs/rdmafs/sunrpc/xdr"
)

// The server's side of RPC messages: the call header parsed, and the
// replies a server sends, refusals among them.

// minCallLen is the smallest valid call: xid, mtype, rpcvers, prog, vers,
// proc and two empty opaque_auth.
const minCallLen = 40

// NoID is the uid and gid of an AUTH_NONE call: ids no one has, which a
// service maps to its anonymous identity.
const NoID = ^uint32(0)

// errNotCall means the message is not an RPC call the server could even
// answer (too short, not a CALL, or a header field runs past the end). The
// transport drops the connection: its byte stream can no longer be
// trusted.
var errNotCall = errors.New("sunrpc: not an RPC call message")

// parseCall parses the header of one RPC call message (without record
// mark) into r. It returns the reply the server must send instead (an
// RPC-level refusal: RPC_MISMATCH, AUTH_BADCRED, AUTH_BADVERF), or
// errNotCall; the program, version and procedure are the dispatcher's to
// check. It never panics and allocates only the credential's group list
// (at most MaxGroups entries).
func parseCall(msg []byte, r *Request) ([]byte, error) {
	d := xdr.NewDecoder(msg)
	xid := d.Uint32()
	mtype := d.Uint32()
	if d.Err() != nil || mtype != MsgCall {
		return nil, errNotCall
	}
	if v := d.Uint32(); d.Err() == nil && v != RPCVersion {
		return DeniedReply(xid, RejectRPCMismatch, RPCVersion, RPCVersion), nil
	}
	r.Xid = xid
	r.Prog = d.Uint32()
	r.Vers = d.Uint32()
	r.Proc = d.Uint32()
	credFlavor := d.Uint32()
	credLen := d.Uint32()
	if d.Err() != nil {
		return nil, errNotCall
	}
	if credLen > MaxAuthBody {
		return DeniedReply(xid, RejectAuthError, AuthBadCred), nil
	}
	credBody := d.Fixed(int(credLen))
	d.Uint32() // verifier flavor: AUTH_NONE and AUTH_SYS calls carry no verifier worth checking
	verfLen := d.Uint32()
	if d.Err() != nil {
		return nil, errNotCall
	}
	if verfLen > MaxAuthBody {
		return DeniedReply(xid, RejectAuthError, AuthBadVerf), nil
	}
	d.Fixed(int(verfLen))
	if d.Err() != nil || d.Offset() < minCallLen {
		return nil, errNotCall
	}
	r.Args = msg[d.Offset():]

	switch credFlavor {
	case uint32(AuthNone):
		r.Flavor = AuthNone
		r.Cred = Cred{UID: NoID, GID: NoID}
	case uint32(AuthSys):
		cr, ok := parseAuthSys(credBody)
		if !ok {
			return DeniedReply(xid, RejectAuthError, AuthBadCred), nil
		}
		r.Flavor = AuthSys
		r.Cred = cr
	default:
		return DeniedReply(xid, RejectAuthError, AuthBadCred), nil
	}
	return nil, nil
}

// parseAuthSys decodes an authsys_parms body. The body must be exactly one
// well-formed authsys_parms: anything else is AUTH_BADCRED. The ids are the
// caller's claim; the service maps them (as an export squashes them).
func parseAuthSys(body []byte) (Cred, bool) {
	d := xdr.NewDecoder(body)
	d.Uint32() // stamp
	d.Opaque(MaxMachineName)
	uid := d.Uint32()
	gid := d.Uint32()
	n := d.Uint32()
	if d.Err() != nil || n > MaxGroups {
		return Cred{}, false
	}
	groups := make([]uint32, 0, n)
	for i := uint32(0); i < n; i++ {
		groups = append(groups, d.Uint32())
	}
	if d.Err() != nil || d.Offset() != len(body) {
		return Cred{}, false
	}
	return Cred{UID: uid, GID: gid, Groups: groups}, true
}

// AcceptedReply builds a MSG_ACCEPTED reply with an AUTH_NONE verifier,
// followed by the given words (the body for Success, or the version range
// for ProgMismatch).
func AcceptedReply(xid uint32, stat AcceptStat, words ...uint32) []byte {
	w := xdr.Encoder{Buf: make([]byte, 0, 24+4*len(words))}
	w.Uint32(xid)
	w.Uint32(MsgReply)
	w.Uint32(MsgAccepted)
	w.Uint32(uint32(AuthNone))
	w.Uint32(0)
	w.Uint32(uint32(stat))
	for _, v := range words {
		w.Uint32(v)
	}
	return w.Buf
}

// DeniedReply builds a MSG_DENIED reply: RejectRPCMismatch with the
// version range, or RejectAuthError with an auth_stat.
func DeniedReply(xid, stat uint32, words ...uint32) []byte {
	w := xdr.Encoder{}
	w.Uint32(xid)
	w.Uint32(MsgReply)
	w.Uint32(MsgDenied)
	w.Uint32(stat)
	for _, v := range words {
		w.Uint32(v)
	}
	return w.Buf
}

// SuccessHeader starts a successful reply; the procedure's result follows.
func SuccessHeader(xid uint32) *xdr.Encoder {
	return &xdr.Encoder{Buf: AcceptedReply(xid, Success)}
}

func (r *Request) String() string {
	return fmt.Sprintf("xid %#x prog %d vers %d proc %d", r.Xid, r.Prog, r.Vers, r.Proc)
}
