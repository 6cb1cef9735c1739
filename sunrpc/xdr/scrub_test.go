package xdr

import (
	"bytes"
	"testing"
)

// TestScrub: with the rdmafs_scrub tag, a scrubbed buffer holds none of
// what it held, up to its capacity; without it, Scrub leaves it alone.
func TestScrub(t *testing.T) {
	b := make([]byte, 8, 16)
	full := b[:cap(b)]
	for i := range full {
		full[i] = byte(i)
	}
	orig := bytes.Clone(full)
	Scrub(b)
	if !Scrubbing {
		if !bytes.Equal(full, orig) {
			t.Fatalf("Scrub without the rdmafs_scrub tag changed the buffer: %x", full)
		}
		return
	}
	for i, v := range full {
		if v == orig[i] {
			t.Errorf("byte %d still %#x after Scrub", i, v)
		}
	}
	first := bytes.Clone(full)
	Scrub(b)
	if bytes.Equal(first, full) {
		t.Error("two scrubs left the same bytes")
	}
}
