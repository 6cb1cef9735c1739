package nlm

import (
	"bytes"
	"reflect"
	"testing"

	"github.com/rdmafs/rdmafs/sunrpc/xdr"
)

// FuzzDecode feeds arbitrary bytes to the decoder of every message type
// (kind picks it). No input may panic a decoder; what a decoder accepts
// must hold no more bytes than it consumed (so decoding allocates at most
// the message's size), must encode to exactly as many bytes as it consumed,
// and must decode from that encoding to the same value.
func FuzzDecode(f *testing.F) {
	for i, m := range samples() {
		f.Add(uint8(i), encode(m))
	}
	for _, tc := range wireCases {
		for i, newMsg := range messages {
			if reflect.TypeOf(newMsg()) == reflect.TypeOf(tc.msg) {
				f.Add(uint8(i), wire(f, tc.hex))
			}
		}
	}
	f.Add(uint8(1), []byte{0xff, 0xff, 0xff, 0xff})
	f.Fuzz(func(t *testing.T, kind uint8, body []byte) {
		newMsg := messages[int(kind)%len(messages)]
		m1 := newMsg()
		d := xdr.NewDecoder(body)
		m1.Decode(&d)
		if d.Err() != nil {
			return
		}
		enc1 := encode(m1)
		if len(enc1) != d.Offset() {
			t.Fatalf("%T consumed %d bytes and encodes to %d: %+v", m1, d.Offset(), len(enc1), m1)
		}
		m2 := newMsg()
		if err := Unmarshal(enc1, m2); err != nil {
			t.Fatalf("%T %+v encodes to %x, which does not decode: %v", m1, m1, enc1, err)
		}
		if !reflect.DeepEqual(m1, m2) {
			t.Fatalf("round trip of %T changed it:\n%+v\n%+v", m1, m1, m2)
		}
		if enc2 := encode(m2); !bytes.Equal(enc1, enc2) {
			t.Fatalf("%T encodes as %x, then as %x", m1, enc1, enc2)
		}
	})
}
