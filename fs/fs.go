// Package fs presents an NFSv3 export as a FUSE file system (go-fuse's node
// API): every FUSE operation becomes NFSv3 calls through an nfs3.Client.
//
// It keeps the caches and the consistency rules of the Linux NFS client:
// attributes are cached between acregmin and acregmax (acdirmin and
// acdirmax for directories), growing while they do not change; LOOKUP
// results, positive and negative, are cached by the kernel for the
// directory's attribute timeout; a file's attributes are revalidated when it
// is opened and its cached data dropped if it changed (close-to-open).
// Writes go out as UNSTABLE WRITEs behind the program's back and are made
// durable with COMMIT on close and fsync; every uncommitted byte is kept
// until COMMIT returns the verifier it was written under.
//
// The package does not know which transport carries the calls.
package fs

import (
	"context"
	"path/filepath"
	"sync/atomic"
	"time"

	gofs "github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"

	"github.com/rdmafs/rdmafs/fs/lockd"
	"github.com/rdmafs/rdmafs/nfs3"
	"github.com/rdmafs/rdmafs/sunrpc"
)

// Options are the mount options that govern caching, consistency and
// identity.
type Options struct {
	// Attribute cache bounds (acregmin, acregmax, acdirmin, acdirmax).
	ACRegMin, ACRegMax time.Duration
	ACDirMin, ACDirMax time.Duration
	// LookupNegative caches "no such file" answers; LookupPositive caches
	// names that exist (lookupcache=all: both; pos: positive only; none:
	// neither).
	LookupPositive, LookupNegative bool
	// NoCTO skips the revalidation on open (close-to-open consistency).
	NoCTO bool
	// NoReaddirPlus lists directories with READDIR instead of READDIRPLUS.
	NoReaddirPlus bool
	// Sync sends every write as FILE_SYNC before write(2) returns.
	Sync bool
	// ReadOnly refuses every change with EROFS.
	ReadOnly bool
	// RSize and WSize are the largest READ and WRITE, after negotiation.
	RSize, WSize int
	// FixedUID and FixedGID, when set, replace the caller's identity.
	FixedUID, FixedGID *uint32
	// AuthNone sends no credentials (sec=none).
	AuthNone bool
	// DirtyLimit bounds the written data held in memory for all files,
	// whether not yet sent or sent but not committed; writers wait above
	// it while COMMITs free memory. 0 means 256 MiB.
	DirtyLimit int64
	// WritesInFlight bounds the WRITE calls of write-behind in flight at
	// once; 0 means 64.
	WritesInFlight int
	// Payloads, if set, gives write-behind its buffers: the transport's,
	// which it sends without copying.
	Payloads sunrpc.PayloadBuffers
	// RemotePosix and RemoteFlock send fcntl(2) and flock(2) locks to
	// Config.Locks; the kinds not sent stay local to this client.
	RemotePosix, RemoteFlock bool
	// IOURing serves the mount through io_uring queues where the kernel
	// offers FUSE over io_uring (fusechannel.go), with
	// IOURingQueueDepth entries per queue (0: the default).
	IOURing           bool
	IOURingQueueDepth int
	// ReplyBuffers, if set, gives the io_uring entries their payload
	// buffers: the transport's, into which READ data is placed and from
	// which WRITE data is sent, with no copy in rdmafs.
	ReplyBuffers sunrpc.ReplyBuffers
}

// Config is what New needs.
type Config struct {
	Client *nfs3.Client
	// ACL, if set, serves the files' POSIX ACLs (acl.go); the server
	// must offer NFSACL.
	ACL      *nfs3.ACLClient
	Root     nfs3.FH
	RootAttr nfs3.Fattr
	Options  Options
	// Source names the export ("server:/export") in statistics.
	Source string
	// MountOptions is the option string shown in statistics.
	MountOptions string
	// Mountpoint is where the file system is mounted, for statistics.
	Mountpoint string
	// Locks, if set, is the server's lock manager (lock.go).
	Locks *lockd.Client
	// Logf receives errors that cannot be returned to a program, such as
	// a failed background write.
	Logf func(format string, args ...any)
}

// FS is one mounted export.
type FS struct {
	cfg     Config
	opts    *Options // cfg's, with the defaults filled in
	nfs     *nfs3.Client
	acl     *nfs3.ACLClient
	aclGone atomic.Bool // the server refused NFSACL (acl.go)
	root    *node
	start   time.Time
	creds   credCache
	objects objectTable

	sillyCount atomic.Uint64
	// readFailures limits the log of failed READs (file.go).
	readFailures logRate
	// attrGen counts attribute updates, to order them: see
	// setAttrSince.
	attrGen atomic.Uint64
	events  ioEvents  // the FUSE requests, for WriteStats
	kills   killWatch // the requests in flight, whose callers may be killed

	mountpoint string // absolute, for stats through the mount (kernelattr.go); "" without a mount

	silence silence // the last statfs, for a silent server (silence.go)

	dirCookies  atomic.Int64 // remembered by all listings (dircache.go)
	plusRefused atomic.Bool  // READDIRPLUS made no inode for want of room, logged

	writeSlots chan struct{} // WRITEs of write-behind in flight
	dirty      *dirtyLimit

	channel fuseChannel   // the io_uring queues, if the mount has them
	umasks  requestUmasks // the umask of each create being served (umask.go)
}

