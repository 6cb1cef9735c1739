//go:build rdmafs_scrub

package xdr

import "sync/atomic"

// Scrubbing reports whether Scrub overwrites buffers: the build has the
// rdmafs_scrub tag (make test builds with it).
const Scrubbing = true

var scrubs atomic.Uint32

// Scrub overwrites all of b's capacity with garbage. The pools of receive
// buffers call it as a buffer comes back, so a view of a received message
// (a handle, a name, READ data) kept past its call reads garbage, at once
// and every time, and tests fail; the race detector cannot see such a
// view, as the pool's hand-over orders the accesses. The byte differs from
// one scrub to the next, so two scrubbed views do not compare equal.
func Scrub(b []byte) {
	b = b[:cap(b)]
	v := byte(0xa5 ^ scrubs.Add(1)<<1)
	for i := range b {
		b[i] = v
	}
}
