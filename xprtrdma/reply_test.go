package xprtrdma

import (
	"bytes"
	"errors"
	"testing"
	"unsafe"

	"github.com/rdmafs/rdmafs/rpcrdma"
)

// testRequest returns a request that offered a write chunk and a reply
// chunk in blocks of an arena of its own.
func testRequest(t testing.TB) (*request, *rpcrdma.Arena) {
	a, err := rpcrdma.NewArena(3, 8192)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { a.Close() })
	r := &request{write: a.Block(0), reply: a.Block(1), hasW: true, hasR: true,
		offerW: rpcrdma.Segment{Handle: 1, Length: 8192, Offset: 0x1000},
		offerR: rpcrdma.Segment{Handle: 2, Length: 8192, Offset: 0x3000}}
	return r, a
}

func TestParseReply(t *testing.T) {
	r, _ := testRequest(t)
	rpc := bytes.Repeat([]byte{7}, 40)
	build := func(mod func(h *rpcrdma.Header)) (*rpcrdma.Header, []byte, int) {
		h := &rpcrdma.Header{Xid: 1, Vers: 1, Credits: 32, Proc: rpcrdma.ProcMsg}
		h.Writes[0].Segments[0], h.Writes[0].N, h.NWrites = rpcrdma.Segment{Handle: 1, Length: 100, Offset: 0x1000}, 1, 1
		h.Reply.Segments[0], h.Reply.N, h.HasReply = rpcrdma.Segment{Handle: 2, Length: 0, Offset: 0x3000}, 1, true
		mod(h)
		b := h.Encode(nil)
		n := len(b)
		if h.Proc == rpcrdma.ProcMsg {
			b = append(b, rpc...)
		}
		var d rpcrdma.Header
		if _, err := d.Decode(b); err != nil {
			t.Fatal(err)
		}
		return &d, b, n
	}
	h, b, n := build(func(*rpcrdma.Header) {})
	msg, payload, err := parseReply(r, h, b, n)
	if err != nil || !bytes.Equal(msg, rpc) || len(payload) != 100 || &payload[0] != &r.write.Bytes()[0] {
		t.Fatalf("used write chunk: %v, %d bytes of payload", err, len(payload))
	}
	h, b, n = build(func(h *rpcrdma.Header) { h.Writes[0].Segments[0].Length = 0 })
	if _, payload, err := parseReply(r, h, b, n); err != nil || payload != nil {
		t.Fatalf("unused write chunk: %v %d", err, len(payload))
	}
	h, b, n = build(func(h *rpcrdma.Header) { h.Proc = rpcrdma.ProcNoMsg; h.Reply.Segments[0].Length = 300 })
	if msg, _, err := parseReply(r, h, b, n); err != nil || len(msg) != 300 || &msg[0] != &r.reply.Bytes()[0] {
		t.Fatalf("RDMA_NOMSG: %v %d", err, len(msg))
	}
	for name, mod := range map[string]func(h *rpcrdma.Header){
		"length past the offer":    func(h *rpcrdma.Header) { h.Writes[0].Segments[0].Length = 8193 },
		"another handle":           func(h *rpcrdma.Header) { h.Writes[0].Segments[0].Handle = 9 },
		"another offset":           func(h *rpcrdma.Header) { h.Writes[0].Segments[0].Offset = 0x2000 },
		"two segments":             func(h *rpcrdma.Header) { h.Writes[0].N = 2 },
		"two write chunks":         func(h *rpcrdma.Header) { h.Writes[1] = h.Writes[0]; h.NWrites = 2 },
		"a read list":              func(h *rpcrdma.Header) { h.NReads = 1 },
		"reply chunk past offer":   func(h *rpcrdma.Header) { h.Proc = rpcrdma.ProcNoMsg; h.Reply.Segments[0].Length = 9000 },
		"RDMA_MSG, used reply":     func(h *rpcrdma.Header) { h.Reply.Segments[0].Length = 10 },
		"RDMA_NOMSG without reply": func(h *rpcrdma.Header) { h.Proc = rpcrdma.ProcNoMsg; h.HasReply = false },
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
	// The reply to a READ whose data filled the write chunk.
	h := &rpcrdma.Header{Xid: 1, Vers: rpcrdma.Version, Credits: 32, Proc: rpcrdma.ProcMsg}
	h.Writes[0].Segments[0], h.Writes[0].N, h.NWrites = rpcrdma.Segment{Handle: 1, Length: 100, Offset: 0x1000}, 1, 1
	f.Add(append(h.Encode(nil), bytes.Repeat([]byte{7}, 40)...))
	f.Add((&rpcrdma.Header{Xid: 1, Vers: 1, Credits: 1, Proc: rpcrdma.ProcError, ErrCode: rpcrdma.ErrChunk}).Encode(nil))
	r, a := testRequest(f)
	f.Fuzz(func(t *testing.T, b []byte) {
		var h rpcrdma.Header
		n, err := h.Decode(b)
		if err != nil {
			return
		}
		if n > len(b) || h.NReads > rpcrdma.MaxSegments || h.NWrites > rpcrdma.MaxWriteChunks || h.Reply.N > rpcrdma.MaxSegments {
			t.Fatalf("decoded beyond limits: n=%d reads=%d writes=%d", n, h.NReads, h.NWrites)
		}
		again := h.Encode(nil)
		var h2 rpcrdma.Header
		if _, err := h2.Decode(again); err != nil || (h.Vers == rpcrdma.Version && h.Proc <= rpcrdma.ProcNoMsg && h2 != h) {
			t.Fatalf("re-encoded header decodes differently: %v", err)
		}
		if h.Vers != rpcrdma.Version || h.Proc == rpcrdma.ProcError {
			return
		}
		msg, payload, err := parseReply(r, &h, b, n)
		if err != nil {
			return
		}
		if !within(msg, b) && !within(msg, a.Mem().Bytes()) {
			t.Fatal("message outside the receive and the request's buffers")
		}
		if payload != nil && !within(payload, r.write.Bytes()) {
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
