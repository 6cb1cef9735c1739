//go:build cgo && linux

package ibverbs

import (
	"context"
	"fmt"
	"os"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// pollFD waits for a file descriptor of libibverbs or librdmacm with the
// Go netpoller. The library's descriptor is made non-blocking (its reads
// then fail with EAGAIN instead of blocking) and a dup of it goes to the
// netpoller, so that closing the pollFD never closes the library's own
// descriptor, and a goroutine waiting on it returns when it is closed.
type pollFD struct {
	f  *os.File
	rc syscall.RawConn

	mu          sync.Mutex
	gen         uint64 // which wait a context's cancellation belongs to
	interrupted bool   // interrupt's deadline stands until resume
}

func newPollFD(fd int, name string) (*pollFD, error) {
	if err := unix.SetNonblock(fd, true); err != nil {
		return nil, fmt.Errorf("set %s non-blocking: %w", name, err)
	}
	dup, err := unix.FcntlInt(uintptr(fd), unix.F_DUPFD_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("dup %s: %w", name, err)
	}
	f := os.NewFile(uintptr(dup), name)
	rc, err := f.SyscallConn()
	if err != nil {
		f.Close()
		return nil, err
	}
	return &pollFD{f: f, rc: rc}, nil
}

// wait calls try until it returns true, sleeping in the netpoller while
// the descriptor has nothing to read (try returns false when the library
// said EAGAIN). It returns ctx's error if ctx ends first, and an error if
// the pollFD is closed.
func (p *pollFD) wait(ctx context.Context, try func() bool) error {
	if ctx.Done() != nil {
		p.mu.Lock()
		p.gen++
		gen := p.gen
		p.mu.Unlock()
		stop := context.AfterFunc(ctx, func() {
			p.mu.Lock()
			defer p.mu.Unlock()
			if p.gen == gen {
				p.f.SetReadDeadline(time.Unix(1, 0))
			}
		})
		defer func() {
			stop()
			p.mu.Lock()
			p.gen++
			if !p.interrupted {
				p.f.SetReadDeadline(time.Time{})
			}
			p.mu.Unlock()
		}()
	}
	err := p.rc.Read(func(uintptr) bool { return try() })
	if err != nil && ctx.Err() != nil {
		return ctx.Err()
	}
	return err
}

// waitUntil is wait with a deadline instead of a context: it returns
// os.ErrDeadlineExceeded at the deadline (and when interrupted).
func (p *pollFD) waitUntil(deadline time.Time, try func() bool) error {
	p.mu.Lock()
	if !p.interrupted {
		p.f.SetReadDeadline(deadline)
	}
	p.mu.Unlock()
	err := p.rc.Read(func(uintptr) bool { return try() })
	p.mu.Lock()
	if !p.interrupted {
		p.f.SetReadDeadline(time.Time{})
	}
	p.mu.Unlock()
	return err
}

// interrupt makes the wait under way, and every later one until resume,
// return at once with os.ErrDeadlineExceeded.
func (p *pollFD) interrupt() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.interrupted = true
	p.f.SetReadDeadline(time.Unix(1, 0))
}

// resume undoes interrupt.
func (p *pollFD) resume() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.interrupted {
		p.interrupted = false
		p.f.SetReadDeadline(time.Time{})
	}
}

func (p *pollFD) close() { p.f.Close() }
