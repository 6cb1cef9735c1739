package sunrpc

import (
	"bytes"
	"encoding/binary"
	"testing"
)

// FuzzRecordReader feeds arbitrary streams to the server's record reader:
// it must never panic, never return a record longer than its limit, and
// hold (reserve) no more than the part of the record beyond the free
// bytes.
func FuzzRecordReader(f *testing.F) {
	const limit = 1<<20 + 1024
	mark := func(n uint32, last bool, body []byte) []byte {
		b := binary.BigEndian.AppendUint32(nil, n)
		if last {
			b[0] |= 0x80
		}
		return append(b, body...)
	}
	f.Add(mark(4, true, []byte("abcd")))
	f.Add(append(mark(2, false, []byte("ab")), mark(2, true, []byte("cd"))...))
	f.Add(mark(limit+1, true, nil))
	f.Add(mark(0, true, nil))
	f.Add(mark(1<<31-1, false, []byte("x")))
	f.Add(bytes.Repeat([]byte{0, 0, 0, 0}, 10))
	f.Fuzz(func(t *testing.T, stream []byte) {
		var b hostBudget
		b.init(recordBudget, limit)
		rv := recordReservation{budget: &b}
		rr := RecordReader{R: bytes.NewReader(stream), MaxRecord: limit, MaxFragments: maxFragments, Reserve: rv.reserve}
		for range 8 {
			rec, err := rr.Read(nil)
			held := rv.take()
			if err != nil {
				b.release(rv.host, held)
				return
			}
			if len(rec) > limit || held > max(0, len(rec)-freeRecordBytes) {
				t.Fatalf("record of %d bytes holding %d", len(rec), held)
			}
			b.release(rv.host, held)
			if b.free != recordBudget || len(b.hosts) != 0 {
				t.Fatalf("budget %d after release", b.free)
			}
		}
	})
}
