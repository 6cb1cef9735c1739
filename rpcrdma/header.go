package rpcrdma

import (
	"errors"
	"fmt"

	"github.com/rdmafs/rdmafs/sunrpc/xdr"
)

// The transport header of RPC-over-RDMA Version One (RFC 8166 section 4):
// xid, version, credits and a procedure, then for RDMA_MSG and RDMA_NOMSG
// the three chunk lists, for RDMA_ERROR an error code.

// Version is the RPC-over-RDMA version rdmafs speaks.
const Version = 1

// The procedures of a transport header.
const (
	ProcMsg   = 0 // RDMA_MSG: the RPC message follows the header
	ProcNoMsg = 1 // RDMA_NOMSG: the RPC message is in a chunk
	ProcMsgp  = 2 // RDMA_MSGP: deprecated, never valid in Version One
	ProcDone  = 3 // RDMA_DONE: deprecated, never valid in Version One
	ProcError = 4 // RDMA_ERROR
)

// The error codes of RDMA_ERROR.
const (
	ErrVers  = 1 // ERR_VERS: the version is not supported
	ErrChunk = 2 // ERR_CHUNK: the chunk lists could not be processed
)

// Limits of a header. The Linux client puts at most 16 segments in a chunk
// list; rdmafs offers at most one write chunk, and accepts a few more in a
// reply only to say what is wrong with it.
const (
	MaxSegments    = 16
	MaxWriteChunks = 4
)

// Encoded sizes, for choosing how a message goes before encoding its
// header.
const (
	headerFixed  = 4 * 4 // xid, vers, credits, proc
	listEnd      = 4     // the "no more entries" of a list
	segmentBytes = 16
	// ReadEntryLen is what one segment of a read chunk adds to a header.
	ReadEntryLen = 4 + 4 + segmentBytes
)

// Segment is an rdma_segment: Length bytes of the memory named by Handle
// (an rkey), at Offset (the address the peer uses).
type Segment struct {
	Handle uint32
	Length uint32
	Offset uint64
}

// ReadSegment is a segment of a read chunk, at Position in the RPC message.
type ReadSegment struct {
	Position uint32
	Segment
}

// WriteChunk is a write chunk, or the reply chunk: a counted array of
// segments.
type WriteChunk struct {
	Segments [MaxSegments]Segment
	N        int
}

// Len is the total length of the chunk's segments.
func (c *WriteChunk) Len() uint64 {
	var n uint64
	for _, s := range c.Segments[:c.N] {
		n += uint64(s.Length)
	}
	return n
}

// Header is a decoded or to-be-encoded transport header. It is a plain
// value with room for the most segments rdmafs accepts, so decoding one
// does not allocate.
type Header struct {
	Xid     uint32
	Vers    uint32
	Credits uint32
	Proc    uint32

	Reads  [MaxSegments]ReadSegment
	NReads int

	Writes  [MaxWriteChunks]WriteChunk
	NWrites int

	Reply    WriteChunk
	HasReply bool

	// RDMA_ERROR
	ErrCode           uint32
	VersLow, VersHigh uint32
}

// Errors of a header that does not decode.
var (
	ErrShortHeader = errors.New("rpcrdma: header too short")
	errTooMany     = errors.New("rpcrdma: too many segments")
)

// EncodedLen is the length of the header's encoding (of RDMA_MSG or
// RDMA_NOMSG).
func (h *Header) EncodedLen() int {
	n := headerFixed + listEnd + listEnd + 4
	n += h.NReads * ReadEntryLen
	for i := range h.Writes[:h.NWrites] {
		n += 4 + 4 + segmentBytes*h.Writes[i].N
	}
	if h.HasReply {
		n += 4 + segmentBytes*h.Reply.N
	}
	return n
}

// Encode appends the header to buf.
func (h *Header) Encode(buf []byte) []byte {
	e := xdr.Encoder{Buf: buf}
	e.Uint32(h.Xid)
	e.Uint32(h.Vers)
	e.Uint32(h.Credits)
	e.Uint32(h.Proc)
	if h.Proc == ProcError {
		e.Uint32(h.ErrCode)
		if h.ErrCode == ErrVers {
			e.Uint32(h.VersLow)
			e.Uint32(h.VersHigh)
		}
		return e.Buf
	}
	for _, r := range h.Reads[:h.NReads] {
		e.Bool(true)
		e.Uint32(r.Position)
		putSegment(&e, &r.Segment)
	}
	e.Bool(false)
	for i := range h.Writes[:h.NWrites] {
		e.Bool(true)
		putChunk(&e, &h.Writes[i])
	}
	e.Bool(false)
	e.Bool(h.HasReply)
	if h.HasReply {
		putChunk(&e, &h.Reply)
	}
	return e.Buf
}

func putSegment(e *xdr.Encoder, s *Segment) {
	e.Uint32(s.Handle)
	e.Uint32(s.Length)
	e.Uint64(s.Offset)
}

func putChunk(e *xdr.Encoder, c *WriteChunk) {
	e.Uint32(uint32(c.N))
	for i := range c.Segments[:c.N] {
		putSegment(e, &c.Segments[i])
	}
}

// Decode decodes the header at the start of b and returns its length: the
// RPC message of an RDMA_MSG starts there. It checks every count against
// what rdmafs accepts and what remains of b. The version is not checked:
// the caller decides what to do with another.
func (h *Header) Decode(b []byte) (int, error) {
	*h = Header{}
	d := xdr.NewDecoder(b)
	h.Xid = d.Uint32()
	h.Vers = d.Uint32()
	h.Credits = d.Uint32()
	h.Proc = d.Uint32()
	if d.Err() != nil {
		return 0, ErrShortHeader
	}
	if h.Vers != Version {
		return d.Offset(), nil
	}
	switch h.Proc {
	case ProcMsg, ProcNoMsg:
	case ProcError:
		h.ErrCode = d.Uint32()
		if h.ErrCode == ErrVers {
			h.VersLow, h.VersHigh = d.Uint32(), d.Uint32()
		}
		if d.Err() != nil {
			return 0, ErrShortHeader
		}
		return d.Offset(), nil
	default:
		return 0, fmt.Errorf("rpcrdma: procedure %d", h.Proc)
	}
	for d.Bool() {
		if h.NReads == MaxSegments {
			return 0, errTooMany
		}
		r := &h.Reads[h.NReads]
		r.Position = d.Uint32()
		getSegment(&d, &r.Segment)
		h.NReads++
	}
	for d.Bool() {
		if h.NWrites == MaxWriteChunks {
			return 0, errTooMany
		}
		if err := getChunk(&d, &h.Writes[h.NWrites]); err != nil {
			return 0, err
		}
		h.NWrites++
	}
	if h.HasReply = d.Bool(); h.HasReply {
		if err := getChunk(&d, &h.Reply); err != nil {
			return 0, err
		}
	}
	if err := d.Err(); err != nil {
		return 0, fmt.Errorf("rpcrdma: header: %w", err)
	}
	return d.Offset(), nil
}

func getSegment(d *xdr.Decoder, s *Segment) {
	s.Handle = d.Uint32()
	s.Length = d.Uint32()
	s.Offset = d.Uint64()
}

func getChunk(d *xdr.Decoder, c *WriteChunk) error {
	n := d.Uint32()
	if n > MaxSegments {
		return errTooMany
	}
	c.N = int(n)
	for i := range c.Segments[:c.N] {
		getSegment(d, &c.Segments[i])
	}
	return d.Err()
}