// New returns the file system of the export whose root is cfg.Root.
func New(cfg Config) *FS {
	o := &cfg.Options
	if o.DirtyLimit <= 0 {
		o.DirtyLimit = 256 << 20
	}
	if o.WritesInFlight <= 0 {
		o.WritesInFlight = 64
	}
	if o.RSize <= 0 {
		o.RSize = 1 << 20
	}
	if o.WSize <= 0 {
		o.WSize = 1 << 20
	}
	f := &FS{
		cfg:        cfg,
		nfs:        cfg.Client,
		acl:        cfg.ACL,
		start:      time.Now(),
		writeSlots: make(chan struct{}, o.WritesInFlight),
		dirty:      newDirtyLimit(o.DirtyLimit),
	}
	f.readFailures.period = time.Second
	f.opts = &f.cfg.Options
	if cfg.Mountpoint != "" {
		f.mountpoint, _ = filepath.Abs(cfg.Mountpoint)
	}
	f.creds.init()
	f.root = f.newNode(cfg.Root, &cfg.RootAttr)
	return f
}

// nodeFS is go-fuse's raw file system over the nodes, as the mount serves
// it: with the umask of each create kept for the node (umask.go).
func (f *FS) nodeFS(opts *gofs.Options) fuse.RawFileSystem {
	return &umaskFS{RawFileSystem: gofs.NewNodeFS(f.Root(), opts), umasks: &f.umasks}
}

// Root returns the root directory node, for gofs.Mount.
func (f *FS) Root() gofs.InodeEmbedder { return f.root }

// MountOptions returns the go-fuse options that suit the file system:
// requests as large as rsize and wsize, many reads in flight, and the
// entry and attribute timeouts left to each reply.
func (f *FS) MountOptions() *gofs.Options {
	zero := time.Duration(0)
	neg := zero
	if f.opts.LookupNegative {
		neg = f.opts.ACDirMin
	}
	maxIO := min(max(f.opts.RSize, f.opts.WSize), 1<<20)
	extra := uint64(0)
	if f.acl != nil {
		// The umask is the file system's to apply (acl.go createMode).
		extra = fuse.CAP_DONT_MASK
	}
	if f.wantIOURing() {
		// INIT announces it; fusechannel.go then sets up the queues.
		extra |= fuse.CAP_OVER_IO_URING
	}
	return &gofs.Options{
		MountOptions: fuse.MountOptions{
			MaxWrite:           maxIO,
			MaxBackground:      64,
			DisableReadDirPlus: f.opts.NoReaddirPlus,
			// Replies come from memory, never from a file descriptor:
			// splicing them would only add a copy into a pipe.
			DisableSplice: true,
			// O_DIRECT reads and writes of one aio submission (fio,
			// databases) go out together, as many calls in flight,
			// instead of one at a time.
			ExtraCapabilities: fuse.CAP_ASYNC_DIO |
				// The server clears setuid and setgid on a write or
				// chown by another user (knfsd does): the kernel must
				// not try to with a SETATTR of the mode as that user,
				// which the server refuses.
				fuse.CAP_HANDLE_KILLPRIV | extra |
				// The locks that go to the server's lock manager.
				f.lockCapabilities(),
			Name:   "rdmafs",
			FsName: f.cfg.Source,
		},
		// Each reply sets its own timeouts; these are the defaults for
		// replies that do not.
		EntryTimeout:    &zero,
		AttrTimeout:     &zero,
		NegativeTimeout: &neg,
		NullPermissions: true,
		RootStableAttr:  &gofs.StableAttr{Ino: f.root.obj.fileID, Gen: generation(&f.root.obj.fh)},
	}
}

// Shutdown writes and commits the data of every file, as before an
// unmount. It returns the first error.
func (f *FS) Shutdown(ctx context.Context) error {
	var first error
	for wb := range f.dirty.holdings() {
		err := wb.flush(ctx)
		if err == nil {
			err = wb.unreported()
		}
		if err != nil && first == nil {
			first = err
		}
	}
	return first
}

func (f *FS) logf(format string, args ...any) {
	if f.cfg.Logf != nil {
		f.cfg.Logf(format, args...)
	}
}

// cred returns the credential to send for the request in ctx.
func (f *FS) cred(ctx context.Context) *sunrpc.Cred {
	if f.opts.AuthNone {
		return nil
	}
	return f.creds.lookup(ctx, f.opts.FixedUID, f.opts.FixedGID)
}
