package rpcrdma

// Work request ids: both ends put the kind of a work request in the top
// byte of its id and, below, the number of what it is for (a block of an
// arena, a slot of a call table), so that a completion finds its owner
// without a lookup.

// WRKind is the kind of a work request; each end numbers its own kinds
// from 1.
type WRKind uint8

// WRID is the id of a work request of kind k for n.
func WRID(k WRKind, n int) uint64 { return uint64(k)<<56 | uint64(uint32(n)) }

// SplitWRID is the kind and number of a work request id.
func SplitWRID(id uint64) (WRKind, int) { return WRKind(id >> 56), int(uint32(id)) }
