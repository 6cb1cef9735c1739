package lockd

import (
	"crypto/rand"
	"encoding/binary"
	"fmt"
)

// owners maps FUSE lock owners to NLM svids, and to who they are for
// F_GETLK. An owner keeps its svid while it holds or waits for a lock; the
// maps are guarded by Client.mu.
type owners struct {
	base, next uint32
	bySvid     map[uint64]int32
	holders    map[uint64]Holder
}

// Holder is who takes a lock, as F_GETLK names it to another process of
// this host.
type Holder struct {
	// Pid is the process that took it, in the pid namespace FUSE gives
	// pids in.
	Pid uint32
	// Posix: an fcntl(2) lock. F_GETLK looks for the conflicting locks
	// of this host among these first, as the kernel's client does in its
	// own lock table (do_getlk); a flock(2) lock is not in that table,
	// and only the server's TEST finds it.
	Posix bool
}

func (o *owners) init() {
	var b [4]byte
	_, _ = rand.Read(b[:])
	// 2^30 + up to 2^29: far above the kernel client's small numbers and
	// with room for 2^29 owners before wrapping into another rdmafs's.
	o.base = 1<<30 + binary.BigEndian.Uint32(b[:])%(1<<29)
	o.bySvid = make(map[uint64]int32)
	o.holders = make(map[uint64]Holder)
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
