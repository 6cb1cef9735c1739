//go:build cgo && linux

package ibverbs

// #include "helpers.h"
import "C"

import (
	"fmt"
	"sync"
	"sync/atomic"
	"syscall"
	"unsafe"

	"github.com/rdmafs/rdmafs/verbs"
)

// accessFlags maps verbs.Access to ibv_access_flags.
func accessFlags(a verbs.Access) (C.int, error) {
	var f C.int
	for _, m := range []struct {
		a verbs.Access
		f C.int
	}{
		{verbs.AccessLocalWrite, C.IBV_ACCESS_LOCAL_WRITE},
		{verbs.AccessRemoteWrite, C.IBV_ACCESS_REMOTE_WRITE},
		{verbs.AccessRemoteRead, C.IBV_ACCESS_REMOTE_READ},
		{verbs.AccessMWBind, C.IBV_ACCESS_MW_BIND},
	} {
		if a&m.a != 0 {
			f |= m.f
			a &^= m.a
		}
	}
	if a != 0 {
		return 0, fmt.Errorf("access %#x: %w", a, syscall.EINVAL)
	}
	return f, nil
}

// mr is a registered region.
type mr struct {
	pd     *pd
	mr     *C.struct_ibv_mr
	mem    []byte
	addr   uint64
	lkey   uint32
	rkey   uint32
	access verbs.Access

	mu   sync.Mutex
	dead bool
}

func (p *pd) Register(m *verbs.Memory, off, length int, access verbs.Access) (verbs.MR, error) {
	if m == nil || m.Bytes() == nil {
		return nil, &verbs.VerbError{Verb: "ibv_reg_mr", Err: fmt.Errorf("no memory: %w", syscall.EINVAL)}
	}
	b := m.Bytes()
	if off < 0 || length <= 0 || off > len(b) || length > len(b)-off {
		return nil, &verbs.VerbError{Verb: "ibv_reg_mr", Err: fmt.Errorf("%d bytes at %d of %d bytes of memory: %w", length, off, len(b), syscall.EINVAL)}
	}
	flags, err := accessFlags(access)
	if err != nil {
		return nil, &verbs.VerbError{Verb: "ibv_reg_mr", Err: err}
	}
	if err := p.use(&p.mrs, 1); err != nil {
		return nil, err
	}
	mem := b[off : off+length : off+length]
	// mem is mmap'd (verbs.AllocMemory), not Go memory: the device may
	// keep its address.
	r, errno := C.ibv_reg_mr(p.pd, unsafe.Pointer(&mem[0]), C.size_t(length), flags)
	if r == nil {
		p.use(&p.mrs, -1)
		return nil, &verbs.VerbError{Verb: "ibv_reg_mr", Err: errno}
	}
	return &mr{pd: p, mr: r, mem: mem, addr: uint64(uintptr(unsafe.Pointer(&mem[0]))),
		lkey: uint32(r.lkey), rkey: uint32(r.rkey), access: access}, nil
}

func (r *mr) LKey() uint32  { return r.lkey }
func (r *mr) RKey() uint32  { return r.rkey }
func (r *mr) Addr() uint64  { return r.addr }
func (r *mr) Bytes() []byte { return r.mem }

func (r *mr) Deregister() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.dead {
		return nil
	}
	if ret := C.ibv_dereg_mr(r.mr); ret != 0 {
		return &verbs.VerbError{Verb: "ibv_dereg_mr", Err: syscall.Errno(ret)}
	}
	r.dead = true
	r.pd.use(&r.pd.mrs, -1)
	return nil
}

// mw is a type 2 memory window.
type mw struct {
	pd *pd
	mw *C.struct_ibv_mw
	// posted is the key of the latest bind posted; mu serializes binds
	// and the reverts of failed ones, which also set the C struct's key.
	posted atomic.Uint32
	mu     sync.Mutex
	closed bool
}

func (p *pd) AllocMW() (verbs.MW, error) {
	if err := p.use(&p.mws, 1); err != nil {
		return nil, err
	}
	w, errno := C.rdmafs_alloc_mw(p.pd)
	if w == nil {
		p.use(&p.mws, -1)
		if errno == nil {
			errno = syscall.EOPNOTSUPP
		}
		return nil, &verbs.VerbError{Verb: "ibv_alloc_mw", Err: errno}
	}
	m := &mw{pd: p, mw: w}
	m.posted.Store(uint32(w.rkey))
	return m, nil
}

func (w *mw) RKey() uint32 { return w.posted.Load() }

// revert gives the window its key back after a bind failed or was
// flushed (both here and in libibverbs' struct, which the kernel checks
// at the next bind), unless another bind was posted meanwhile.
func (w *mw) revert(newKey, oldKey uint32) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.closed {
		return
	}
	if w.posted.CompareAndSwap(newKey, oldKey) {
		w.mw.rkey = C.uint32_t(oldKey)
	}
}

func (w *mw) Close() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.closed {
		return nil
	}
	if r := C.rdmafs_dealloc_mw(w.mw); r != 0 {
		return &verbs.VerbError{Verb: "ibv_dealloc_mw", Err: syscall.Errno(r)}
	}
	w.closed = true
	w.pd.use(&w.pd.mws, -1)
	return nil
}
