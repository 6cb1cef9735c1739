//go:build cgo && linux

package ibverbs

// #include "helpers.h"
import "C"

import (
	"fmt"
	"sync"
	"syscall"

	"github.com/rdmafs/rdmafs/verbs"
)

// pd is a protection domain. It counts what was made in it: it may be
// deallocated only after all of that is gone, which ibv_dealloc_pd would
// refuse too, but with less to say.
type pd struct {
	dev *device
	pd  *C.struct_ibv_pd

	mu                         sync.Mutex
	mrs, mws, conns, listeners int
	closed                     bool
}

func (p *pd) Close() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return nil
	}
	if n := p.mrs + p.mws + p.conns + p.listeners; n > 0 {
		return &verbs.VerbError{Verb: "ibv_dealloc_pd", Err: fmt.Errorf("%d regions, %d windows, %d connections, %d listeners still open: %w",
			p.mrs, p.mws, p.conns, p.listeners, syscall.EBUSY)}
	}
	if r := C.ibv_dealloc_pd(p.pd); r != 0 {
		return &verbs.VerbError{Verb: "ibv_dealloc_pd", Err: syscall.Errno(r)}
	}
	p.closed = true
	p.dev.state.PDClosed()
	return nil
}

// use counts one more (n = +1) or one less (n = -1) object in the PD.
func (p *pd) use(field *int, n int) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed && n > 0 {
		return &verbs.VerbError{Verb: "pd", Err: syscall.EBADF}
	}
	*field += n
	return nil
}
