package server

import (
	"encoding/binary"
	"errors"
)

var (
	errXDRShort   = errors.New("server: xdr: message truncated")
	errXDRTooLong = errors.New("server: xdr: variable-length item over its limit")
)

// xdrReader decodes XDR (RFC 4506) from a byte slice. Errors are sticky: after
// the first failure every method returns zero values, so a decoder can read a
// whole structure and check err once. Lengths are checked against what is left
// in the slice before anything is sliced, so hostile lengths cannot allocate.
type xdrReader struct {
	b   []byte
	off int
	err error
}

func (r *xdrReader) u32() uint32 {
	if r.err != nil {
		return 0
	}
	if len(r.b)-r.off < 4 {
		r.err = errXDRShort
		return 0
	}
	v := binary.BigEndian.Uint32(r.b[r.off:])
	r.off += 4
	return v
}

func (r *xdrReader) u64() uint64 {
	hi := r.u32()
	lo := r.u32()
	return uint64(hi)<<32 | uint64(lo)
}

// fixed returns the next n bytes (plus XDR padding is skipped). The result
// aliases the input.
func (r *xdrReader) fixed(n int) []byte {
	if r.err != nil {
		return nil
	}
	padded := n + (-n & 3)
	if n < 0 || padded < n || len(r.b)-r.off < padded {
		r.err = errXDRShort
		return nil
	}
	v := r.b[r.off : r.off+n : r.off+n]
	r.off += padded
	return v
}

// opaque reads a variable-length opaque or string of at most max bytes.
func (r *xdrReader) opaque(max int) []byte {
	n := r.u32()
	if r.err != nil {
		return nil
	}
	if uint64(n) > uint64(max) {
		r.err = errXDRTooLong
		return nil
	}
	return r.fixed(int(n))
}

// xdrWriter appends XDR to a byte slice. It is an io.Writer so go-nfs's
// attribute encoders (WritePostOpAttrs, WriteWcc) can write into it, which
// keeps the attributes the front sends identical to go-nfs's.
type xdrWriter struct {
	b []byte
}

func (w *xdrWriter) Write(p []byte) (int, error) {
	w.b = append(w.b, p...)
	return len(p), nil
}

func (w *xdrWriter) u32(v uint32) { w.b = binary.BigEndian.AppendUint32(w.b, v) }

func (w *xdrWriter) u64(v uint64) { w.b = binary.BigEndian.AppendUint64(w.b, v) }

func (w *xdrWriter) bool(v bool) {
	if v {
		w.u32(1)
	} else {
		w.u32(0)
	}
}

func (w *xdrWriter) opaque(p []byte) {
	w.u32(uint32(len(p)))
	w.b = append(w.b, p...)
	for len(w.b)%4 != 0 {
		w.b = append(w.b, 0)
	}
}
