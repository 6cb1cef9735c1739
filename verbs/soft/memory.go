package soft

import (
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"syscall"
	"unsafe"

	"github.com/rdmafs/rdmafs/verbs"
)

// Keys: an rkey (and lkey) is (index << 8) | key. The index names the
// region or window in device.objs; the low byte is the key, which a window
// bind changes, so a stale rkey stops matching. Indexes are handed out in
// order and reused only after the 24-bit space wraps.

const maxIndex = 1<<24 - 1

// newIndexLocked returns an unused index and records obj under it. The
// caller holds d.mu.
func (d *device) newIndexLocked(obj any) (uint32, error) {
	for range maxIndex {
		i := d.nextIndex
		d.nextIndex++
		if d.nextIndex > maxIndex {
			d.nextIndex = 1
		}
		if _, used := d.objs[i]; !used {
			d.objs[i] = obj
			return i, nil
		}
	}
	return 0, syscall.ENOMEM
}

// mr is a registered region.
type mr struct {
	pd     *pd
	mem    []byte // the registered bytes
	addr   uint64 // address of mem[0], the region's remote address
	key    uint32 // lkey and rkey
	access verbs.Access

	// mu is held for reading while the region's memory is copied, and
	// for writing by Deregister, which so waits for copies in progress:
	// after Deregister returns, nothing here touches the memory, and
	// the caller may unmap it.
	mu   sync.RWMutex
	dead bool

	windows int // windows bound to the region (device.mu)
}

func (pd *pd) Register(m *verbs.Memory, off, length int, access verbs.Access) (verbs.MR, error) {
	if m == nil || m.Bytes() == nil {
		return nil, &verbs.VerbError{Verb: "reg_mr", Err: fmt.Errorf("no memory: %w", syscall.EINVAL)}
	}
	b := m.Bytes()
	if off < 0 || length <= 0 || off > len(b) || length > len(b)-off {
		return nil, &verbs.VerbError{Verb: "reg_mr", Err: fmt.Errorf("%d bytes at %d of %d bytes of memory: %w", length, off, len(b), syscall.EINVAL)}
	}
	if uint64(length) > softCaps.MaxMRSize {
		return nil, &verbs.VerbError{Verb: "reg_mr", Err: syscall.EINVAL}
	}
	// As on hardware: remote write needs local write.
	if access&verbs.AccessRemoteWrite != 0 && access&verbs.AccessLocalWrite == 0 {
		return nil, &verbs.VerbError{Verb: "reg_mr", Err: fmt.Errorf("remote write access without local write access: %w", syscall.EINVAL)}
	}
	if access&^(verbs.AccessLocalWrite|verbs.AccessRemoteWrite|verbs.AccessRemoteRead|verbs.AccessMWBind) != 0 {
		return nil, &verbs.VerbError{Verb: "reg_mr", Err: fmt.Errorf("access %#x: %w", access, syscall.EINVAL)}
	}
	if err := pd.use(&pd.mrs, 1); err != nil {
		return nil, err
	}
	r := &mr{pd: pd, mem: b[off : off+length : off+length], access: access}
	r.addr = uint64(uintptr(unsafe.Pointer(&r.mem[0])))
	d := pd.dev
	d.mu.Lock()
	i, err := d.newIndexLocked(r)
	if err == nil {
		r.key = i<<8 | uint32(rand.N(256))
	}
	d.mu.Unlock()
	if err != nil {
		pd.use(&pd.mrs, -1)
		return nil, &verbs.VerbError{Verb: "reg_mr", Err: err}
	}
	return r, nil
}

func (r *mr) LKey() uint32  { return r.key }
func (r *mr) RKey() uint32  { return r.key }
func (r *mr) Addr() uint64  { return r.addr }
func (r *mr) Bytes() []byte { return r.mem }

func (r *mr) Deregister() error {
	d := r.pd.dev
	d.mu.Lock()
	if r.dead {
		d.mu.Unlock()
		return nil
	}
	if r.windows > 0 {
		n := r.windows
		d.mu.Unlock()
		return &verbs.VerbError{Verb: "dereg_mr", Err: fmt.Errorf("%d memory windows still bound to the region: %w", n, syscall.EBUSY)}
	}
	delete(d.objs, r.key>>8)
	// Under d.mu, so that no new remote access finds the region; the
	// lock below waits for the copies already under way.
	r.mu.Lock()
	r.dead = true
	r.mu.Unlock()
	d.mu.Unlock()
	r.pd.use(&r.pd.mrs, -1)
	return nil
}

