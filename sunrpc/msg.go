package sunrpc

import (
	"errors"
	"fmt"

	"github.com/rdmafs/rdmafs/sunrpc/xdr"
)

// The numbers of an RPC message (RFC 5531 section 9) that have no type
// of their own, for the client here and the server (nfs3/server) alike.
const (
	RPCVersion = 2 // rpcvers: RPC version 2

	MsgCall  = 0 // msg_type CALL
	MsgReply = 1 // msg_type REPLY

	MsgAccepted = 0 // reply_stat MSG_ACCEPTED
	MsgDenied   = 1 // reply_stat MSG_DENIED

	RejectRPCMismatch = 0 // reject_stat RPC_MISMATCH
	RejectAuthError   = 1 // reject_stat AUTH_ERROR

	MaxAuthBody = 400 // opaque_auth body<400>
)

// The auth_stat values of RFC 5531 (DeniedError.AuthStat).
const (
	AuthOK           = 0
	AuthBadCred      = 1 // bad credential (seal broken)
	AuthRejectedCred = 2 // client must begin a new session
	AuthBadVerf      = 3 // bad verifier (seal broken)
	AuthRejectedVerf = 4 // verifier expired or replayed
	AuthTooWeak      = 5 // rejected for security reasons
	AuthInvalidResp  = 6 // bogus response verifier
	AuthFailed       = 7 // reason unknown
)

// AcceptStat is the status of an accepted reply that did not succeed.
type AcceptStat uint32

// The accept_stat values of RFC 5531.
const (
	Success      AcceptStat = 0
	ProgUnavail  AcceptStat = 1
	ProgMismatch AcceptStat = 2
	ProcUnavail  AcceptStat = 3
	GarbageArgs  AcceptStat = 4
	SystemErr    AcceptStat = 5
)

var acceptStatNames = [...]string{"success", "program unavailable", "program version mismatch", "procedure unavailable", "garbage arguments", "system error"}

func (s AcceptStat) String() string {
	if int(s) < len(acceptStatNames) {
		return acceptStatNames[s]
	}
	return fmt.Sprintf("accept_stat %d", uint32(s))
}

// AcceptError is an accepted reply whose status is not SUCCESS.
type AcceptError struct {
	Stat      AcceptStat
	Low, High uint32 // the supported versions, for ProgMismatch
}

func (e *AcceptError) Error() string {
	if e.Stat == ProgMismatch {
		return fmt.Sprintf("sunrpc: %v (server supports versions %d to %d)", e.Stat, e.Low, e.High)
	}
	return "sunrpc: " + e.Stat.String()
}

// DeniedError is a denied reply: an RPC version mismatch or an
// authentication error.
type DeniedError struct {
	AuthError bool   // false: RPC_MISMATCH
	AuthStat  uint32 // auth_stat, when AuthError
	Low, High uint32 // supported RPC versions, for RPC_MISMATCH
}

var authStatNames = [...]string{"ok", "bad credential", "credential rejected, begin a new session", "bad verifier", "verifier expired or replayed", "credential rejected for security reasons", "invalid response verifier", "failed for an unknown reason"}

func (e *DeniedError) Error() string {
	if !e.AuthError {
		return fmt.Sprintf("sunrpc: RPC version mismatch (server supports %d to %d)", e.Low, e.High)
	}
	if int(e.AuthStat) < len(authStatNames) {
		return "sunrpc: authentication error: " + authStatNames[e.AuthStat]
	}
	return fmt.Sprintf("sunrpc: authentication error %d", e.AuthStat)
}

// ErrGarbageReply is wrapped by the error of a reply that is not a
// well-formed RPC reply.
var ErrGarbageReply = errors.New("sunrpc: malformed reply")

// appendCallHeader encodes the RPC header of a call.
func appendCallHeader(e *xdr.Encoder, xid, prog, vers, proc uint32, auth *Auth, cred *Cred) {
	e.Uint32(xid)
	e.Uint32(MsgCall)
	e.Uint32(RPCVersion)
	e.Uint32(prog)
	e.Uint32(vers)
	e.Uint32(proc)
	auth.appendCred(e, cred)
}

// parseReplyHeader checks the reply header in msg for xid and returns the
// offset at which the procedure's results begin.
func parseReplyHeader(msg []byte, xid uint32) (int, error) {
	d := xdr.NewDecoder(msg)
	gotXid := d.Uint32()
	mtype := d.Uint32()
	stat := d.Uint32()
	if err := d.Err(); err != nil {
		return 0, fmt.Errorf("%w: %v", ErrGarbageReply, err)
	}
	if gotXid != xid || mtype != MsgReply {
		return 0, fmt.Errorf("%w: xid %#x type %d for call %#x", ErrGarbageReply, gotXid, mtype, xid)
	}
	switch stat {
	case MsgAccepted:
		d.Uint32()            // verifier flavor
		d.Opaque(MaxAuthBody) // verifier body
		as := AcceptStat(d.Uint32())
		if as == ProgMismatch {
			low, high := d.Uint32(), d.Uint32()
			if d.Err() == nil {
				return 0, &AcceptError{Stat: as, Low: low, High: high}
			}
		}
		if err := d.Err(); err != nil {
			return 0, fmt.Errorf("%w: %v", ErrGarbageReply, err)
		}
		if as != Success {
			return 0, &AcceptError{Stat: as}
		}
		return d.Offset(), nil
	case MsgDenied:
		e := &DeniedError{}
		switch d.Uint32() {
		case RejectRPCMismatch:
			e.Low, e.High = d.Uint32(), d.Uint32()
		case RejectAuthError:
			e.AuthError = true
			e.AuthStat = d.Uint32()
		default:
			d.Fail(errors.New("bad reject_stat"))
		}
		if err := d.Err(); err != nil {
			return 0, fmt.Errorf("%w: %v", ErrGarbageReply, err)
		}
		return 0, e
	}
	return 0, fmt.Errorf("%w: reply_stat %d", ErrGarbageReply, stat)
}
