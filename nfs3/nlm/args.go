package nlm

import "github.com/rdmafs/rdmafs/sunrpc/xdr"

// The arguments of the NLM4 requests. Every request carries a cookie, an
// opaque the server returns unchanged in its result, by which a client
// matches an asynchronous _RES (or a GRANTED) to its request. A cookie of
// zero bytes decodes as zero bytes here; Linux's lockd takes it for four
// zero bytes, and answers with those.

// TestArgs is nlm4_testargs: the arguments of TEST and TEST_MSG, and of
// the server's GRANTED and GRANTED_MSG, which name the lock granted.
type TestArgs struct {
	Cookie    []byte
	Exclusive bool // a write lock; false: a read lock
	Lock      Lock
}

var _ Message = (*TestArgs)(nil)

// Encode appends a as nlm4_testargs.
func (a *TestArgs) Encode(e *xdr.Encoder) {
	e.Opaque(a.Cookie)
	e.Bool(a.Exclusive)
	a.Lock.Encode(e)
}

// Decode reads nlm4_testargs into a.
func (a *TestArgs) Decode(d *xdr.Decoder) {
	a.Cookie = getCookie(d, a.Cookie)
	a.Exclusive = getBool(d)
	a.Lock.Decode(d)
}

// LockArgs is nlm4_lockargs: the arguments of LOCK, LOCK_MSG and NM_LOCK.
type LockArgs struct {
	Cookie []byte
	// Block asks the server to queue a conflicting request (BLOCKED) and
	// call GRANTED when it grants it, rather than answer DENIED.
	Block     bool
	Exclusive bool
	Lock      Lock
	// Reclaim marks a lock the client held before the server restarted,
	// the only kind a server grants during its grace period.
	Reclaim bool
	// State is the client's NSM state number.
	State int32
}

var _ Message = (*LockArgs)(nil)

// Encode appends a as nlm4_lockargs.
func (a *LockArgs) Encode(e *xdr.Encoder) {
	e.Opaque(a.Cookie)
	e.Bool(a.Block)
	e.Bool(a.Exclusive)
	a.Lock.Encode(e)
	e.Bool(a.Reclaim)
	e.Uint32(uint32(a.State))
}

// Decode reads nlm4_lockargs into a.
func (a *LockArgs) Decode(d *xdr.Decoder) {
	a.Cookie = getCookie(d, a.Cookie)
	a.Block = getBool(d)
	a.Exclusive = getBool(d)
	a.Lock.Decode(d)
	a.Reclaim = getBool(d)
	a.State = int32(d.Uint32())
}

// CancelArgs is nlm4_cancargs: the arguments of CANCEL and CANCEL_MSG,
// which withdraw a blocked LOCK; they repeat that LOCK's Block, Exclusive
// and Lock.
type CancelArgs struct {
	Cookie    []byte
	Block     bool
	Exclusive bool
	Lock      Lock
}

var _ Message = (*CancelArgs)(nil)

// Encode appends a as nlm4_cancargs.
func (a *CancelArgs) Encode(e *xdr.Encoder) {
	e.Opaque(a.Cookie)
	e.Bool(a.Block)
	e.Bool(a.Exclusive)
	a.Lock.Encode(e)
}

// Decode reads nlm4_cancargs into a.
func (a *CancelArgs) Decode(d *xdr.Decoder) {
	a.Cookie = getCookie(d, a.Cookie)
	a.Block = getBool(d)
	a.Exclusive = getBool(d)
	a.Lock.Decode(d)
}

// UnlockArgs is nlm4_unlockargs: the arguments of UNLOCK and UNLOCK_MSG.
type UnlockArgs struct {
	Cookie []byte
	Lock   Lock
}

var _ Message = (*UnlockArgs)(nil)

// Encode appends a as nlm4_unlockargs.
func (a *UnlockArgs) Encode(e *xdr.Encoder) {
	e.Opaque(a.Cookie)
	a.Lock.Encode(e)
}

// Decode reads nlm4_unlockargs into a.
func (a *UnlockArgs) Decode(d *xdr.Decoder) {
	a.Cookie = getCookie(d, a.Cookie)
	a.Lock.Decode(d)
}

// ShareArgs is nlm4_shareargs: the arguments of SHARE and UNSHARE.
type ShareArgs struct {
	Cookie  []byte
	Share   Share
	Reclaim bool
}

var _ Message = (*ShareArgs)(nil)

// Encode appends a as nlm4_shareargs.
func (a *ShareArgs) Encode(e *xdr.Encoder) {
	e.Opaque(a.Cookie)
	a.Share.Encode(e)
	e.Bool(a.Reclaim)
}

// Decode reads nlm4_shareargs into a.
func (a *ShareArgs) Decode(d *xdr.Decoder) {
	a.Cookie = getCookie(d, a.Cookie)
	a.Share.Decode(d)
	a.Reclaim = getBool(d)
}

// Notify is nlm4_notify: the arguments of FREE_ALL, by which a client that
// restarted (Name, with its new NSM State) has the server drop all its
// locks and shares.
type Notify struct {
	Name  []byte
	State int32
}

var _ Message = (*Notify)(nil)

// Encode appends n as nlm4_notify.
func (n *Notify) Encode(e *xdr.Encoder) {
	e.Opaque(n.Name)
	e.Uint32(uint32(n.State))
}

// Decode reads nlm4_notify into n.
func (n *Notify) Decode(d *xdr.Decoder) {
	n.Name = getOpaque(d, n.Name, "name", MaxStrLen, "LM_MAXSTRLEN")
	n.State = int32(d.Uint32())
}
