package soft

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
)

// The wire format between two soft endpoints: a stream of frames over one
// TCP connection. A frame is a type byte and a fixed header for its type;
// the connection manager's frames end with private data (a length byte,
// then the bytes), and SEND, WRITE and READ_RESP frames are followed by
// their payload, whose length the header gives. All integers are big
// endian. It is rdmafs's own format, not RoCE or iWARP.
//
// Decoding never trusts a length: private data is limited to what RDMA CM
// allows, and a payload is not part of a frame here at all; the connection
// reads it straight into registered memory after checking that it fits
// there, so a hostile peer cannot make the decoder allocate.

type frameType uint8

const (
	frameConnReq    frameType = 1 + iota // connect request: magic, version, resources, private data
	frameAccept                          // accept: resources, private data
	frameReject                          // reject: reason, private data
	frameReady                           // ready to use: the dialer saw the accept
	frameSend                            // SEND (optionally with invalidate), then the payload
	frameWrite                           // RDMA WRITE, then the payload
	frameReadReq                         // RDMA READ request
	frameReadResp                        // RDMA READ response, then the payload
	frameAck                             // SENDs and WRITEs up to seq executed
	frameNak                             // request seq failed; the connection ends
	frameDisconnect                      // orderly disconnect
	frameTypeEnd
)

var frameNames = [...]string{"", "CONNECT_REQUEST", "ACCEPT", "REJECT", "READY", "SEND", "WRITE",
	"READ_REQUEST", "READ_RESPONSE", "ACK", "NAK", "DISCONNECT"}

func (t frameType) String() string {
	if t > 0 && t < frameTypeEnd {
		return frameNames[t]
	}
	return fmt.Sprintf("frame(%d)", uint8(t))
}

// Limits of what a frame may carry.
const (
	maxReqPrivate    = 56  // RDMA CM: private data of a connect request
	maxAcceptPrivate = 196 // of an accept
	maxRejectPrivate = 148 // of a reject
	maxMessage       = 1 << 31

	wireVersion = 1
)

// wireMagic starts a connect request, so that a stray TCP client (or a
// peer speaking something else) is told apart from a soft peer at once.
var wireMagic = [8]byte{'r', 'd', 'm', 'a', 'f', 's', 'S', 'V'}

// sendFlagInvalidate marks a SEND with invalidate.
const sendFlagInvalidate = 1

// nakCode says why a request failed at the responder.
type nakCode uint8

const (
	nakRemoteAccess   nakCode = 1 + iota // bad rkey, missing access right, out of bounds
	nakInvalidRequest                    // message too long for the receive buffer, too many reads, bad invalidation
	nakRNRExceeded                       // no receive was posted within the RNR bound
	nakRemoteOp                          // the responder failed for a reason of its own
	nakCodeEnd
)

// frame is a decoded frame header.
type frame struct {
	typ    frameType
	seq    uint64 // SEND, WRITE, READ_REQUEST, READ_RESPONSE, ACK, NAK
	flags  uint8  // SEND
	rkey   uint32 // WRITE, READ_REQUEST: the target; SEND: the rkey to invalidate
	addr   uint64 // WRITE, READ_REQUEST
	length uint32 // SEND, WRITE, READ_RESPONSE: payload bytes; READ_REQUEST: bytes asked for
	code   nakCode

	// connection manager
	version                            uint16
	responderResources, initiatorDepth uint8
	reason                             uint8 // REJECT
	private                            []byte
}

// fixedLen is the length of each frame type's header after the type
// byte, without private data.
var fixedLen = [frameTypeEnd]int{
	frameConnReq:    8 + 2 + 1 + 1 + 1,
	frameAccept:     1 + 1 + 1,
	frameReject:     1 + 1,
	frameReady:      0,
	frameSend:       8 + 1 + 4 + 4,
	frameWrite:      8 + 4 + 8 + 4,
	frameReadReq:    8 + 4 + 8 + 4,
	frameReadResp:   8 + 4,
	frameAck:        8,
	frameNak:        8 + 1,
	frameDisconnect: 0,
}

