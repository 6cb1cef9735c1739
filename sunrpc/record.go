package sunrpc

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
)

// Record marking (RFC 5531 section 11), for the client's TCP transport and
// the server's alike: over a byte stream each RPC message is a record, a
// sequence of fragments, each preceded by a 4-byte header that holds its
// length and, in the top bit, whether it is the record's last.

// LastFragment is the bit of a fragment header that ends the record.
const LastFragment = 1 << 31

// PutRecordMark writes into b the header of a record of n bytes sent as
// one fragment.
func PutRecordMark(b []byte, n int) { binary.BigEndian.PutUint32(b, LastFragment|uint32(n)) }

// ErrRecordTooLarge is wrapped by the error of a record longer than the
// reader takes.
var ErrRecordTooLarge = errors.New("sunrpc: record too large")

// RecordReader reads the records of one byte stream. It refuses a record
// longer than MaxRecord at the header of the fragment that would make it
// so, before anything of that fragment is read.
type RecordReader struct {
	R         io.Reader
	MaxRecord int
	// MaxFragments bounds the fragments of one record, so a stream of
	// empty fragments cannot keep the reader looping; 0 means no bound.
	MaxFragments int
	// Reserve, if set, is called once a fragment's header is read and
	// before its bytes are, with the size of the record so far, that
	// fragment included; an error ends the read with it.
	Reserve func(size int) error

	size  int     // bytes of the record being read, up to its last header read
	frags int     // fragments of the record being read
	hdr   [4]byte // here, not on the stack: io.ReadFull would move it to the heap
}

// Fragment reads the header of the record's next fragment and returns its
// length and whether it is the record's last; the caller then reads its n
// bytes from R before the next call. The first call after the last
// fragment starts a new record. An end of the stream inside a record is
// io.ErrUnexpectedEOF.
func (rr *RecordReader) Fragment() (n int, last bool, err error) {
	if rr.MaxFragments > 0 && rr.frags == rr.MaxFragments {
		return 0, false, rr.fail(fmt.Errorf("sunrpc: record of more than %d fragments", rr.MaxFragments))
	}
	if _, err := io.ReadFull(rr.R, rr.hdr[:]); err != nil {
		if rr.frags > 0 && err == io.EOF {
			err = io.ErrUnexpectedEOF
		}
		return 0, false, rr.fail(err)
	}
	mark := binary.BigEndian.Uint32(rr.hdr[:])
	n = int(mark &^ LastFragment)
	if rr.size+n > rr.MaxRecord {
		return 0, false, rr.fail(fmt.Errorf("%w: more than %d bytes (limit %d)", ErrRecordTooLarge, rr.size+n, rr.MaxRecord))
	}
	rr.size += n
	rr.frags++
	if rr.Reserve != nil {
		if err := rr.Reserve(rr.size); err != nil {
			return 0, false, rr.fail(err)
		}
	}
	last = mark&LastFragment != 0
	if last {
		rr.size, rr.frags = 0, 0
	}
	return n, last, nil
}

// fail forgets the record being read: the stream is no longer trusted.
func (rr *RecordReader) fail(err error) error {
	rr.size, rr.frags = 0, 0
	return err
}

// Read reads one record and appends it to buf, which it grows to the
// record's size fragment by fragment: nothing is allocated for more than
// the fragments that passed MaxRecord (and Reserve).
func (rr *RecordReader) Read(buf []byte) ([]byte, error) {
	for {
		n, last, err := rr.Fragment()
		if err != nil {
			return nil, err
		}
		if n > 0 {
			start := len(buf)
			if cap(buf)-start < n {
				grown := make([]byte, start, start+n)
				copy(grown, buf)
				buf = grown
			}
			buf = buf[:start+n]
			if _, err := io.ReadFull(rr.R, buf[start:]); err != nil {
				if err == io.EOF {
					err = io.ErrUnexpectedEOF
				}
				return nil, rr.fail(err)
			}
		}
		if last {
			return buf, nil
		}
	}
}
