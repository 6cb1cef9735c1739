package xdr

// These fuzz targets hold the Encoder and Decoder against a second,
// independent XDR implementation: go-xdr (github.com/rasky/go-xdr), which
// maps Go types to XDR by reflection. rdmafs does not use it at run time
// (its reflection allocates on every call, against the hot path's zero
// allocations); as a reference in tests it costs nothing, and it was
// written from RFC 4506 by other hands.

import (
	"bytes"
	"fmt"
	"testing"

	goxdr "github.com/rasky/go-xdr/xdr2"
)

// record has a field of every kind of XDR item the package reads and
// writes, in the layout go-xdr gives the Go types: unsigned int, unsigned
// hyper, bool, variable-length opaque, string, fixed-length opaque (6
// bytes, so with a pad), a variable-length array of unsigned ints and
// optional data.
type record struct {
	U32 uint32
	U64 uint64
	B   bool
	Op  []byte
	S   string
	Fx  [6]byte
	Arr []uint32
	Opt *uint64 `xdr:"optional"`
}

// recordLimit bounds the opaque data, strings and arrays of a decoded
// record, on both sides.
const recordLimit = 4096

// putRecord encodes r with the Encoder.
func putRecord(e *Encoder, r *record) {
	e.Uint32(r.U32)
	e.Uint64(r.U64)
	e.Bool(r.B)
	e.Opaque(r.Op)
	e.String(r.S)
	e.Fixed(r.Fx[:])
	e.Uint32(uint32(len(r.Arr)))
	for _, v := range r.Arr {
		e.Uint32(v)
	}
	e.Bool(r.Opt != nil)
	if r.Opt != nil {
		e.Uint64(*r.Opt)
	}
}

// getRecord decodes a record with the Decoder, as a decoder of a real
// message would: every count checked before it is used.
func getRecord(d *Decoder) record {
	var r record
	r.U32 = d.Uint32()
	r.U64 = d.Uint64()
	r.B = d.Bool()
	r.Op = bytes.Clone(d.Opaque(recordLimit))
	r.S = string(d.Opaque(recordLimit))
	copy(r.Fx[:], d.Fixed(len(r.Fx)))
	if n := d.Uint32(); d.Err() == nil {
		if n > recordLimit {
			d.Fail(fmt.Errorf("array of %d items", n))
		} else if int(n) > d.Len()/4 {
			d.Fail(ErrShort)
		} else {
			r.Arr = make([]uint32, n)
			for i := range r.Arr {
				r.Arr[i] = d.Uint32()
			}
		}
	}
	if d.Bool() {
		v := d.Uint64()
		r.Opt = &v
	}
	return r
}

// sameRecord says how a and b differ, field by field, or "" if they do not.
// An empty and a nil slice are the same: XDR cannot tell them apart.
func sameRecord(a, b *record) string {
	var diffs []string
	add := func(field string, x, y any) { diffs = append(diffs, fmt.Sprintf("%s %v != %v", field, x, y)) }
	if a.U32 != b.U32 {
		add("U32", a.U32, b.U32)
	}
	if a.U64 != b.U64 {
		add("U64", a.U64, b.U64)
	}
	if a.B != b.B {
		add("B", a.B, b.B)
	}
	if !bytes.Equal(a.Op, b.Op) {
		add("Op", a.Op, b.Op)
	}
	if a.S != b.S {
		add("S", a.S, b.S)
	}
	if a.Fx != b.Fx {
		add("Fx", a.Fx, b.Fx)
	}
	if len(a.Arr) != len(b.Arr) {
		add("len(Arr)", len(a.Arr), len(b.Arr))
	} else {
		for i := range a.Arr {
			if a.Arr[i] != b.Arr[i] {
				add(fmt.Sprintf("Arr[%d]", i), a.Arr[i], b.Arr[i])
			}
		}
	}
	switch {
	case (a.Opt == nil) != (b.Opt == nil):
		add("Opt present", a.Opt != nil, b.Opt != nil)
	case a.Opt != nil && *a.Opt != *b.Opt:
		add("Opt", *a.Opt, *b.Opt)
	}
	if diffs == nil {
		return ""
	}
	return fmt.Sprint(diffs)
}

