package soft

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/rdmafs/rdmafs/verbs"
)

func TestFrameRoundTrip(t *testing.T) {
	frames := []frame{
		{typ: frameConnReq, version: wireVersion, responderResources: 7, initiatorDepth: 3, private: bytes.Repeat([]byte{1}, maxReqPrivate)},
		{typ: frameAccept, responderResources: 1, initiatorDepth: 2, private: bytes.Repeat([]byte{2}, maxAcceptPrivate)},
		{typ: frameReject, reason: 28, private: []byte("no")},
		{typ: frameReady},
		{typ: frameSend, seq: 1 << 40, flags: sendFlagInvalidate, rkey: 0xdeadbeef, length: maxMessage},
		{typ: frameWrite, seq: 2, rkey: 3, addr: 1<<64 - 1, length: 5},
		{typ: frameReadReq, seq: 6, rkey: 7, addr: 8, length: 9},
		{typ: frameReadResp, seq: 10, length: 11},
		{typ: frameAck, seq: 12},
		{typ: frameNak, seq: 13, code: nakRNRExceeded},
		{typ: frameDisconnect},
	}
	var stream []byte
	for i := range frames {
		stream = appendFrame(stream, &frames[i])
	}
	fr := newFrameReader(bytes.NewReader(stream))
	for i, want := range frames {
		var got frame
		if err := fr.next(&got); err != nil {
			t.Fatalf("frame %d (%v): %v", i, want.typ, err)
		}
		if want.private == nil {
			want.private = got.private[:0:0]
			if got.private == nil {
				want.private = nil
			}
		}
		if got.typ != want.typ || got.seq != want.seq || got.flags != want.flags || got.rkey != want.rkey ||
			got.addr != want.addr || got.length != want.length || got.code != want.code || got.version != want.version ||
			got.responderResources != want.responderResources || got.initiatorDepth != want.initiatorDepth ||
			got.reason != want.reason || !bytes.Equal(got.private, want.private) {
			t.Errorf("frame %d: got %+v, want %+v", i, got, want)
		}
	}
	var f frame
	if err := fr.next(&f); err != io.EOF {
		t.Errorf("after the last frame: %v", err)
	}
}

func TestDecodeRejects(t *testing.T) {
	valid := appendFrame(nil, &frame{typ: frameConnReq, version: 1})
	cases := map[string][]byte{
		"type 0":            {0},
		"unknown type":      {byte(frameTypeEnd)},
		"no magic":          append([]byte{byte(frameConnReq)}, make([]byte, fixedLen[frameConnReq])...),
		"long request data": append(append([]byte(nil), valid[:len(valid)-1]...), maxReqPrivate+1),
		"long accept data":  {byte(frameAccept), 0, 0, maxAcceptPrivate + 1},
		"long reject data":  {byte(frameReject), 28, maxRejectPrivate + 1},
		"send flags":        appendFrame(nil, &frame{typ: frameSend, flags: 2}),
		"huge write":        appendFrame(nil, &frame{typ: frameWrite, length: maxMessage + 1}),
		"NAK code 0":        appendFrame(nil, &frame{typ: frameNak, code: 0}),
		"NAK code":          appendFrame(nil, &frame{typ: frameNak, code: nakCodeEnd}),
	}
	for name, b := range cases {
		var f frame
		if _, _, err := decodeFrame(b, &f); err == nil {
			t.Errorf("%s: %x decoded", name, b)
		}
	}
}

// FuzzDecodeFrame decodes arbitrary bytes as a stream of frames: no panic,
// no frame longer than the input, private data within its limits, and
// what decodes encodes to the same bytes.
func FuzzDecodeFrame(f *testing.F) {
	f.Add(appendFrame(nil, &frame{typ: frameConnReq, version: 1, private: []byte("hi")}))
	f.Add(appendFrame(nil, &frame{typ: frameSend, seq: 1, length: 3}))
	f.Add(appendFrame(appendFrame(nil, &frame{typ: frameAck, seq: 9}), &frame{typ: frameNak, seq: 9, code: 1}))
	f.Add([]byte{byte(frameAccept), 1, 2, 3, 'a', 'b', 'c'})
	f.Fuzz(func(t *testing.T, b []byte) {
		for len(b) > 0 {
			var fr frame
			n, need, err := decodeFrame(b, &fr)
			if err != nil {
				return
			}
			if n == 0 {
				if need <= len(b) || need > maxFrameLen {
					t.Fatalf("incomplete frame asks for %d bytes of %d", need, len(b))
				}
				return
			}
			if n > len(b) || n > maxFrameLen || len(fr.private) > maxAcceptPrivate {
				t.Fatalf("frame of %d bytes from %d, %d bytes of private data", n, len(b), len(fr.private))
			}
			if re := appendFrame(nil, &fr); !bytes.Equal(re, b[:n]) {
				t.Fatalf("%v: decoded %x, encodes to %x", fr.typ, b[:n], re)
			}
			b = b[n:]
		}
	})
}