// maxFrameLen is the longest frame header.
const maxFrameLen = 1 + 3 + maxAcceptPrivate

var (
	errUnknownFrame = errors.New("verbs/soft: protocol error: unknown frame type")
	errFrameField   = errors.New("verbs/soft: protocol error: bad frame field")
)

// appendFrame appends f's encoding to b.
func appendFrame(b []byte, f *frame) []byte {
	be := binary.BigEndian
	b = append(b, byte(f.typ))
	switch f.typ {
	case frameConnReq:
		b = append(b, wireMagic[:]...)
		b = be.AppendUint16(b, f.version)
		b = append(b, f.responderResources, f.initiatorDepth, byte(len(f.private)))
		b = append(b, f.private...)
	case frameAccept:
		b = append(b, f.responderResources, f.initiatorDepth, byte(len(f.private)))
		b = append(b, f.private...)
	case frameReject:
		b = append(b, f.reason, byte(len(f.private)))
		b = append(b, f.private...)
	case frameSend:
		b = be.AppendUint64(b, f.seq)
		b = append(b, f.flags)
		b = be.AppendUint32(b, f.rkey)
		b = be.AppendUint32(b, f.length)
	case frameWrite, frameReadReq:
		b = be.AppendUint64(b, f.seq)
		b = be.AppendUint32(b, f.rkey)
		b = be.AppendUint64(b, f.addr)
		b = be.AppendUint32(b, f.length)
	case frameReadResp:
		b = be.AppendUint64(b, f.seq)
		b = be.AppendUint32(b, f.length)
	case frameAck:
		b = be.AppendUint64(b, f.seq)
	case frameNak:
		b = be.AppendUint64(b, f.seq)
		b = append(b, byte(f.code))
	}
	return b
}

// decodeFrame decodes the frame at the start of b into f. It returns the
// frame's length, or, when b holds only part of it, need > len(b): how
// many bytes to look at before trying again. Private data is copied, so f
// does not keep b.
func decodeFrame(b []byte, f *frame) (n, need int, err error) {
	if len(b) < 1 {
		return 0, 1, nil
	}
	t := frameType(b[0])
	if t == 0 || t >= frameTypeEnd {
		return 0, 0, fmt.Errorf("%w %d", errUnknownFrame, b[0])
	}
	n = 1 + fixedLen[t]
	if len(b) < n {
		return 0, n, nil
	}
	be := binary.BigEndian
	h := b[1:n]
	*f = frame{typ: t}
	var privLen, privMax int
	switch t {
	case frameConnReq:
		if [8]byte(h[:8]) != wireMagic {
			return 0, 0, fmt.Errorf("%w: connect request without the soft provider's magic (not a soft peer?)", errFrameField)
		}
		f.version = be.Uint16(h[8:])
		f.responderResources, f.initiatorDepth = h[10], h[11]
		privLen, privMax = int(h[12]), maxReqPrivate
	case frameAccept:
		f.responderResources, f.initiatorDepth = h[0], h[1]
		privLen, privMax = int(h[2]), maxAcceptPrivate
	case frameReject:
		f.reason = h[0]
		privLen, privMax = int(h[1]), maxRejectPrivate
	case frameSend:
		f.seq = be.Uint64(h)
		f.flags = h[8]
		f.rkey = be.Uint32(h[9:])
		f.length = be.Uint32(h[13:])
		if f.flags&^sendFlagInvalidate != 0 {
			return 0, 0, fmt.Errorf("%w: SEND flags %#x", errFrameField, f.flags)
		}
	case frameWrite, frameReadReq:
		f.seq = be.Uint64(h)
		f.rkey = be.Uint32(h[8:])
		f.addr = be.Uint64(h[12:])
		f.length = be.Uint32(h[20:])
	case frameReadResp:
		f.seq = be.Uint64(h)
		f.length = be.Uint32(h[8:])
	case frameAck:
		f.seq = be.Uint64(h)
	case frameNak:
		f.seq = be.Uint64(h)
		f.code = nakCode(h[8])
		if f.code == 0 || f.code >= nakCodeEnd {
			return 0, 0, fmt.Errorf("%w: NAK code %d", errFrameField, f.code)
		}
	}
	if f.length > maxMessage {
		return 0, 0, fmt.Errorf("%w: %v of %d bytes (limit %d)", errFrameField, t, f.length, maxMessage)
	}
	if privLen > privMax {
		return 0, 0, fmt.Errorf("%w: %v with %d bytes of private data (limit %d)", errFrameField, t, privLen, privMax)
	}
	if privLen > 0 {
		if len(b) < n+privLen {
			return 0, n + privLen, nil
		}
		f.private = append([]byte(nil), b[n:n+privLen]...)
		n += privLen
	}
	return n, 0, nil
}

