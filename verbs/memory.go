package verbs

import (
	"fmt"
	"os"

	"golang.org/x/sys/unix"
)

// Memory is page-aligned memory outside the Go heap, for registration: the
// garbage collector never moves or frees it. It is released by Free.
type Memory struct {
	b []byte
}

// AllocMemory maps n bytes (rounded up to whole pages) of zeroed memory.
func AllocMemory(n int) (*Memory, error) {
	if n <= 0 {
		return nil, fmt.Errorf("verbs: allocate %d bytes", n)
	}
	page := os.Getpagesize()
	n = (n + page - 1) &^ (page - 1)
	b, err := unix.Mmap(-1, 0, n, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS)
	if err != nil {
		return nil, &VerbError{Verb: "mmap", Err: err}
	}
	return &Memory{b: b}, nil
}

// Bytes returns the memory.
func (m *Memory) Bytes() []byte { return m.b }

// Free unmaps the memory; nothing may use it afterwards, nor may a
// registration of it still exist.
func (m *Memory) Free() error {
	if m.b == nil {
		return nil
	}
	err := unix.Munmap(m.b)
	m.b = nil
	return err
}
