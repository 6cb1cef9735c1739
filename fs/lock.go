package fs

import (
	"context"
	"strconv"
	"sync"
	"syscall"
	"time"

	gofs "github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"

	"github.com/rdmafs/rdmafs/fs/lockd"
	"github.com/rdmafs/rdmafs/sunrpc"
)

// Locks shared with the server's other clients. With Config.Locks set, the
// kernel hands rdmafs the fcntl(2) locks (F_GETLK, F_SETLK, F_SETLKW, and
// OFD locks), the flock(2) locks, or both (Options.RemotePosix,
// Options.RemoteFlock), and rdmafs takes them on the server's lock manager,
// as Linux's NFS client maps them: a flock(2) lock is a whole-file lock of
// its open file, so flock and fcntl locks of different owners conflict.
// Kinds left local stay in the kernel's own lock table.
//
// A lock owner is what FUSE reports: for fcntl locks the process (its file
// table), for OFD and flock locks the open file. The kernel does not
// release a FUSE file system's locks itself: it tells it the owner at
// FLUSH (every close(2), for the closing process's fcntl locks) and rdmafs
// releases the locks taken through an open file at its RELEASE (the last
// close of an open file, for OFD and flock locks; its process's fcntl
// locks went at the FLUSH before). A process that exits closes its files,
// so its locks go too.

var (
	_ = (gofs.NodeGetlker)((*node)(nil))
	_ = (gofs.NodeSetlker)((*node)(nil))
	_ = (gofs.NodeSetlkwer)((*node)(nil))
)

// lockCapabilities are the FUSE capabilities that send the kinds of lock
// the options make remote to rdmafs.
func (f *FS) lockCapabilities() uint64 {
	if f.cfg.Locks == nil {
		return 0
	}
	var c uint64
	if f.opts.RemotePosix {
		c |= fuse.CAP_POSIX_LOCKS
	}
	if f.opts.RemoteFlock {
		c |= fuse.CAP_FLOCK_LOCKS
	}
	return c
}

func lockRange(lk *fuse.FileLock) lockd.Range {
	return lockd.Range{Start: lk.Start, End: min(lk.End, lockd.MaxOffset)}
}

// Getlk implements gofs.NodeGetlker: F_GETLK. As with the kernel's
// client, a conflicting fcntl lock of another process of this mount is
// found without asking the server, and named by its pid; one the server's
// TEST finds has pid 0 (lockd.Conflict).
func (n *node) Getlk(ctx context.Context, f gofs.FileHandle, owner uint64, lk *fuse.FileLock, _ uint32, out *fuse.FileLock) syscall.Errno {
	l := n.fs.cfg.Locks
	if l == nil {
		return syscall.ENOLCK
	}
	ctx, release := n.fs.kills.killable(ctx)
	defer release()
	start := time.Now()
	c, err := l.Test(ctx, n.lockCred(ctx, f), n.obj.fh.Bytes(), owner, lockRange(lk), lk.Typ == syscall.F_WRLCK)
	if err != nil {
		return n.lockFailed("F_GETLK", owner, lk, start, err)
	}
	if c == nil {
		*out = fuse.FileLock{Typ: syscall.F_UNLCK}
		return 0
	}
	*out = fuse.FileLock{Start: c.Start, End: c.End, Typ: syscall.F_RDLCK, Pid: c.Pid}
	if c.Exclusive {
		out.Typ = syscall.F_WRLCK
	}
	return 0
}

// Setlk implements gofs.NodeSetlker: F_SETLK (and a flock(2) with
// LOCK_NB, and every unlock).
func (n *node) Setlk(ctx context.Context, f gofs.FileHandle, owner uint64, lk *fuse.FileLock, flags uint32) syscall.Errno {
	return n.setlk(ctx, f, owner, lk, flags, false)
}

// Setlkw implements gofs.NodeSetlkwer: F_SETLKW (and a blocking flock(2)).
// A signal for the caller ends the wait with EINTR, after a CANCEL; the
// runtime's SIGURG, which a Go caller gets all the time, does not.
func (n *node) Setlkw(ctx context.Context, f gofs.FileHandle, owner uint64, lk *fuse.FileLock, flags uint32) syscall.Errno {
	return n.setlk(ctx, f, owner, lk, flags, true)
}

// lockCred is the credential a lock call through open file f carries: that
// of the process that opened it, as the kernel's client sends (the server
// opens the file with it), or the caller's if f is not one of rdmafs's.
func (n *node) lockCred(ctx context.Context, f gofs.FileHandle) *sunrpc.Cred {
	if h, ok := f.(*fileHandle); ok && h.cred != nil {
		return h.cred
	}
	return n.fs.creds.lookup(ctx, nil, nil)
}

