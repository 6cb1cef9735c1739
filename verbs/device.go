package verbs

import (
	"fmt"
	"sync"
	"syscall"
)

// DeviceState is what a provider's device keeps to close as Device.Close
// promises: whether it is closed, and how many protection domains are
// allocated on it, which must all be closed first (ibv_close_device leaves
// their resources behind otherwise). Both providers keep one per device. The zero
// value is an open device without protection domains.
type DeviceState struct {
	mu     sync.Mutex
	pds    int
	closed bool
}

// AllocPD runs alloc, which allocates a protection domain, and counts the
// PD it returns. On a closed device it fails with EBADF, in a *VerbError
// naming verb.
func (s *DeviceState) AllocPD(verb string, alloc func() (PD, error)) (PD, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil, &VerbError{Verb: verb, Err: syscall.EBADF}
	}
	pd, err := alloc()
	if err != nil {
		return nil, err
	}
	s.pds++
	return pd, nil
}

// PDClosed counts a protection domain of the device closed.
func (s *DeviceState) PDClosed() {
	s.mu.Lock()
	s.pds--
	s.mu.Unlock()
}

// Close marks the device closed and runs release, which frees what the
// provider holds for it, unless a protection domain is still allocated:
// then it fails with EBUSY, in a *VerbError naming verb. Closing a closed
// device does nothing.
func (s *DeviceState) Close(verb string, release func()) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil
	}
	if s.pds > 0 {
		return &VerbError{Verb: verb, Err: fmt.Errorf("%d protection domains still allocated: %w", s.pds, syscall.EBUSY)}
	}
	s.closed = true
	if release != nil {
		release()
	}
	return nil
}
