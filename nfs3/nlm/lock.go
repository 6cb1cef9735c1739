package nlm

import "github.com/rdmafs/rdmafs/sunrpc/xdr"

// Lock is nlm4_lock: a byte-range lock one process of one client holds or
// wants on one file.
type Lock struct {
	// CallerName names the client host (its node name), as NSM will know it.
	CallerName []byte
	// FH is the NFS file handle of the file.
	FH []byte
	// Owner (oh) names the lock's owner opaquely; Linux's client sends
	// "pid@nodename".
	Owner []byte
	// Svid identifies the owning process on the client; Linux's client
	// sends an id it keeps per lock owner.
	Svid int32
	// Offset and Length give the range; a Length of 0 means to the end of
	// the file, however long it grows.
	Offset uint64
	Length uint64
}

var _ Message = (*Lock)(nil)

// Encode appends l as nlm4_lock.
func (l *Lock) Encode(e *xdr.Encoder) {
	e.Opaque(l.CallerName)
	e.Opaque(l.FH)
	e.Opaque(l.Owner)
	e.Uint32(uint32(l.Svid))
	e.Uint64(l.Offset)
	e.Uint64(l.Length)
}

// Decode reads nlm4_lock into l.
func (l *Lock) Decode(d *xdr.Decoder) {
	l.CallerName = getOpaque(d, l.CallerName, "caller_name", MaxStrLen, "LM_MAXSTRLEN")
	l.FH = getOpaque(d, l.FH, "fh", MaxNetobjLen, "MAXNETOBJ_SZ")
	l.Owner = getOpaque(d, l.Owner, "oh", MaxNetobjLen, "MAXNETOBJ_SZ")
	l.Svid = int32(d.Uint32())
	l.Offset = d.Uint64()
	l.Length = d.Uint64()
}

// Holder is nlm4_holder: the lock that conflicts with a TEST.
type Holder struct {
	Exclusive bool
	Svid      int32
	Owner     []byte // oh
	Offset    uint64
	Length    uint64 // 0: to the end of the file
}

var _ Message = (*Holder)(nil)

// Encode appends h as nlm4_holder.
func (h *Holder) Encode(e *xdr.Encoder) {
	e.Bool(h.Exclusive)
	e.Uint32(uint32(h.Svid))
	e.Opaque(h.Owner)
	e.Uint64(h.Offset)
	e.Uint64(h.Length)
}

// Decode reads nlm4_holder into h.
func (h *Holder) Decode(d *xdr.Decoder) {
	h.Exclusive = getBool(d)
	h.Svid = int32(d.Uint32())
	h.Owner = getOpaque(d, h.Owner, "oh", MaxNetobjLen, "MAXNETOBJ_SZ")
	h.Offset = d.Uint64()
	h.Length = d.Uint64()
}

// Share is nlm4_share: a DOS-style share reservation on a whole file.
type Share struct {
	CallerName []byte
	FH         []byte
	Owner      []byte // oh
	Mode       ShareMode
	Access     ShareAccess
}

var _ Message = (*Share)(nil)

// Encode appends s as nlm4_share.
func (s *Share) Encode(e *xdr.Encoder) {
	e.Opaque(s.CallerName)
	e.Opaque(s.FH)
	e.Opaque(s.Owner)
	e.Uint32(uint32(s.Mode))
	e.Uint32(uint32(s.Access))
}

// Decode reads nlm4_share into s, refusing modes and accesses the protocol
// does not define.
func (s *Share) Decode(d *xdr.Decoder) {
	s.CallerName = getOpaque(d, s.CallerName, "caller_name", MaxStrLen, "LM_MAXSTRLEN")
	s.FH = getOpaque(d, s.FH, "fh", MaxNetobjLen, "MAXNETOBJ_SZ")
	s.Owner = getOpaque(d, s.Owner, "oh", MaxNetobjLen, "MAXNETOBJ_SZ")
	s.Mode = ShareMode(getEnum(d, "fsh4_mode", uint32(DenyReadWrite)))
	s.Access = ShareAccess(getEnum(d, "fsh4_access", uint32(AccessReadWrite)))
}
