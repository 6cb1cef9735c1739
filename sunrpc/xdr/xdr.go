// Package xdr encodes and decodes the External Data Representation
// (RFC 4506) used by ONC RPC, without reflection and without allocating.
//
// An Encoder appends to a byte slice the caller owns. A Decoder reads from a
// byte slice and remembers the first error, so a decoder for a whole message
// is a straight sequence of reads followed by one check of Err. Every length
// read from the wire is checked against what remains in the buffer before it
// is used, so a hostile message can neither read past its end nor make the
// decoder allocate.
//
// A Decoder's Opaque, Fixed and Rest return views of its buffer, not
// copies: what outlives the message must be copied. Scrub, which the
// pools of receive buffers call, catches a view kept too long in builds
// with the rdmafs_scrub tag (scrub.go).
package xdr

import (
	"encoding/binary"
	"errors"
	"fmt"
)

// ErrShort is the error of a Decoder that ran past the end of its buffer.
var ErrShort = errors.New("xdr: message too short")

// Pad returns the number of zero bytes that follow n bytes of opaque data.
func Pad(n int) int { return (4 - n&3) & 3 }

// Encoder appends XDR items to Buf.
type Encoder struct {
	Buf []byte
}

// Write appends p as it is, so that encoders written for an io.Writer can
// add to the same message. It never fails.
func (e *Encoder) Write(p []byte) (int, error) {
	e.Buf = append(e.Buf, p...)
	return len(p), nil
}

// Uint32 appends an unsigned int.
func (e *Encoder) Uint32(v uint32) { e.Buf = binary.BigEndian.AppendUint32(e.Buf, v) }

// Uint64 appends an unsigned hyper.
func (e *Encoder) Uint64(v uint64) { e.Buf = binary.BigEndian.AppendUint64(e.Buf, v) }

// Bool appends a bool.
func (e *Encoder) Bool(v bool) {
	if v {
		e.Uint32(1)
	} else {
		e.Uint32(0)
	}
}

// Opaque appends variable-length opaque data: its length, the bytes and the pad.
func (e *Encoder) Opaque(b []byte) {
	e.Uint32(uint32(len(b)))
	e.Fixed(b)
}

// String appends a string as variable-length opaque data.
func (e *Encoder) String(s string) {
	e.Uint32(uint32(len(s)))
	e.Buf = append(e.Buf, s...)
	e.Buf = append(e.Buf, zeros[:Pad(len(s))]...)
}

// Fixed appends fixed-length opaque data and its pad.
func (e *Encoder) Fixed(b []byte) {
	e.Buf = append(e.Buf, b...)
	e.Buf = append(e.Buf, zeros[:Pad(len(b))]...)
}

var zeros [4]byte

// Decoder reads XDR items from a buffer. After the first error every read
// returns a zero value and Err reports that error.
type Decoder struct {
	buf []byte
	off int
	err error
}

// NewDecoder returns a Decoder that reads b.
func NewDecoder(b []byte) Decoder { return Decoder{buf: b} }

// Reset makes d read b from its start and forgets any error.
func (d *Decoder) Reset(b []byte) { *d = Decoder{buf: b} }

// Err returns the first error the decoder met, or nil.
func (d *Decoder) Err() error { return d.err }

// Offset returns how many bytes have been consumed.
func (d *Decoder) Offset() int { return d.off }

// Len returns how many bytes remain.
func (d *Decoder) Len() int { return len(d.buf) - d.off }

// Rest returns the bytes not yet consumed.
func (d *Decoder) Rest() []byte { return d.buf[d.off:] }

// Fail records err as the decoder's error unless it already has one.
func (d *Decoder) Fail(err error) {
	if d.err == nil {
		d.err = err
	}
}

func (d *Decoder) take(n int) []byte {
	if d.err != nil {
		return nil
	}
	if n < 0 || n > len(d.buf)-d.off {
		d.err = ErrShort
		return nil
	}
	b := d.buf[d.off : d.off+n : d.off+n]
	d.off += n
	return b
}

// Uint32 reads an unsigned int.
func (d *Decoder) Uint32() uint32 {
	b := d.take(4)
	if b == nil {
		return 0
	}
	return binary.BigEndian.Uint32(b)
}

// Uint64 reads an unsigned hyper.
func (d *Decoder) Uint64() uint64 {
	b := d.take(8)
	if b == nil {
		return 0
	}
	return binary.BigEndian.Uint64(b)
}

// Bool reads a bool; any value other than 0 or 1 is an error.
func (d *Decoder) Bool() bool {
	v := d.Uint32()
	if v > 1 {
		d.Fail(fmt.Errorf("xdr: bool value %d", v))
		return false
	}
	return v == 1
}

// Opaque reads variable-length opaque data of at most max bytes and returns
// it as a slice of the decoder's buffer (no copy).
func (d *Decoder) Opaque(max int) []byte {
	n := d.Uint32()
	if d.err != nil {
		return nil
	}
	if uint64(n) > uint64(max) {
		d.Fail(fmt.Errorf("xdr: opaque length %d exceeds limit %d", n, max))
		return nil
	}
	return d.Fixed(int(n))
}

// Fixed reads n bytes of fixed-length opaque data and its pad.
func (d *Decoder) Fixed(n int) []byte {
	if n < 0 || n > d.Len() {
		d.Fail(ErrShort)
		return nil
	}
	b := d.take(n)
	d.take(Pad(n))
	if d.err != nil {
		return nil
	}
	return b
}

// Skip consumes n bytes.
func (d *Decoder) Skip(n int) { d.take(n) }
