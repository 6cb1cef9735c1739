package rpcrdma

import "encoding/binary"

// The connection private data of RFC 8797: each end tells the other the
// largest message it will send and the largest it can receive, and whether
// it accepts Send With Invalidate.

const (
	privMagic   = 0xf6ab0e18
	privVersion = 1
	privLen     = 8

	// PrivRemoteInvalidate is the flag bit saying the sender accepts
	// Send With Invalidate.
	PrivRemoteInvalidate = 1 << 0

	// defaultInline is what a peer that sends no private data can take.
	defaultInline = 1024
)

// PrivateData is the content of RFC 8797 private data.
type PrivateData struct {
	Flags    uint8
	SendSize int // the largest message the sender will send
	RecvSize int // the largest message the sender can receive
}

// Encode returns the 8 bytes of the private data. Sizes are sent in units
// of 1 KiB, as (size>>10)-1, so they must be multiples of 1 KiB from 1 KiB
// to 256 KiB.
func (p PrivateData) Encode() []byte {
	b := make([]byte, privLen)
	binary.BigEndian.PutUint32(b, privMagic)
	b[4] = privVersion
	b[5] = p.Flags
	b[6] = encodeSize(p.SendSize)
	b[7] = encodeSize(p.RecvSize)
	return b
}

func encodeSize(n int) uint8 { return uint8(min(max(n>>10, 1), 256) - 1) }

// DecodePrivateData reads the peer's private data. ok is false when b is not
// RFC 8797 private data (absent, too short, another magic or version): the
// peer then takes 1024-byte messages both ways and no Send With
// Invalidate.
func DecodePrivateData(b []byte) (p PrivateData, ok bool) {
	if len(b) < privLen || binary.BigEndian.Uint32(b) != privMagic || b[4] != privVersion {
		return PrivateData{SendSize: defaultInline, RecvSize: defaultInline}, false
	}
	return PrivateData{
		Flags:    b[5],
		SendSize: (int(b[6]) + 1) << 10,
		RecvSize: (int(b[7]) + 1) << 10,
	}, true
}
