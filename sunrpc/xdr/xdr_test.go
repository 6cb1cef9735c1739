package xdr

import (
	"bytes"
	"errors"
	"testing"
)

func TestRoundTrip(t *testing.T) {
	var e Encoder
	e.Uint32(7)
	e.Uint64(1 << 40)
	e.Bool(true)
	e.Opaque([]byte("abcde"))
	e.String("xy")
	e.Fixed([]byte{9, 9, 9, 9, 9, 9, 9, 9})
	if len(e.Buf)%4 != 0 {
		t.Fatalf("encoding not 4-byte aligned: %d bytes", len(e.Buf))
	}
	d := NewDecoder(e.Buf)
	if v := d.Uint32(); v != 7 {
		t.Errorf("Uint32 = %d", v)
	}
	if v := d.Uint64(); v != 1<<40 {
		t.Errorf("Uint64 = %d", v)
	}
	if !d.Bool() {
		t.Error("Bool = false")
	}
	if v := d.Opaque(5); string(v) != "abcde" {
		t.Errorf("Opaque = %q", v)
	}
	if v := d.Opaque(100); string(v) != "xy" {
		t.Errorf("String = %q", v)
	}
	if v := d.Fixed(8); !bytes.Equal(v, []byte{9, 9, 9, 9, 9, 9, 9, 9}) {
		t.Errorf("Fixed = %v", v)
	}
	if d.Err() != nil || d.Len() != 0 {
		t.Fatalf("err %v, %d bytes left", d.Err(), d.Len())
	}
}

func TestDecoderRejects(t *testing.T) {
	for _, tc := range []struct {
		name string
		in   []byte
		read func(*Decoder)
	}{
		{"short uint32", []byte{0, 0, 1}, func(d *Decoder) { d.Uint32() }},
		{"short uint64", []byte{0, 0, 0, 0, 1}, func(d *Decoder) { d.Uint64() }},
		{"bool 2", []byte{0, 0, 0, 2}, func(d *Decoder) { d.Bool() }},
		{"opaque over limit", []byte{0, 0, 0, 9, 1, 2, 3, 4, 5, 6, 7, 8, 9, 0, 0, 0}, func(d *Decoder) { d.Opaque(8) }},
		{"opaque past end", []byte{0x7f, 0xff, 0xff, 0xff, 1, 2}, func(d *Decoder) { d.Opaque(1 << 31) }},
		{"opaque missing pad", []byte{0, 0, 0, 1, 7}, func(d *Decoder) { d.Opaque(8) }},
		{"negative fixed", []byte{1, 2, 3, 4}, func(d *Decoder) { d.Fixed(-4) }},
	} {
		d := NewDecoder(tc.in)
		tc.read(&d)
		if d.Err() == nil {
			t.Errorf("%s: no error", tc.name)
		}
		// The error is sticky and later reads return zero values.
		if v := d.Uint32(); v != 0 {
			t.Errorf("%s: read after error returned %d", tc.name, v)
		}
	}
	d := NewDecoder(nil)
	d.Uint32()
	if !errors.Is(d.Err(), ErrShort) {
		t.Errorf("empty buffer: %v", d.Err())
	}
}

func TestEncoderDoesNotAllocate(t *testing.T) {
	e := Encoder{Buf: make([]byte, 0, 256)}
	data := []byte("hello")
	n := testing.AllocsPerRun(100, func() {
		e.Buf = e.Buf[:0]
		e.Uint32(1)
		e.Uint64(2)
		e.Opaque(data)
		e.String("name")
	})
	if n != 0 {
		t.Fatalf("%v allocations per encode", n)
	}
}

func FuzzDecoder(f *testing.F) {
	f.Add([]byte{0, 0, 0, 3, 'a', 'b', 'c', 0, 0, 0, 0, 1})
	f.Fuzz(func(t *testing.T, b []byte) {
		d := NewDecoder(b)
		for d.Err() == nil && d.Len() > 0 {
			switch d.Uint32() % 4 {
			case 0:
				d.Uint64()
			case 1:
				if v := d.Opaque(64); len(v) > 64 {
					t.Fatalf("opaque of %d bytes over limit 64", len(v))
				}
			case 2:
				d.Bool()
			case 3:
				d.Fixed(int(d.Uint32() % 16))
			}
			if d.Offset() > len(b) {
				t.Fatalf("offset %d past end %d", d.Offset(), len(b))
			}
		}
	})
}
