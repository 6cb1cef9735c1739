package lockd

import (
	"crypto/rand"
	"encoding/binary"
	"fmt"
)

// owners maps FUSE lock owners to NLM svids. An owner keeps its svid while
// it holds or waits for a lock; the map is guarded by Client.mu.
type owners struct {
	base, next uint32
	bySvid     map[uint64]int32
}

func (o *owners) init() {
	var b [4]byte
	_, _ = rand.Read(b[:])
	// 2^30 + up to 2^29: far above the kernel client's small numbers and
	// with room for 2^29 owners before wrapping into another rdmafs's.
	o.base = 1<<30 + binary.BigEndian.Uint32(b[:])%(1<<29)
	o.bySvid = make(map[uint64]int32)
}

// svid returns owner's svid, giving it one if it has none.
func (o *owners) svid(owner uint64) int32 {
	if s, ok := o.bySvid[owner]; ok {
		return s
	}
	s := int32((o.base + o.next) & 0x7fffffff)
	o.next++
	o.bySvid[owner] = s
	return s
}

// ownerHandle is the oh of owner's locks: "svid@host", as Linux's client
// sends "pid@host".
func ownerHandle(svid int32, host string) []byte {
	return fmt.Appendf(nil, "%d@%s", svid, host)
}