// setlk takes or releases a lock; flags are FUSE's (fuse.FUSE_LK_FLOCK:
// a flock(2) lock).
func (n *node) setlk(ctx context.Context, f gofs.FileHandle, owner uint64, lk *fuse.FileLock, flags uint32, wait bool) syscall.Errno {
	l := n.fs.cfg.Locks
	if l == nil {
		return syscall.ENOLCK
	}
	fh := n.obj.fh.Bytes()
	unlock := lk.Typ == syscall.F_UNLCK
	if unlock && !l.Held(fh, owner) {
		return 0 // a close(2) of a file the process held no lock on
	}
	// The write-back and an unlock run to their end whatever signals the
	// caller gets, unless it is being killed (or is gone): a close(2)
	// must not fail because the runtime preempted a goroutine, nor keep
	// a killed process for ever on a server that is gone.
	kctx, release := n.fs.kills.killable(ctx)
	defer release()
	// As the kernel's NFS client does around a lock: what was written
	// goes to the server before the lock is released (or taken), so that
	// the next holder reads it, and after a lock is taken the cached data
	// and attributes go, so that this holder reads the last one's.
	if wb := n.obj.writeback(); wb != nil {
		if err := wb.flush(kctx); err != nil {
			n.fs.logf("writing back before a lock of %s: %v", n.obj.fh, err)
		}
	}
	start := time.Now()
	what := "F_SETLK"
	switch {
	case flags&fuse.FUSE_LK_FLOCK != 0:
		what = "flock"
	case wait:
		what = "F_SETLKW"
	}
	if unlock {
		if err := l.Unlock(kctx, n.lockCred(ctx, f), fh, owner, lockRange(lk)); err != nil {
			return n.lockFailed(what, owner, lk, start, err)
		}
		return 0
	}
	var pid uint32
	if c, ok := fuse.FromContext(ctx); ok {
		pid = c.Pid
	}
	holder := lockd.Holder{Pid: lk.Pid, Posix: flags&fuse.FUSE_LK_FLOCK == 0}
	err := l.Lock(ctx, n.lockCred(ctx, f), fh, owner, holder, lockRange(lk), lk.Typ == syscall.F_WRLCK, wait,
		func() bool { return signalPending(pid) })
	if err != nil {
		return n.lockFailed(what, owner, lk, start, err)
	}
	n.obj.mu.Lock()
	n.obj.dataValid = false
	n.obj.mu.Unlock()
	if a, err := n.fs.getattr(kctx, n.obj, true); err == nil {
		n.refreshKernelAttr(&a)
	} else {
		n.NotifyContent(-1, 0)
	}
	return 0
}

// lockFailed returns the errno of a lock call (what, started at start)
// that failed with err, and logs it unless it met a conflicting lock
// (EAGAIN): a program may take any other errno for an I/O error (SQLite
// does), so the log says what the server answered, and when.
func (n *node) lockFailed(what string, owner uint64, lk *fuse.FileLock, start time.Time, err error) syscall.Errno {
	en := lockd.Errno(err)
	if en == syscall.EAGAIN {
		return en
	}
	kind := map[uint32]string{syscall.F_RDLCK: "read lock", syscall.F_WRLCK: "write lock", syscall.F_UNLCK: "unlock"}[lk.Typ]
	end := strconv.FormatUint(lk.End, 10)
	if lk.End >= lockd.MaxOffset {
		end = "EOF"
	}
	n.fs.logf("lock: %s %s of bytes %d-%s of file %d by owner %#x (pid %d) failed with %v after %v: %v",
		what, kind, lk.Start, end, n.obj.fileID, owner, lk.Pid, en, time.Since(start).Round(time.Microsecond), err)
	return en
}

// signalPending reports whether process pid has a signal to take other than
// SIGURG (the Go runtime's preemption), or is gone.
func signalPending(pid uint32) bool {
	const sigurg = 1 << (23 - 1)
	var pending, blocked uint64
	err := procStatus(pid, func(name string, value []byte) bool {
		v, _ := strconv.ParseUint(string(value), 16, 64)
		switch name {
		case "SigPnd", "ShdPnd":
			pending |= v
		case "SigBlk":
			blocked = v
		}
		return true
	})
	return err != nil || pending&^blocked&^sigurg != 0
}

// lockOwners remembers, for each open file (FUSE file handle), the owners
// that took locks through it, so that its RELEASE can let them go.
type lockOwners struct {
	mu     sync.Mutex
	byFile map[uint64]map[uint64]struct{}
}

func (o *lockOwners) add(fh, owner uint64) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.byFile == nil {
		o.byFile = make(map[uint64]map[uint64]struct{})
	}
	if o.byFile[fh] == nil {
		o.byFile[fh] = make(map[uint64]struct{})
	}
	o.byFile[fh][owner] = struct{}{}
}

func (o *lockOwners) take(fh uint64) map[uint64]struct{} {
	o.mu.Lock()
	defer o.mu.Unlock()
	owners := o.byFile[fh]
	delete(o.byFile, fh)
	return owners
}

// unlockAll sends an unlock of the whole file for owner through the
// raw file system, which ends in node.Setlk, as part of the request whose
// header is h and whose interrupt is cancel.
func unlockAll(raw fuse.RawFileSystem, cancel <-chan struct{}, h *fuse.InHeader, fh, owner uint64) {
	in := &fuse.LkIn{InHeader: *h, Fh: fh, Owner: owner,
		Lk: fuse.FileLock{Start: 0, End: lockd.MaxOffset, Typ: syscall.F_UNLCK}}
	raw.SetLk(cancel, in)
}