// copyOut copies len(dst) bytes of the region from off into dst; false if
// the region is gone.
func (r *mr) copyOut(dst []byte, off int) bool {
	r.mu.RLock()
	defer r.mu.RUnlock()
	if r.dead {
		return false
	}
	copy(dst, r.mem[off:off+len(dst)])
	return true
}

// copyIn copies src into the region at off; false if the region is gone.
func (r *mr) copyIn(off int, src []byte) bool {
	r.mu.RLock()
	defer r.mu.RUnlock()
	if r.dead {
		return false
	}
	copy(r.mem[off:off+len(src)], src)
	return true
}

// mw is a type 2 memory window.
type mw struct {
	pd    *pd
	index uint32
	// posted is the key of the latest bind posted (what RKey returns).
	posted atomic.Uint32

	// The binding, under device.mu.
	key    uint32 // rkey in force (valid while bound)
	bound  bool
	mr     *mr
	addr   uint64
	length uint64
	access verbs.Access
	conn   *conn // the connection the window was bound through (type 2B)
	closed bool
}

func (pd *pd) AllocMW() (verbs.MW, error) {
	if err := pd.use(&pd.mws, 1); err != nil {
		return nil, err
	}
	w := &mw{pd: pd}
	d := pd.dev
	d.mu.Lock()
	i, err := d.newIndexLocked(w)
	if err == nil {
		w.index = i
		w.key = i<<8 | uint32(rand.N(256))
		w.posted.Store(w.key)
	}
	d.mu.Unlock()
	if err != nil {
		pd.use(&pd.mws, -1)
		return nil, &verbs.VerbError{Verb: "alloc_mw", Err: err}
	}
	return w, nil
}

func (w *mw) RKey() uint32 { return w.posted.Load() }

func (w *mw) Close() error {
	d := w.pd.dev
	d.mu.Lock()
	if w.closed {
		d.mu.Unlock()
		return nil
	}
	w.closed = true
	w.unbindLocked()
	delete(d.objs, w.index)
	d.mu.Unlock()
	w.pd.use(&w.pd.mws, -1)
	return nil
}

func (w *mw) unbindLocked() {
	if w.bound {
		w.mr.windows--
		w.bound, w.mr, w.conn = false, nil, nil
	}
}

// bind executes an OpBindMW for connection c: false if the bind is not
// allowed (StatusMWBindErr).
func (d *device) bind(c *conn, wr *sendWQE) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	w, r := wr.mw, wr.bindMR
	switch {
	case w.closed:
		return fmt.Errorf("window deallocated")
	case w.bound:
		// o10-37.2.30: a type 2 window is bound only from the free state.
		return fmt.Errorf("window %#x is bound: invalidate it first", w.key)
	case r.dead:
		return fmt.Errorf("region deregistered")
	case r.access&verbs.AccessMWBind == 0:
		return fmt.Errorf("region %#x registered without AccessMWBind", r.key)
	case wr.bindAccess&verbs.AccessRemoteWrite != 0 && r.access&verbs.AccessLocalWrite == 0:
		return fmt.Errorf("a writable window needs a region with local write access")
	case wr.bindLen == 0:
		return fmt.Errorf("zero-length bind")
	case wr.bindOff < 0 || wr.bindLen < 0 || wr.bindOff > len(r.mem) || wr.bindLen > len(r.mem)-wr.bindOff:
		return fmt.Errorf("%d bytes at %d outside the region's %d", wr.bindLen, wr.bindOff, len(r.mem))
	}
	w.key = wr.newKey
	w.bound, w.mr, w.conn = true, r, c
	w.addr = r.addr + uint64(wr.bindOff)
	w.length = uint64(wr.bindLen)
	w.access = wr.bindAccess
	r.windows++
	return nil
}

// invalidate invalidates the window that rkey names, for a local
// invalidation (remote false) or a SEND with invalidate arriving on c.
func (d *device) invalidate(c *conn, rkey uint32, remote bool) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	w, ok := d.objs[rkey>>8].(*mw)
	switch {
	case !ok:
		return fmt.Errorf("rkey %#x names no memory window (regions cannot be invalidated)", rkey)
	case w.pd != c.pd:
		return fmt.Errorf("rkey %#x: window of another protection domain", rkey)
	case w.key != rkey:
		return fmt.Errorf("rkey %#x: the window's key is %#x", rkey, w.key)
	case remote && !w.bound:
		return fmt.Errorf("rkey %#x: window not bound", rkey)
	case remote && w.conn != c:
		return fmt.Errorf("rkey %#x: window bound through another connection", rkey)
	}
	w.unbindLocked()
	return nil
}

