package nlm

import (
	"errors"
	"fmt"
	"strings"

	"github.com/rdmafs/rdmafs/sunrpc/xdr"
)

// Message is the arguments or the results of one NLM4 or NSM procedure,
// or a part of them that the protocols name (Lock, Holder, Share).
//
// Encode appends the message to e; it writes the fields as they are, so
// keeping them within the limits (MaxStrLen, MaxNetobjLen, SMMaxStrLen) is
// the caller's business. Decode reads the message from d and records any
// error in d. It copies every variable-length field into the backing array
// that field's slice already has, growing it if it must: a decoded message
// never shares memory with the buffer it was decoded from, and a message
// decoded again and again into the same value stops allocating once its
// slices are large enough (when Decode is called on the concrete type: a
// call through this interface, as Unmarshal makes, moves its xdr.Decoder
// to the heap). After an error the value's fields are undefined.
type Message interface {
	Encode(e *xdr.Encoder)
	Decode(d *xdr.Decoder)
}

// ErrTooLong is wrapped by the error of a message with a field longer than
// the protocol allows.
var ErrTooLong = errors.New("longer than the protocol allows")

// ErrMalformed is wrapped by the error of Unmarshal.
var ErrMalformed = errors.New("nlm: malformed message")

// Unmarshal decodes body, a call's arguments or a reply's results, into m.
// Bytes after the message are ignored, as Linux's lockd ignores them.
func Unmarshal(body []byte, m Message) error {
	d := xdr.NewDecoder(body)
	m.Decode(&d)
	if err := d.Err(); err != nil {
		name := strings.TrimPrefix(fmt.Sprintf("%T", m), "*nlm.")
		return fmt.Errorf("%w: %s: %w", ErrMalformed, name, err)
	}
	return nil
}

// getOpaque decodes variable-length opaque data of at most max bytes (the
// limit called limitName in the specification) into dst's backing array.
// field names the field in errors.
func getOpaque(d *xdr.Decoder, dst []byte, field string, max int, limitName string) []byte {
	n := d.Uint32()
	if d.Err() != nil {
		return dst[:0]
	}
	if uint64(n) > uint64(max) {
		d.Fail(fmt.Errorf("%s of %d bytes: %w (%s is %d)", field, n, ErrTooLong, limitName, max))
		return dst[:0]
	}
	b := d.Fixed(int(n))
	if d.Err() != nil {
		return dst[:0]
	}
	return append(dst[:0], b...)
}

// getBool decodes a bool as Linux's lockd and statd do: any value other
// than zero is true. (sunrpc/xdr's Bool refuses values above one.)
func getBool(d *xdr.Decoder) bool { return d.Uint32() != 0 }

func getCookie(d *xdr.Decoder, dst []byte) []byte {
	return getOpaque(d, dst, "cookie", MaxNetobjLen, "MAXNETOBJ_SZ")
}

// getEnum decodes an enum whose values run from 0 to last.
func getEnum(d *xdr.Decoder, name string, last uint32) uint32 {
	v := d.Uint32()
	if d.Err() == nil && v > last {
		d.Fail(fmt.Errorf("%s %d is not a value of the enum", name, v))
	}
	return v
}

// getStat decodes nlm4_stats and refuses values it does not define, as
// Linux's lock client does.
func getStat(d *xdr.Decoder) Stat { return Stat(getEnum(d, "nlm4_stats", uint32(StatFailed))) }