// frameReader reads frames and payloads from a connection. Payloads are
// handed out in pieces of its buffer (Peek/Discard), so reading one never
// allocates, whatever length the peer claims.
type frameReader struct {
	r *bufio.Reader
}

const ioBufferSize = 64 << 10

func newFrameReader(r io.Reader) *frameReader {
	return &frameReader{r: bufio.NewReaderSize(r, ioBufferSize)}
}

// next reads the next frame header into f.
func (fr *frameReader) next(f *frame) error {
	need := 1
	for {
		b, err := fr.r.Peek(need)
		if err != nil {
			if errors.Is(err, io.EOF) && len(b) > 0 {
				err = io.ErrUnexpectedEOF
			}
			return err
		}
		n, more, err := decodeFrame(b, f)
		if err != nil {
			return err
		}
		if n > 0 {
			_, err = fr.r.Discard(n)
			return err
		}
		need = more
	}
}

// payload calls put with consecutive pieces of the next n payload bytes
// (each at most the buffer's size) until all n are consumed.
func (fr *frameReader) payload(n int, put func([]byte)) error {
	for n > 0 {
		if fr.r.Buffered() == 0 {
			// Fill the buffer with what the connection has.
			if _, err := fr.r.Peek(1); err != nil {
				if errors.Is(err, io.EOF) {
					err = io.ErrUnexpectedEOF
				}
				return err
			}
		}
		b, err := fr.r.Peek(min(n, fr.r.Buffered()))
		if err != nil {
			return err
		}
		put(b)
		if _, err := fr.r.Discard(len(b)); err != nil {
			return err
		}
		n -= len(b)
	}
	return nil
}

// frameWriter buffers frames on their way to the connection; the sender
// flushes it when it has nothing more to send, so small frames (ACKs)
// share a write.
type frameWriter struct {
	w   io.Writer
	buf []byte
}

func newFrameWriter(w io.Writer) *frameWriter {
	return &frameWriter{w: w, buf: make([]byte, 0, ioBufferSize)}
}

// frame appends f's header.
func (fw *frameWriter) frame(f *frame) error {
	if cap(fw.buf)-len(fw.buf) < maxFrameLen {
		if err := fw.flush(); err != nil {
			return err
		}
	}
	fw.buf = appendFrame(fw.buf, f)
	return nil
}

// payload appends n payload bytes, which get fills with pieces of the
// buffer: get(dst) must fill all of dst and may fail.
func (fw *frameWriter) payload(n int, get func(dst []byte) error) error {
	for n > 0 {
		if len(fw.buf) == cap(fw.buf) {
			if err := fw.flush(); err != nil {
				return err
			}
		}
		k := min(n, cap(fw.buf)-len(fw.buf))
		dst := fw.buf[len(fw.buf) : len(fw.buf)+k]
		if err := get(dst); err != nil {
			return err
		}
		fw.buf = fw.buf[:len(fw.buf)+k]
		n -= k
	}
	return nil
}

func (fw *frameWriter) buffered() int { return len(fw.buf) }

func (fw *frameWriter) flush() error {
	if len(fw.buf) == 0 {
		return nil
	}
	_, err := fw.w.Write(fw.buf)
	fw.buf = fw.buf[:0]
	return err
}
