package server

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"syscall"
)

// ONC RPC record marking over TCP (RFC 5531 section 11): each record is a
// sequence of fragments, each preceded by a 4-byte header holding its length
// and, in the top bit, whether it is the record's last.
const (
	lastFragment = 1 << 31

	// maxRecord bounds one call: a 1 MiB WRITE (FSINFO's wtmax) with room to
	// spare for clients that write 4 MiB, plus headers. Longer records are a
	// protocol error that ends the connection.
	maxRecord = 4<<20 + 64<<10
	// maxFragments bounds the fragments of one record, so a stream of empty
	// fragments cannot keep the reader looping forever.
	maxFragments = 1024
	// readChunk is how much of a fragment is read (and buffered) at a time:
	// a length a peer merely claims never allocates more than it sends.
	readChunk = 64 << 10
)

var errRecordTooLarge = fmt.Errorf("server: record longer than %d bytes", maxRecord)

// readRecord reads one record into buf (reusing it) and returns it.
func readRecord(r io.Reader, buf []byte) ([]byte, error) {
	var hdr [4]byte
	for frags := 0; ; frags++ {
		if frags == maxFragments {
			return nil, fmt.Errorf("server: record of more than %d fragments", maxFragments)
		}
		if _, err := io.ReadFull(r, hdr[:]); err != nil {
			if frags > 0 && err == io.EOF {
				err = io.ErrUnexpectedEOF
			}
			return nil, err
		}
		mark := binary.BigEndian.Uint32(hdr[:])
		n := int(mark &^ lastFragment)
		if len(buf)+n > maxRecord {
			return nil, errRecordTooLarge
		}
		for n > 0 {
			chunk := min(n, readChunk)
			start := len(buf)
			if cap(buf)-start < chunk {
				grown := make([]byte, start, min(max(2*cap(buf), start+chunk), maxRecord))
				copy(grown, buf)
				buf = grown
			}
			buf = buf[:start+chunk]
			if _, err := io.ReadFull(r, buf[start:]); err != nil {
				if err == io.EOF {
					err = io.ErrUnexpectedEOF
				}
				return nil, err
			}
			n -= chunk
		}
		if mark&lastFragment != 0 {
			return buf, nil
		}
	}
}

func putMark(b []byte, n int) { binary.BigEndian.PutUint32(b, lastFragment|uint32(n)) }

// isEOF reports the ordinary ends of a connection, a client's reset
// among them (clients such as libnfs close with RST).
func isEOF(err error) bool {
	return errors.Is(err, io.EOF) || errors.Is(err, net.ErrClosed) || errors.Is(err, syscall.ECONNRESET)
}