// FuzzEncodeLikeGoXDR encodes records with the Encoder and with go-xdr:
// the bytes must be the same, go-xdr must decode the Encoder's bytes to
// the record, and the Decoder go-xdr's.
func FuzzEncodeLikeGoXDR(f *testing.F) {
	f.Add(uint32(0), uint64(0), false, []byte(nil), "", []byte(nil), uint8(0), false)
	f.Add(uint32(7), uint64(1<<40), true, []byte("abcde"), "xy", []byte{9, 8, 7, 6, 5, 4}, uint8(3), true)
	f.Add(^uint32(0), ^uint64(0), true, []byte("abcd"), "name\x00with\xffbytes", []byte{1}, uint8(40), false)
	f.Fuzz(func(t *testing.T, u32 uint32, u64 uint64, b bool, op []byte, s string, fx []byte, narr uint8, opt bool) {
		r := record{U32: u32, U64: u64, B: b, Op: op, S: s}
		copy(r.Fx[:], fx)
		for i := range int(narr) {
			r.Arr = append(r.Arr, u32*uint32(i+1)+uint32(i))
		}
		if opt {
			v := u64 ^ 0x5555
			r.Opt = &v
		}
		if len(r.Op) > recordLimit || len(r.S) > recordLimit {
			t.Skip("over the decoders' limit")
		}

		var e Encoder
		putRecord(&e, &r)
		var ref bytes.Buffer
		if _, err := goxdr.Marshal(&ref, &r); err != nil {
			t.Fatalf("go-xdr Marshal: %v", err)
		}
		if !bytes.Equal(e.Buf, ref.Bytes()) {
			t.Fatalf("the Encoder's %d bytes and go-xdr's %d differ from byte %d: %x and %x",
				len(e.Buf), ref.Len(), firstDiff(e.Buf, ref.Bytes()), e.Buf, ref.Bytes())
		}

		var viaGoXDR record
		n, err := goxdr.UnmarshalLimited(bytes.NewReader(e.Buf), &viaGoXDR, recordLimit)
		if err != nil {
			t.Fatalf("go-xdr cannot decode the Encoder's %x: %v", e.Buf, err)
		}
		if n != len(e.Buf) {
			t.Fatalf("go-xdr read %d of the Encoder's %d bytes", n, len(e.Buf))
		}
		if diff := sameRecord(&r, &viaGoXDR); diff != "" {
			t.Fatalf("go-xdr decodes the Encoder's bytes differently: %s", diff)
		}

		d := NewDecoder(ref.Bytes())
		viaDecoder := getRecord(&d)
		if d.Err() != nil || d.Len() != 0 {
			t.Fatalf("Decoder on go-xdr's %x: err %v, %d bytes left", ref.Bytes(), d.Err(), d.Len())
		}
		if diff := sameRecord(&r, &viaDecoder); diff != "" {
			t.Fatalf("the Decoder decodes go-xdr's bytes differently: %s", diff)
		}
	})
}

// firstDiff returns the offset of the first byte where a and b differ.
func firstDiff(a, b []byte) int {
	i := 0
	for i < len(a) && i < len(b) && a[i] == b[i] {
		i++
	}
	return i
}

// FuzzDecodeLikeGoXDR decodes arbitrary bytes as a record with the Decoder
// and with go-xdr: both must accept them or both reject them, and what
// both accept must be the same record, having read the same bytes.
func FuzzDecodeLikeGoXDR(f *testing.F) {
	good := record{U32: 1, U64: 2, B: true, Op: []byte("op"), S: "str", Fx: [6]byte{1, 2, 3}, Arr: []uint32{4, 5}}
	var e Encoder
	putRecord(&e, &good)
	f.Add(e.Buf)
	f.Add(e.Buf[:len(e.Buf)-1]) // the optional's flag cut short
	bool2 := bytes.Clone(e.Buf)
	bool2[15] = 2 // B, after U32 and U64
	f.Add(bool2)
	f.Add([]byte{0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 0xff, 0xff})
	f.Fuzz(func(t *testing.T, b []byte) {
		d := NewDecoder(b)
		mine := getRecord(&d)
		var ref record
		n, refErr := goxdr.UnmarshalLimited(bytes.NewReader(b), &ref, recordLimit)
		switch {
		case d.Err() != nil && refErr == nil:
			t.Fatalf("the Decoder rejects %x (%v), go-xdr accepts it", b, d.Err())
		case d.Err() == nil && refErr != nil:
			t.Fatalf("the Decoder accepts %x, go-xdr rejects it: %v", b, refErr)
		case d.Err() != nil:
			return
		}
		if n != d.Offset() {
			t.Fatalf("go-xdr read %d bytes of %x, the Decoder %d", n, b, d.Offset())
		}
		if diff := sameRecord(&mine, &ref); diff != "" {
			t.Fatalf("%x decodes differently: %s", b, diff)
		}
	})
}