// --- a hostile (or broken) peer, speaking the wire format by hand

type rawPeer struct {
	t  *testing.T
	nc net.Conn
	fr *frameReader
	fw *frameWriter
}

func (r *rawPeer) send(frames ...frame) {
	r.t.Helper()
	for i := range frames {
		if err := r.fw.frame(&frames[i]); err != nil {
			r.t.Fatal(err)
		}
	}
	if err := r.fw.flush(); err != nil {
		r.t.Fatal(err)
	}
}

func (r *rawPeer) write(b []byte) {
	r.t.Helper()
	if _, err := r.nc.Write(b); err != nil {
		r.t.Fatal(err)
	}
}

// next reads the next frame, or fails with the I/O error.
func (r *rawPeer) next() (frame, error) {
	var f frame
	r.nc.SetReadDeadline(time.Now().Add(10 * time.Second))
	err := r.fr.next(&f)
	return f, err
}

type hostileEnv struct {
	pd     *pd
	ln     verbs.Listener
	region *mr
}

func newHostileEnv(t *testing.T) *hostileEnv {
	p := New()
	p.RNRTimeout = 200 * time.Millisecond
	dev, _ := p.Open(context.Background(), "", "")
	vpd, _ := dev.AllocPD()
	ln, err := vpd.Listen("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	mem, _ := verbs.AllocMemory(4096)
	reg, _ := vpd.Register(mem, 0, 4096, verbs.AccessLocalWrite|verbs.AccessRemoteWrite|verbs.AccessRemoteRead)
	t.Cleanup(func() {
		ln.Close()
		reg.Deregister()
		mem.Free()
		vpd.Close()
		dev.Close()
	})
	return &hostileEnv{pd: vpd.(*pd), ln: ln, region: reg.(*mr)}
}

// raw opens a TCP connection to the listener.
func (h *hostileEnv) raw(t *testing.T) *rawPeer {
	nc, err := net.Dial("tcp", h.ln.Addr())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { nc.Close() })
	return &rawPeer{t: t, nc: nc, fr: newFrameReader(nc), fw: newFrameWriter(nc)}
}