// resolve checks a remote access of n bytes at addr with rkey by the peer
// of c, needing access need, and returns the region and the offset in it.
func (d *device) resolve(c *conn, rkey uint32, addr uint64, n uint32, need verbs.Access) (*mr, int, error) {
	d.mu.RLock()
	defer d.mu.RUnlock()
	var (
		base, length uint64
		access       verbs.Access
		r            *mr
	)
	switch o := d.objs[rkey>>8].(type) {
	case *mr:
		if o.key != rkey || o.pd != c.pd {
			return nil, 0, fmt.Errorf("no region or window with rkey %#x", rkey)
		}
		r, base, length, access = o, o.addr, uint64(len(o.mem)), o.access
	case *mw:
		if o.key != rkey || o.pd != c.pd || !o.bound {
			return nil, 0, fmt.Errorf("no region or bound window with rkey %#x", rkey)
		}
		if o.conn != c {
			return nil, 0, fmt.Errorf("window %#x is bound through another connection", rkey)
		}
		r, base, length, access = o.mr, o.addr, o.length, o.access
	default:
		return nil, 0, fmt.Errorf("no region or window with rkey %#x", rkey)
	}
	if access&need != need {
		return nil, 0, fmt.Errorf("rkey %#x does not allow %s", rkey, accessName(need))
	}
	if addr < base || uint64(n) > length || addr-base > length-uint64(n) {
		return nil, 0, fmt.Errorf("%d bytes at %#x outside rkey %#x's %d bytes at %#x", n, addr, rkey, length, base)
	}
	return r, int(addr - r.addr), nil
}

func accessName(a verbs.Access) string {
	switch a {
	case verbs.AccessRemoteWrite:
		return "remote write"
	case verbs.AccessRemoteRead:
		return "remote read"
	}
	return fmt.Sprintf("access %#x", a)
}

// sge is a checked scatter/gather entry.
type sge struct {
	mr  *mr
	off int
	len int
}

// sgList checks a work request's SGEs for connection c and copies them:
// each must be a region of c's PD, within bounds, and allow local write if
// it is written. It returns the total length.
func (c *conn) sgList(dst []sge, sgl []verbs.SGE, maxSGE int, write bool) ([]sge, int, error) {
	if len(sgl) > maxSGE {
		return nil, 0, fmt.Errorf("%d SGEs, the queue takes %d: %w", len(sgl), maxSGE, syscall.EINVAL)
	}
	total := 0
	for i, s := range sgl {
		r, ok := s.MR.(*mr)
		switch {
		case !ok:
			return nil, 0, fmt.Errorf("SGE %d: not a region of the soft provider: %w", i, syscall.EINVAL)
		case r.pd != c.pd:
			return nil, 0, fmt.Errorf("SGE %d: region of another protection domain: %w", i, syscall.EINVAL)
		case s.Offset < 0 || s.Length < 0 || s.Offset > len(r.mem) || s.Length > len(r.mem)-s.Offset:
			return nil, 0, fmt.Errorf("SGE %d: %d bytes at %d outside the region's %d: %w", i, s.Length, s.Offset, len(r.mem), syscall.EINVAL)
		case write && r.access&verbs.AccessLocalWrite == 0:
			return nil, 0, fmt.Errorf("SGE %d: region registered without local write access: %w", i, syscall.EACCES)
		}
		total += s.Length
		if total > maxMessage {
			return nil, 0, fmt.Errorf("message longer than %d bytes: %w", maxMessage, syscall.EINVAL)
		}
		dst = append(dst, sge{mr: r, off: s.Offset, len: s.Length})
	}
	return dst, total, nil
}

// cursor walks an SG list.
type cursor struct {
	sgl []sge
	i   int // current entry
	off int // bytes of it done
}

// next returns the region, offset and length of the next piece of at most
// n bytes.
func (cu *cursor) next(n int) (*mr, int, int) {
	for cu.i < len(cu.sgl) && cu.off == cu.sgl[cu.i].len {
		cu.i++
		cu.off = 0
	}
	if cu.i == len(cu.sgl) {
		return nil, 0, 0
	}
	s := cu.sgl[cu.i]
	k := min(n, s.len-cu.off)
	off := s.off + cu.off
	cu.off += k
	return s.mr, off, k
}

// gather fills dst from the cursor; false if a region is gone.
func (cu *cursor) gather(dst []byte) bool {
	for len(dst) > 0 {
		r, off, k := cu.next(len(dst))
		if r == nil || !r.copyOut(dst[:k], off) {
			return false
		}
		dst = dst[k:]
	}
	return true
}

// scatter copies src to the cursor; false if a region is gone.
func (cu *cursor) scatter(src []byte) bool {
	for len(src) > 0 {
		r, off, k := cu.next(len(src))
		if r == nil || !r.copyIn(off, src[:k]) {
			return false
		}
		src = src[k:]
	}
	return true
}
