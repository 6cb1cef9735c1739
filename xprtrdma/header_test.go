package xprtrdma

import (
	"bytes"
	"errors"
	"testing"
	"unsafe"

	"github.com/rdmafs/rdmafs/sunrpc/xdr"
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
	if len(b) != h.encodedLen() {
		t.Fatalf("encoded %d bytes, encodedLen says %d", len(b), h.encodedLen())
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

// testRequest returns a request that offered a write chunk and a reply
// chunk in blocks of an arena of its own.
func testRequest(t testing.TB) (*request, *arena) {
	a, err := newArena(3, 8192)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { a.close() })
	r := &request{write: &a.blocks[0], reply: &a.blocks[1], hasW: true, hasR: true,
		offerW: Segment{Handle: 1, Length: 8192, Offset: 0x1000},
		offerR: Segment{Handle: 2, Length: 8192, Offset: 0x3000}}
	return r, a
}

func TestParseReply(t *testing.T) {
	r, _ := testRequest(t)
	rpc := bytes.Repeat([]byte{7}, 40)
	build := func(mod func(h *Header)) (*Header, []byte, int) {
		h := &Header{Xid: 1, Vers: 1, Credits: 32, Proc: ProcMsg}
		h.Writes[0].Segments[0], h.Writes[0].N, h.NWrites = Segment{Handle: 1, Length: 100, Offset: 0x1000}, 1, 1
		h.Reply.Segments[0], h.Reply.N, h.HasReply = Segment{Handle: 2, Length: 0, Offset: 0x3000}, 1, true
		mod(h)
		b := h.Encode(nil)
		n := len(b)
		if h.Proc == ProcMsg {
			b = append(b, rpc...)
		}
		var d Header
		if _, err := d.Decode(b); err != nil {
			t.Fatal(err)
		}
		return &d, b, n
	}
	h, b, n := build(func(*Header) {})
	msg, payload, err := parseReply(r, h, b, n)
	if err != nil || !bytes.Equal(msg, rpc) || len(payload) != 100 || &payload[0] != &r.write.bytes()[0] {
		t.Fatalf("used write chunk: %v, %d bytes of payload", err, len(payload))
	}
	h, b, n = build(func(h *Header) { h.Writes[0].Segments[0].Length = 0 })
	if _, payload, err := parseReply(r, h, b, n); err != nil || payload != nil {
		t.Fatalf("unused write chunk: %v %d", err, len(payload))
	}
	h, b, n = build(func(h *Header) { h.Proc = ProcNoMsg; h.Reply.Segments[0].Length = 300 })
	if msg, _, err := parseReply(r, h, b, n); err != nil || len(msg) != 300 || &msg[0] != &r.reply.bytes()[0] {
		t.Fatalf("RDMA_NOMSG: %v %d", err, len(msg))
	}
	for name, mod := range map[string]func(h *Header){
		"length past the offer":    func(h *Header) { h.Writes[0].Segments[0].Length = 8193 },
		"another handle":           func(h *Header) { h.Writes[0].Segments[0].Handle = 9 },
		"another offset":           func(h *Header) { h.Writes[0].Segments[0].Offset = 0x2000 },
		"two segments":             func(h *Header) { h.Writes[0].N = 2 },
		"two write chunks":         func(h *Header) { h.Writes[1] = h.Writes[0]; h.NWrites = 2 },
		"a read list":              func(h *Header) { h.NReads = 1 },
		"reply chunk past offer":   func(h *Header) { h.Proc = ProcNoMsg; h.Reply.Segments[0].Length = 9000 },
		"RDMA_MSG, used reply":     func(h *Header) { h.Reply.Segments[0].Length = 10 },
		"RDMA_NOMSG without reply": func(h *Header) { h.Proc = ProcNoMsg; h.HasReply = false },
	} {
		h, b, n := build(mod)
		if _, _, err := parseReply(r, h, b, n); !errors.Is(err, ErrBadReply) {
			t.Errorf("%s: %v", name, err)
		}
	}
}

// FuzzReplyHeader decodes arbitrary bytes as a reply to a request with a
// write chunk and a reply chunk. Nothing may panic, and what a reply is
// taken to say must lie inside the receive data or the request's own
// buffers.
func FuzzReplyHeader(f *testing.F) {
	f.Add(sampleHeader().Encode(nil))
	f.Add((&Header{Xid: 1, Vers: 1, Credits: 1, Proc: ProcError, ErrCode: ErrChunk}).Encode(nil))
	r, a := testRequest(f)
	f.Fuzz(func(t *testing.T, b []byte) {
		var h Header
		n, err := h.Decode(b)
		if err != nil {
			return
		}
		if n > len(b) || h.NReads > MaxSegments || h.NWrites > maxWriteChunks || h.Reply.N > MaxSegments {
			t.Fatalf("decoded beyond limits: n=%d reads=%d writes=%d", n, h.NReads, h.NWrites)
		}
		again := h.Encode(nil)
		var h2 Header
		if _, err := h2.Decode(again); err != nil || (h.Vers == Version && h.Proc <= ProcNoMsg && h2 != h) {
			t.Fatalf("re-encoded header decodes differently: %v", err)
		}
		if h.Vers != Version || h.Proc == ProcError {
			return
		}
		msg, payload, err := parseReply(r, &h, b, n)
		if err != nil {
			return
		}
		if !within(msg, b) && !within(msg, a.mem.Bytes()) {
			t.Fatal("message outside the receive and the request's buffers")
		}
		if payload != nil && !within(payload, r.write.bytes()) {
			t.Fatal("payload outside the request's write chunk buffer")
		}
	})
}

// within reports whether p lies inside buf.
func within(p, buf []byte) bool {
	if len(p) == 0 {
		return true
	}
	s, b := uintptr(unsafe.Pointer(&p[0])), uintptr(unsafe.Pointer(&buf[0]))
	return s >= b && s+uintptr(len(p)) <= b+uintptr(len(buf))
}

// FuzzServerCallHeader checks the server's acceptance of a call's header
// and inline part: nothing panics, and an accepted call's message fits the
// buffer it is assembled in.
func FuzzServerCallHeader(f *testing.F) {
	h := sampleHeader()
	h.NWrites, h.HasReply = 0, false
	f.Add(append(h.Encode(nil), make([]byte, 200)...))
	f.Add((&Header{Xid: 1, Vers: 1, Proc: ProcNoMsg, NReads: 1}).Encode(nil))
	f.Fuzz(func(t *testing.T, b []byte) {
		var h Header
		n, err := h.Decode(b)
		if err != nil || h.Vers != Version || h.Proc == ProcError {
			return
		}
		const bufSize = 1 << 16
		inline := b[n:]
		pos, total, err := checkCall(&h, inline, 4096, bufSize)
		if err != nil {
			return
		}
		if int(pos) > len(inline) || len(inline)+total+xdr.Pad(total) > bufSize || total < 0 {
			t.Fatalf("accepted a call of %d inline bytes and a chunk of %d at %d", len(inline), total, pos)
		}
	})
}
