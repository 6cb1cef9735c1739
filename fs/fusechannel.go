package fs

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	gofs "github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"

	"github.com/rdmafs/rdmafs/fs/fusedev"
	"github.com/rdmafs/rdmafs/fs/fuseuring"
)

// The FUSE channel: how the kernel's requests reach rdmafs. go-fuse's
// fuse.Server mounts, answers INIT and writes notifications; the requests
// go to a fuse.ProtocolServer over the same raw file system, read from
// /dev/fuse by rdmafs's own loop (fs/fusedev) with fuseReaders
// goroutines. With the io_uring option, when the kernel offers FUSE over
// io_uring, they come instead through per-CPU io_uring queues
// (fs/fuseuring), and /dev/fuse keeps what the kernel still sends there
// (interrupts, FORGETs, requests before the queues are registered), read
// with the same protocol server so that an interrupt finds the request it
// is for. fuse.Server never runs Serve: its Wait and Unmount would wait
// for that loop, so the mount waits and unmounts with FS.Wait and
// FS.Unmount. Only if the mount's /dev/fuse descriptor cannot be told
// does go-fuse's loop serve it.

// Channel names, as `rdmafs stats` shows them (fuse_channel).
const (
	ChannelDev     = "dev"
	ChannelIOURing = "io_uring"
)

// fuseChannel is how a mount's requests come.
type fuseChannel struct {
	mu    sync.Mutex
	dir   string             // where it is mounted
	dev   *fusedev.Loop      // the /dev/fuse readers; nil: go-fuse's loop
	uring *fuseuring.Channel // the io_uring queues, if any
	// name is ChannelIOURing from before the queues start (their
	// workers answer requests before Start returns, a stats request
	// among them) unless they fail to; ChannelDev otherwise.
	name string
}

// FUSEChannel returns how the mount's requests come: ChannelIOURing or
// ChannelDev.
func (f *FS) FUSEChannel() string {
	f.channel.mu.Lock()
	defer f.channel.mu.Unlock()
	if f.channel.name == "" {
		return ChannelDev
	}
	return f.channel.name
}

// CloseFUSEChannel frees the channel's queues, buffers and descriptors,
// once the mount is gone (Wait has returned).
func (f *FS) CloseFUSEChannel() {
	f.channel.mu.Lock()
	dev, uring := f.channel.dev, f.channel.uring
	f.channel.uring, f.channel.name = nil, ""
	f.channel.mu.Unlock()
	if dev != nil {
		dev.Close()
	}
	if uring != nil {
		uring.Close()
	}
}

// wantIOURing reports whether the mount is to announce FUSE over
// io_uring in its INIT reply.
func (f *FS) wantIOURing() bool { return f.opts.IOURing && fuseuring.Offered() }

// Mount mounts the file system on dir and serves it in the background, as
// gofs.Mount does, with the kernel's requests counted for WriteStats.
func (f *FS) Mount(dir string, opts *gofs.Options) (*fuse.Server, error) {
	dir, err := filepath.Abs(dir)
	if err != nil {
		return nil, err
	}
	raw := &countingFS{RawFileSystem: f.nodeFS(opts), ev: &f.events, locking: f.cfg.Locks != nil}
	server, devFD, err := newServer(raw, dir, &opts.MountOptions)
	if err != nil {
		return nil, err
	}
	if err := f.serveChannel(server, dir, raw, &opts.MountOptions, devFD); err != nil {
		// Nothing reads the mount's requests: detach it (server.Unmount
		// would wait for its loop).
		if uerr := unix.Unmount(dir, unix.MNT_DETACH); uerr != nil {
			exec.Command("fusermount3", "-u", "-z", dir).Run()
		}
		return nil, fmt.Errorf("serving the FUSE channel: %w", err)
	}
	if err := server.WaitMount(); err != nil {
		return nil, err
	}
	return server, nil
}

