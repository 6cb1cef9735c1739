package nlm

import "github.com/rdmafs/rdmafs/sunrpc/xdr"

// TestRes is nlm4_testres: the result of TEST, and the arguments of
// TEST_RES.
type TestRes struct {
	Cookie []byte
	Stat   Stat
	// Holder is the conflicting lock when Stat is StatDenied; it is not on
	// the wire otherwise, and Decode leaves it zero.
	Holder Holder
}

var _ Message = (*TestRes)(nil)

// Encode appends r as nlm4_testres.
func (r *TestRes) Encode(e *xdr.Encoder) {
	e.Opaque(r.Cookie)
	e.Uint32(uint32(r.Stat))
	if r.Stat == StatDenied {
		r.Holder.Encode(e)
	}
}

// Decode reads nlm4_testres into r.
func (r *TestRes) Decode(d *xdr.Decoder) {
	r.Cookie = getCookie(d, r.Cookie)
	r.Stat = getStat(d)
	if r.Stat == StatDenied {
		r.Holder.Decode(d)
	} else {
		r.Holder = Holder{Owner: r.Holder.Owner[:0]}
	}
}

// Res is nlm4_res: the result of LOCK, CANCEL, UNLOCK, GRANTED and
// NM_LOCK, and the arguments of LOCK_RES, CANCEL_RES, UNLOCK_RES and
// GRANTED_RES.
type Res struct {
	Cookie []byte
	Stat   Stat
}

var _ Message = (*Res)(nil)

// Encode appends r as nlm4_res.
func (r *Res) Encode(e *xdr.Encoder) {
	e.Opaque(r.Cookie)
	e.Uint32(uint32(r.Stat))
}

// Decode reads nlm4_res into r.
func (r *Res) Decode(d *xdr.Decoder) {
	r.Cookie = getCookie(d, r.Cookie)
	r.Stat = getStat(d)
}

// ShareRes is nlm4_shareres: the result of SHARE and UNSHARE.
type ShareRes struct {
	Cookie   []byte
	Stat     Stat
	Sequence int32 // unused; Linux's lockd sends 0
}

var _ Message = (*ShareRes)(nil)

// Encode appends r as nlm4_shareres.
func (r *ShareRes) Encode(e *xdr.Encoder) {
	e.Opaque(r.Cookie)
	e.Uint32(uint32(r.Stat))
	e.Uint32(uint32(r.Sequence))
}

// Decode reads nlm4_shareres into r.
func (r *ShareRes) Decode(d *xdr.Decoder) {
	r.Cookie = getCookie(d, r.Cookie)
	r.Stat = getStat(d)
	r.Sequence = int32(d.Uint32())
}
