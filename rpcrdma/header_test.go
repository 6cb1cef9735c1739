package rpcrdma

import (
	"bytes"
	"testing"
)

func sampleHeader() *Header {
	h := &Header{Xid: 0x01020304, Vers: Version, Credits: 128, Proc: ProcMsg}
	h.Reads[0] = ReadSegment{Position: 120, Segment: Segment{Handle: 7, Length: 1 << 20, Offset: 0x7f0000001000}}
	h.NReads = 1
	h.Writes[0].Segments[0] = Segment{Handle: 8, Length: 4096, Offset: 0x7f0000200000}
	h.Writes[0].Segments[1] = Segment{Handle: 9, Length: 8192, Offset: 0x7f0000300000}
	h.Writes[0].N, h.NWrites = 2, 1
	h.Reply.Segments[0] = Segment{Handle: 10, Length: 65536, Offset: 0x7f0000400000}
	h.Reply.N, h.HasReply = 1, true
	return h
}

func TestHeaderRoundTrip(t *testing.T) {
	h := sampleHeader()
	b := h.Encode(nil)
	if len(b) != h.EncodedLen() {
		t.Fatalf("encoded %d bytes, EncodedLen says %d", len(b), h.EncodedLen())
	}
	b = append(b, "rpc message"...)
	var got Header
	n, err := got.Decode(b)
	if err != nil {
		t.Fatal(err)
	}
	if string(b[n:]) != "rpc message" {
		t.Fatalf("message after a header of %d bytes: %q", n, b[n:])
	}
	if got != *h {
		t.Fatalf("decoded %+v\nwant %+v", got, *h)
	}
}

func TestHeaderWireFormat(t *testing.T) {
	// RDMA_MSG, no chunks: xid, vers, credits, proc, three empty lists.
	h := Header{Xid: 5, Vers: 1, Credits: 64, Proc: ProcMsg}
	want := []byte{0, 0, 0, 5, 0, 0, 0, 1, 0, 0, 0, 64, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0}
	if b := h.Encode(nil); !bytes.Equal(b, want) {
		t.Fatalf("encoded % x\nwant    % x", b, want)
	}
	// RDMA_ERROR ERR_VERS carries the version range.
	e := Header{Xid: 5, Vers: 1, Credits: 1, Proc: ProcError, ErrCode: ErrVers, VersLow: 1, VersHigh: 1}
	want = []byte{0, 0, 0, 5, 0, 0, 0, 1, 0, 0, 0, 1, 0, 0, 0, 4, 0, 0, 0, 1, 0, 0, 0, 1, 0, 0, 0, 1}
	if b := e.Encode(nil); !bytes.Equal(b, want) {
		t.Fatalf("ERR_VERS % x", b)
	}
	var got Header
	if _, err := got.Decode(want); err != nil || got.ErrCode != ErrVers || got.VersHigh != 1 {
		t.Fatalf("decode ERR_VERS: %+v %v", got, err)
	}
}

func TestHeaderRejects(t *testing.T) {
	valid := sampleHeader().Encode(nil)
	tooMany := (&Header{Vers: 1, Proc: ProcMsg}).Encode(nil)[:16]
	for range MaxSegments + 1 {
		tooMany = append(tooMany, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0)
	}
	tooMany = append(tooMany, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0)
	bigChunk := (&Header{Vers: 1, Proc: ProcMsg}).Encode(nil)[:20]
	bigChunk = append(bigChunk, 0, 0, 0, 1, 0xff, 0xff, 0xff, 0xff)
	for name, b := range map[string][]byte{
		"empty":              nil,
		"truncated":          valid[:len(valid)-3],
		"RDMA_MSGP":          {0, 0, 0, 1, 0, 0, 0, 1, 0, 0, 0, 1, 0, 0, 0, 2},
		"RDMA_DONE":          {0, 0, 0, 1, 0, 0, 0, 1, 0, 0, 0, 1, 0, 0, 0, 3},
		"read list too long": tooMany,
		"huge segment count": bigChunk,
	} {
		var h Header
		if _, err := h.Decode(b); err == nil {
			t.Errorf("%s: decoded", name)
		}
	}
}

func TestPrivateData(t *testing.T) {
	p := PrivateData{Flags: PrivRemoteInvalidate, SendSize: 4096, RecvSize: 65536}
	b := p.Encode()
	if !bytes.Equal(b, []byte{0xf6, 0xab, 0x0e, 0x18, 1, 1, 3, 63}) {
		t.Fatalf("encoded % x", b)
	}
	got, ok := DecodePrivateData(b)
	if !ok || got != p {
		t.Fatalf("decoded %+v %v", got, ok)
	}
	for _, b := range [][]byte{nil, {1, 2, 3}, {0xf6, 0xab, 0x0e, 0x19, 1, 0, 3, 3}, {0xf6, 0xab, 0x0e, 0x18, 2, 0, 3, 3}} {
		got, ok := DecodePrivateData(b)
		if ok || got.SendSize != 1024 || got.RecvSize != 1024 || got.Flags != 0 {
			t.Errorf("% x: %+v %v, want the 1024-byte default", b, got, ok)
		}
	}
}
