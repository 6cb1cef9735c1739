package fs

import (
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"github.com/hanwen/go-fuse/v2/fuse"

	"github.com/rdmafs/rdmafs/fs/fuseuring"
)

// The FUSE channel: how the kernel's requests reach rdmafs. go-fuse's
// fuse.Server mounts, answers INIT and reads /dev/fuse; with the io_uring
// option, when the kernel offers FUSE over io_uring, the requests go
// instead through per-CPU io_uring queues (fs/fuseuring) to a
// fuse.ProtocolServer over the same raw file system, and /dev/fuse keeps
// what the kernel still sends there (interrupts, FORGETs, requests before
// the queues are registered), read by the same protocol server instead of
// fuse.Server's loop, so that an interrupt finds the request it is for.
// fuse.Server then never runs Serve: its Wait and Unmount would wait for
// that loop, so the mount waits and unmounts with FS.Wait and FS.Unmount.

// Channel names, as `rdmafs stats` shows them (fuse_channel).
const (
	ChannelDev     = "dev"
	ChannelIOURing = "io_uring"
)

// fuseChannel is the io_uring side of a mount, if it has one.
type fuseChannel struct {
	mu    sync.Mutex
	uring *fuseuring.Channel
}

// FUSEChannel returns how the mount's requests come: ChannelIOURing or
// ChannelDev.
func (f *FS) FUSEChannel() string {
	f.channel.mu.Lock()
	defer f.channel.mu.Unlock()
	if f.channel.uring != nil {
		return ChannelIOURing
	}
	return ChannelDev
}

// CloseFUSEChannel stops the io_uring queues, once the mount is gone
// (the server's Wait has returned), and frees their memory.
func (f *FS) CloseFUSEChannel() {
	f.channel.mu.Lock()
	ch := f.channel.uring
	f.channel.uring = nil
	f.channel.mu.Unlock()
	if ch != nil {
		ch.Close()
	}
}

// wantIOURing reports whether the mount is to announce FUSE over
// io_uring in its INIT reply.
func (f *FS) wantIOURing() bool { return f.opts.IOURing && fuseuring.Offered() }

// startIOURing serves the mount through io_uring queues if its INIT
// negotiated it, and returns them; otherwise, or if the queues cannot be
// set up, it returns nil, and /dev/fuse serves every request.
func (f *FS) startIOURing(server *fuse.Server, raw fuse.RawFileSystem, opts *fuse.MountOptions, devFD int) *fuseuring.Channel {
	init := server.KernelSettings()
	switch {
	case !f.wantIOURing() || init.Flags64()&fuse.CAP_OVER_IO_URING == 0:
		return nil
	case devFD < 0:
		// The kernel waits for the queues: without them the mount
		// would hang.
		f.logf("FUSE over io_uring: cannot tell the mount's /dev/fuse descriptor")
		return nil
	}
	pageSize := os.Getpagesize()
	ch, err := fuseuring.Start(fuseuring.Config{
		DevFD:      devFD,
		Server:     fuse.NewProtocolServer(raw, opts),
		Init:       init,
		MaxWrite:   opts.MaxWrite,
		MaxPages:   max(32, (opts.MaxWrite+pageSize-1)/pageSize), // FUSE_DEFAULT_MAX_PAGES_PER_REQ without CAP_MAX_PAGES
		QueueDepth: f.opts.IOURingQueueDepth,
		Logf:       f.cfg.Logf,
	})
	if err != nil {
		f.logf("FUSE over io_uring: %v; serving /dev/fuse", err)
		return nil
	}
	f.channel.mu.Lock()
	f.channel.uring = ch
	f.channel.mu.Unlock()
	return ch
}

// Wait waits until the kernel has let go of the mount: server.Wait, or
// with io_uring, the end of the /dev/fuse readers.
func (f *FS) Wait(server *fuse.Server) {
	if ch := f.uringChannel(); ch != nil {
		ch.WaitDev()
		return
	}
	server.Wait()
}

// Unmount unmounts the file system and waits until the kernel has let go
// of it: server.Unmount, or with io_uring the same (umount(2), then
// fusermount3 -u, tried again while the mount is busy right after a
// close) without waiting for the loop fuse.Server does not run.
func (f *FS) Unmount(server *fuse.Server) error {
	ch := f.uringChannel()
	if ch == nil {
		return server.Unmount()
	}
	var err error
	delay := time.Duration(0)
	for range 5 {
		if err = unix.Unmount(f.mountpoint, 0); err == nil {
			break
		}
		if err = exec.Command("fusermount3", "-u", f.mountpoint).Run(); err == nil {
			break
		}
		delay = 2*delay + 5*time.Millisecond
		time.Sleep(delay)
	}
	if err != nil {
		return fmt.Errorf("unmounting %s: %w", f.mountpoint, err)
	}
	ch.WaitDev()
	return nil
}

func (f *FS) uringChannel() *fuseuring.Channel {
	f.channel.mu.Lock()
	defer f.channel.mu.Unlock()
	return f.channel.uring
}

// fuseDevFDs returns the process's descriptors open on /dev/fuse.
func fuseDevFDs() map[int]bool {
	fds := map[int]bool{}
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		return fds
	}
	for _, e := range ents {
		fd, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if target, err := os.Readlink("/proc/self/fd/" + e.Name()); err == nil && target == "/dev/fuse" {
			fds[fd] = true
		}
	}
	return fds
}

// newFUSEDevFD returns the descriptor open on /dev/fuse that is in after
// and not in before, or -1.
func newFUSEDevFD(before, after map[int]bool) int {
	fd := -1
	for n := range after {
		if !before[n] {
			if fd >= 0 {
				return -1 // ambiguous
			}
			fd = n
		}
	}
	return fd
}