// established makes a connection from a raw peer; the server end (a real
// soft connection, with two receives of 100 bytes posted) is returned.
func (h *hostileEnv) established(t *testing.T) (*rawPeer, *conn) {
	r := h.raw(t)
	r.send(frame{typ: frameConnReq, version: wireVersion, responderResources: 1, initiatorDepth: 1})
	req, err := h.ln.Accept(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	ch := make(chan verbs.Conn, 1)
	go func() {
		c, _ := req.Accept(verbs.ConnConfig{SendDepth: 4, RecvDepth: 4, ResponderResources: 1, InitiatorDepth: 1})
		ch <- c
	}()
	if f, err := r.next(); err != nil || f.typ != frameAccept {
		t.Fatalf("accept: %v %v", f.typ, err)
	}
	r.send(frame{typ: frameReady})
	c := (<-ch).(*conn)
	t.Cleanup(func() { c.Close() })
	for i := range 2 {
		if err := c.PostRecv(&verbs.RecvWR{ID: uint64(i), SGL: []verbs.SGE{{MR: h.region, Offset: 100 * i, Length: 100}}}); err != nil {
			t.Fatal(err)
		}
	}
	return r, c
}

func expectEnd(t *testing.T, c *conn, want string) {
	t.Helper()
	select {
	case <-c.Done():
	case <-time.After(10 * time.Second):
		t.Fatalf("connection survived")
	}
	if err := c.Err(); !strings.Contains(err.Error(), want) {
		t.Errorf("connection ended with %v, want %q", err, want)
	}
}

func expectNak(t *testing.T, r *rawPeer, seq uint64, code nakCode) {
	t.Helper()
	for {
		f, err := r.next()
		if err != nil {
			t.Fatalf("waiting for a NAK: %v", err)
		}
		if f.typ == frameAck {
			continue
		}
		if f.typ != frameNak || f.seq != seq || f.code != code {
			t.Fatalf("got %v seq %d code %d, want NAK %d code %d", f.typ, f.seq, f.code, seq, code)
		}
		return
	}
}

func TestHostileHandshake(t *testing.T) {
	h := newHostileEnv(t)
	bad := map[string][]byte{
		"garbage":        []byte("GET / HTTP/1.1\r\n\r\n"),
		"wrong magic":    append([]byte{byte(frameConnReq)}, make([]byte, 20)...),
		"long private":   append(appendFrame(nil, &frame{typ: frameConnReq, version: 1})[:13], 200),
		"wrong version":  appendFrame(nil, &frame{typ: frameConnReq, version: 99}),
		"data first":     appendFrame(nil, &frame{typ: frameWrite, length: 1 << 30}),
		"accept instead": appendFrame(nil, &frame{typ: frameAccept}),
	}
	for name, b := range bad {
		r := h.raw(t)
		r.write(b)
		if f, err := r.next(); err == nil {
			t.Errorf("%s: answered with %v", name, f.typ)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	if req, err := h.ln.Accept(ctx); err == nil {
		t.Errorf("a bad handshake became a connection request from %s", req.RemoteAddr())
	}
}

func TestHostilePeer(t *testing.T) {
	t.Run("HugeWriteBadKey", func(t *testing.T) {
		h := newHostileEnv(t)
		r, c := h.established(t)
		r.send(frame{typ: frameWrite, seq: 1, rkey: 0x12345678, addr: 0, length: maxMessage})
		expectNak(t, r, 1, nakRemoteAccess)
		expectEnd(t, c, "remote access error")
	})
	t.Run("WriteOutOfBounds", func(t *testing.T) {
		h := newHostileEnv(t)
		r, c := h.established(t)
		r.send(frame{typ: frameWrite, seq: 1, rkey: h.region.key, addr: h.region.addr + 4000, length: maxMessage})
		expectNak(t, r, 1, nakRemoteAccess)
		expectEnd(t, c, "outside")
	})
	t.Run("HugeSend", func(t *testing.T) {
		h := newHostileEnv(t)
		r, c := h.established(t)
		r.send(frame{typ: frameSend, seq: 1, length: maxMessage})
		expectNak(t, r, 1, nakInvalidRequest)
		expectEnd(t, c, "local length error")
		var wc [2]verbs.Completion
		if n, _ := c.Poll(wc[:]); n != 2 || wc[0].Status != verbs.StatusLocLenErr || wc[1].Status != verbs.StatusWRFlushErr {
			t.Errorf("completions %+v", wc[:n])
		}
	})
	t.Run("SendThenVanish", func(t *testing.T) {
		h := newHostileEnv(t)
		r, c := h.established(t)
		r.send(frame{typ: frameSend, seq: 1, length: 100})
		r.write(make([]byte, 50))
		r.nc.Close()
		expectEnd(t, c, "connection lost")
		var wc [2]verbs.Completion
		if n, _ := c.Poll(wc[:]); n != 2 || wc[0].Status != verbs.StatusWRFlushErr {
			t.Errorf("completions %+v", wc[:n])
		}
	})
	t.Run("TooManyReads", func(t *testing.T) {
		h := newHostileEnv(t)
		r, c := h.established(t)
		// Reads are answered as the sender gets to them; send many
		// without reading so that more than one is outstanding.
		var frames []frame
		for i := range 64 {
			frames = append(frames, frame{typ: frameReadReq, seq: uint64(i + 1), rkey: h.region.key, addr: h.region.addr, length: 4096})
		}
		r.send(frames...)
		for {
			f, err := r.next()
			if err != nil {
				t.Fatalf("no NAK: %v", err)
			}
			if f.typ == frameReadResp {
				if err := r.fr.payload(int(f.length), func([]byte) {}); err != nil {
					t.Fatal(err)
				}
				continue
			}
			if f.typ != frameNak || f.code != nakInvalidRequest {
				t.Fatalf("got %v", f.typ)
			}
			break
		}
		expectEnd(t, c, "responder resources")
	})
	for name, f := range map[string]frame{
		"WrongSequence":       {typ: frameSend, seq: 7, length: 1},
		"UnsolicitedReadResp": {typ: frameReadResp, seq: 1, length: 1 << 30},
		"AckUnsent":           {typ: frameAck, seq: 5},
		"NakUnsent":           {typ: frameNak, seq: 5, code: nakRemoteAccess},
		"SecondRequest":       {typ: frameConnReq, version: 1},
	} {
		t.Run(name, func(t *testing.T) {
			h := newHostileEnv(t)
			r, c := h.established(t)
			r.send(f)
			expectEnd(t, c, "protocol error")
		})
	}
	t.Run("GarbageFrame", func(t *testing.T) {
		h := newHostileEnv(t)
		r, c := h.established(t)
		r.write([]byte{0xff, 1, 2, 3})
		expectEnd(t, c, "unknown frame")
		if !errors.Is(c.Err(), verbs.ErrDisconnected) {
			t.Errorf("Err %v", c.Err())
		}
	})
}
