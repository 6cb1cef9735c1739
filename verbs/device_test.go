package verbs

import (
	"errors"
	"syscall"
	"testing"
)

type testPD struct{ PD }

// TestDeviceState: a device closes only once its protection domains are
// closed, frees its resources once, and allocates none once closed.
func TestDeviceState(t *testing.T) {
	var s DeviceState
	alloc := func() (PD, error) { return testPD{}, nil }
	if _, err := s.AllocPD("alloc_pd", alloc); err != nil {
		t.Fatal(err)
	}
	if _, err := s.AllocPD("alloc_pd", func() (PD, error) { return nil, syscall.ENOMEM }); !errors.Is(err, syscall.ENOMEM) {
		t.Errorf("failed allocation: %v", err)
	}
	released := 0
	release := func() { released++ }
	err := s.Close("close_device", release)
	var ve *VerbError
	if !errors.As(err, &ve) || ve.Verb != "close_device" || !errors.Is(err, syscall.EBUSY) ||
		err.Error() != "verbs: close_device: 1 protection domains still allocated: device or resource busy" {
		t.Errorf("close with a PD open: %v", err)
	}
	s.PDClosed()
	if err := s.Close("close_device", release); err != nil || released != 1 {
		t.Errorf("close: %v, released %d times", err, released)
	}
	if err := s.Close("close_device", release); err != nil || released != 1 {
		t.Errorf("second close: %v, released %d times", err, released)
	}
	if _, err := s.AllocPD("alloc_pd", alloc); !errors.As(err, &ve) || ve.Verb != "alloc_pd" || !errors.Is(err, syscall.EBADF) {
		t.Errorf("allocation on a closed device: %v", err)
	}
}