// serveChannel serves the mount that server made: through io_uring
// queues if its INIT negotiated them, and /dev/fuse, read by rdmafs's
// loop; by go-fuse's loop if the mount's descriptor is not known.
func (f *FS) serveChannel(server *fuse.Server, dir string, raw fuse.RawFileSystem, opts *fuse.MountOptions, devFD int) error {
	init := server.KernelSettings()
	uringOffered := f.wantIOURing() && init.Flags64()&fuse.CAP_OVER_IO_URING != 0
	if devFD < 0 {
		if uringOffered {
			// The kernel waits for the queues: without them the
			// mount would hang.
			return fmt.Errorf("FUSE over io_uring: cannot tell the mount's /dev/fuse descriptor")
		}
		f.logf("cannot tell the mount's /dev/fuse descriptor: go-fuse's request loop serves it")
		go server.Serve()
		return nil
	}
	ps := fuse.NewProtocolServer(raw, opts)
	if err := fusedev.Initialize(ps, init); err != nil {
		return err
	}
	pageSize := os.Getpagesize()
	maxPages := max(32, (opts.MaxWrite+pageSize-1)/pageSize) // FUSE_DEFAULT_MAX_PAGES_PER_REQ without CAP_MAX_PAGES
	readers := fuseReaders
	var uring *fuseuring.Channel
	if uringOffered {
		f.setChannelName(ChannelIOURing)
		// The queues go up before anything (WaitMount's first request)
		// waits for them.
		cfg := fuseuring.Config{
			DevFD:      devFD,
			Server:     ps,
			MaxWrite:   opts.MaxWrite,
			MaxPages:   maxPages,
			QueueDepth: f.opts.IOURingQueueDepth,
			Logf:       f.cfg.Logf,
		}
		if rb := f.opts.ReplyBuffers; rb != nil {
			cfg.Payloads = rb.ReserveReplyBuffers
		}
		ch, err := fuseuring.Start(cfg)
		if err != nil {
			f.setChannelName(ChannelDev)
			f.logf("FUSE over io_uring: %v; serving /dev/fuse", err)
		} else {
			uring, readers = ch, uringDevReaders
		}
	}
	dev, err := fusedev.Serve(fusedev.Config{
		DevFD:    devFD,
		Server:   ps,
		Readers:  readers,
		MaxWrite: opts.MaxWrite,
		MaxRead:  maxPages * pageSize,
		Logf:     f.cfg.Logf,
	})
	if err != nil {
		if uring != nil {
			uring.Close()
		}
		f.setChannelName(ChannelDev)
		return err
	}
	f.channel.mu.Lock()
	f.channel.dir, f.channel.dev, f.channel.uring = dir, dev, uring
	f.channel.mu.Unlock()
	return nil
}

// setChannelName sets what FUSEChannel reports.
func (f *FS) setChannelName(name string) {
	f.channel.mu.Lock()
	f.channel.name = name
	f.channel.mu.Unlock()
}

// Wait waits until the kernel has let go of the mount.
func (f *FS) Wait(server *fuse.Server) {
	if dev := f.devLoop(); dev != nil {
		dev.Wait()
		return
	}
	server.Wait()
}

// Unmount unmounts the file system and waits until the kernel has let go
// of it: as server.Unmount does (umount(2), then fusermount3 -u, tried
// again while the mount is busy right after a close), without waiting
// for the loop fuse.Server does not run.
func (f *FS) Unmount(server *fuse.Server) error {
	f.channel.mu.Lock()
	dir, dev := f.channel.dir, f.channel.dev
	f.channel.mu.Unlock()
	if dev == nil {
		return server.Unmount()
	}
	var err error
	delay := time.Duration(0)
	for range 5 {
		if err = unix.Unmount(dir, 0); err == nil {
			break
		}
		if err = exec.Command("fusermount3", "-u", dir).Run(); err == nil {
			break
		}
		delay = 2*delay + 5*time.Millisecond
		time.Sleep(delay)
	}
	if err != nil {
		return fmt.Errorf("unmounting %s: %w", dir, err)
	}
	dev.Wait()
	return nil
}

func (f *FS) devLoop() *fusedev.Loop {
	f.channel.mu.Lock()
	defer f.channel.mu.Unlock()
	return f.channel.dev
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
