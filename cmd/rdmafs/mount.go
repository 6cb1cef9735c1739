package main

import (
	"context"
	"errors"
	"fmt"
	"log"
	"net"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/hanwen/go-fuse/v2/fuse"

	"github.com/rdmafs/rdmafs/fs"
	"github.com/rdmafs/rdmafs/mountopts"
	"github.com/rdmafs/rdmafs/sunrpc"
	"github.com/rdmafs/rdmafs/xprtrdma"
)

// mountArgs is the parsed command line of a mount.
type mountArgs struct {
	foreground bool
	opts       mountopts.Options
	source     string // SERVER:/EXPORT as given
	host       string
	export     string
	mountpoint string
}

// parseMountArgs parses the command line of a mount. Flags may come before
// or after the two operands, as mount(8) and mount.fuse3 pass them.
func parseMountArgs(args []string) (*mountArgs, error) {
	a := &mountArgs{opts: mountopts.Default()}
	var operands []string
	for i := 0; i < len(args); i++ {
		arg := args[i]
		switch {
		case arg == "-h" || arg == "--help":
			return nil, errHelp
		case arg == "-f":
			a.foreground = true
		case arg == "-d":
			a.opts.Debug = true
		case arg == "-o":
			if i+1 == len(args) {
				return nil, &usageError{"-o needs an option list"}
			}
			i++
			if err := a.opts.Apply(args[i]); err != nil {
				return nil, err
			}
		case strings.HasPrefix(arg, "-o"):
			if err := a.opts.Apply(arg[2:]); err != nil {
				return nil, err
			}
		case arg == "--":
			operands = append(operands, args[i+1:]...)
			i = len(args)
		case strings.HasPrefix(arg, "-") && arg != "-":
			return nil, &usageError{fmt.Sprintf("unknown flag %s (rdmafs -h shows the usage)", arg)}
		default:
			operands = append(operands, arg)
		}
	}
	if a.opts.Debug {
		a.foreground = true
	}
	if len(operands) != 2 {
		return nil, &usageError{"need SERVER:/EXPORT and MOUNTPOINT (rdmafs -h shows the usage)"}
	}
	a.source, a.mountpoint = operands[0], operands[1]
	var err error
	a.host, a.export, err = splitSource(a.source)
	if err != nil {
		return nil, err
	}
	return a, nil
}

// splitSource splits SERVER:/EXPORT; an IPv6 address is written in
// brackets.
func splitSource(src string) (host, export string, err error) {
	i := strings.Index(src, ":/")
	if strings.HasPrefix(src, "[") {
		if j := strings.Index(src, "]:/"); j > 0 {
			i = j + 1
		} else {
			i = -1
		}
	}
	if i <= 0 {
		return "", "", &usageError{fmt.Sprintf("%q is not SERVER:/EXPORT", src)}
	}
	host, export = strings.Trim(src[:i], "[]"), src[i+1:]
	if host == "" {
		return "", "", &usageError{fmt.Sprintf("%q names no server", src)}
	}
	return host, export, nil
}

// checkMountpoint makes sure the mount point is an empty directory.
func checkMountpoint(dir string) error {
	st, err := os.Stat(dir)
	if err != nil {
		return fmt.Errorf("mount point %s: %w", dir, errors.Unwrap(err))
	}
	if !st.IsDir() {
		return fmt.Errorf("mount point %s is not a directory", dir)
	}
	f, err := os.Open(dir)
	if err != nil {
		return fmt.Errorf("mount point %s: %w", dir, errors.Unwrap(err))
	}
	defer f.Close()
	if names, _ := f.Readdirnames(1); len(names) > 0 {
		return fmt.Errorf("mount point %s is not empty", dir)
	}
	return nil
}

func mount(args []string) error {
	a, err := parseMountArgs(args)
	if err != nil {
		return err
	}
	if !a.foreground && !isDaemonChild() {
		return daemonize()
	}
	return mountAndServe(a, readyNotifier())
}

// mountAndServe mounts and serves the file system until it is unmounted
// or a signal asks for it; ready learns whether the mount succeeded.
func mountAndServe(a *mountArgs, ready func(error)) error {
	defer startProfile(".mount")()
	logger := newLogger(a.foreground)
	if err := checkMountpoint(a.mountpoint); err != nil {
		ready(err)
		return err
	}
	ctx := context.Background()
	conn, err := connect(ctx, a, logger.Printf)
	if err != nil {
		err = fmt.Errorf("cannot mount %s on %s: %w", a.source, a.mountpoint, err)
		ready(err)
		return err
	}
	defer conn.close(ctx)
	locks, err := startLocks(ctx, a, logger.Printf)
	if err != nil {
		err = fmt.Errorf("cannot mount %s on %s: %w", a.source, a.mountpoint, err)
		ready(err)
		return err
	}
	if locks != nil {
		defer locks.Close()
	}

	fsys := fs.New(fs.Config{
		Client:       conn.nfs,
		ACL:          conn.acl,
		Root:         conn.root,
		RootAttr:     conn.rootAttr,
		Options:      fsOptions(&a.opts, conn),
		Source:       a.source,
		MountOptions: a.opts.String() + fmt.Sprintf(",rsize=%d,wsize=%d", conn.rsize, conn.wsize),
		Mountpoint:   a.mountpoint,
		Locks:        locks,
		Logf:         logger.Printf,
	})
	opts := fsys.MountOptions()
	applyFUSEOptions(&opts.MountOptions, &a.opts, a.source)
	// With the ACLs, the kernel checks permissions against them too
	// (FUSE_POSIX_ACL), as the NFS client does; it needs
	// default_permissions, so without it they are only attributes.
	_, defaultPermissions := sharing(&a.opts, os.Geteuid())
	opts.EnableAcl = conn.acl != nil && defaultPermissions
	opts.Logger = logger
	server, err := fsys.Mount(a.mountpoint, opts)
	if err != nil {
		err = fmt.Errorf("cannot mount %s on %s: %w", a.source, a.mountpoint, err)
		ready(err)
		return err
	}
	setReadahead(a.mountpoint, readaheadCalls*conn.rsize, logger.Printf)
	ready(nil)

	signals := make(chan os.Signal, 1)
	signal.Notify(signals, syscall.SIGTERM, syscall.SIGINT)
	go func() {
		sig := <-signals
		logger.Printf("%v: writing back and unmounting %s", sig, a.mountpoint)
		unmount(server, fsys, a.mountpoint, logger)
	}()
	fsys.Wait(server)
	fsys.CloseFUSEChannel()
	signal.Stop(signals)
	// The kernel has let go of the mount: nothing can write any more.
	return writeBackAfterUnmount(fsys, conn, &a.opts, a.mountpoint, logger)
}

// writeBackAfterUnmount writes back and commits what files still hold
// once their mount is gone. Nobody is left to wait for a server that may
// be away for good, so even on a hard mount the daemon tries for one
// major timeout only (timeo × (retrans+1), what a call of a soft mount
// gets), then abandons the calls still under way (readahead, a WRITE, a
// COMMIT), logs how many bytes of which files it could not write back,
// and fails: the daemon exits with status 1.
func writeBackAfterUnmount(fsys *fs.FS, conn *connection, o *mountopts.Options, mountpoint string, logger *log.Logger) error {
	grace := time.Duration(o.Timeo) * time.Second / 10 * time.Duration(o.Retrans+1)
	ctx, cancel := context.WithTimeout(context.Background(), grace)
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- fsys.Shutdown(ctx) }()
	var err error
	select {
	case err = <-done:
	case <-ctx.Done():
		// Shutdown may wait for a write-back that a FUSE request
		// started: give up on it too.
		err = ctx.Err()
	}
	if err == nil {
		return nil
	}
	lost := fsys.Unwritten()
	conn.abandon() // every call under way ends
	if len(lost) == 0 {
		logger.Printf("writing back after unmounting %s: %v", mountpoint, err)
		return nil
	}
	var total int64
	for _, u := range lost {
		total += u.Bytes
		name := u.Path
		if name == "" {
			name = "(no name known)"
		}
		logger.Printf("unmounted %s: %d bytes of %s (file id %d) not written back: %v", mountpoint, u.Bytes, name, u.FileID, err)
	}
	return &afterMountError{fmt.Sprintf("unmounted %s with %d bytes of %d files not written back to the server (%v)", mountpoint, total, len(lost), err)}
}

// afterMountError is a failure after the mount had succeeded: exit status
// 1, not the mount's 32.
type afterMountError struct{ msg string }

func (e *afterMountError) Error() string { return e.msg }

// unmount writes back and commits everything, then unmounts. If files are
// still open it detaches the mount, so it leaves the namespace while they
// are served until they close.
func unmount(server *fuse.Server, fsys *fs.FS, mountpoint string, logger *log.Logger) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	if err := fsys.Shutdown(ctx); err != nil {
		logger.Printf("writing back before unmount: %v", err)
	}
	if err := fsys.Unmount(server); err != nil {
		logger.Printf("unmount %s: %v; detaching it", mountpoint, err)
		if err := syscall.Unmount(mountpoint, syscall.MNT_DETACH); err != nil {
			logger.Printf("detach %s: %v", mountpoint, err)
		}
	}
}

// fsOptions converts mount options for the file system.
func fsOptions(o *mountopts.Options, c *connection) fs.Options {
	sec := func(n int) time.Duration { return time.Duration(n) * time.Second }
	fo := fs.Options{
		ACRegMin: sec(o.ACRegMin), ACRegMax: sec(o.ACRegMax),
		ACDirMin: sec(o.ACDirMin), ACDirMax: sec(o.ACDirMax),
		LookupPositive: o.LookupCache != mountopts.LookupCacheNone,
		LookupNegative: o.LookupCache == mountopts.LookupCacheAll,
		NoCTO:          o.NoCTO,
		NoReaddirPlus:  o.NoRdirPlus,
		Sync:           o.Sync,
		ReadOnly:       o.ReadOnly,
		RSize:          c.rsize,
		WSize:          c.wsize,
		AuthNone:       o.Sec == mountopts.SecNone,
		RemotePosix:    o.LocalLock.Remote(o.Lock == mountopts.ChoiceOn, false),
		RemoteFlock:    o.LocalLock.Remote(o.Lock == mountopts.ChoiceOn, true),

		IOURing:           o.IOURing,
		IOURingQueueDepth: o.IOURingQDepth,
	}
	if o.FixedUID.Set {
		fo.FixedUID = &o.FixedUID.ID
	}
	if o.FixedGID.Set {
		fo.FixedGID = &o.FixedGID.ID
	}
	if p, ok := c.nfs.RPC().Transport().(sunrpc.PayloadBuffers); ok {
		// Write-behind fills the transport's registered buffers, and
		// holds no more than half of them.
		fo.Payloads = p
		fo.DirtyLimit = int64(xprtrdma.DefaultChunkBuffers * max(c.rsize, c.wsize) / 2)
	}
	if r, ok := c.nfs.RPC().Transport().(sunrpc.ReplyBuffers); ok {
		fo.ReplyBuffers = r
	}
	return fo
}

// applyFUSEOptions sets the FUSE side of the mount options. The mount
// flags follow the kernel NFS client's defaults (suid, dev, exec) unless
// the options say otherwise.
func applyFUSEOptions(m *fuse.MountOptions, o *mountopts.Options, source string) {
	allowOther, defaultPermissions := sharing(o, os.Geteuid())
	m.AllowOther = allowOther
	m.Debug = o.Debug
	m.FsName = source
	if o.FSName != "" {
		m.FsName = o.FSName
	}
	if o.MaxRead > 0 {
		m.MaxWrite = min(m.MaxWrite, o.MaxRead)
	}
	m.DirectMount = true
	m.DirectMountFlags = syscall.MS_RELATIME
	flag := func(set bool, yes, no string) {
		if set {
			m.Options = append(m.Options, yes)
		} else {
			m.Options = append(m.Options, no)
		}
	}
	flag(o.NoDev, "nodev", "dev")
	flag(o.NoSUID, "nosuid", "suid")
	flag(o.NoExec, "noexec", "exec")
	if o.ReadOnly {
		m.Options = append(m.Options, "ro")
	}
	if defaultPermissions {
		m.Options = append(m.Options, "default_permissions")
	}
	switch o.Atime {
	case mountopts.AtimeNoatime:
		m.DirectMountFlags = syscall.MS_NOATIME
	case mountopts.AtimeStrictatime:
		m.DirectMountFlags = syscall.MS_STRICTATIME
	}
	if o.NoDirAtime {
		m.DirectMountFlags |= syscall.MS_NODIRATIME
	}
}

// sharing decides who may use the mount and who checks permissions, for a
// mount made by euid.
//
// An NFS mount serves every local user, each with their own credentials,
// and the kernel client checks permissions on every path walk and open
// (with the server's ACCESS answers). So by default a mount by root is open
// to all users (allow_other), and the kernel checks permissions against the
// files' modes (default_permissions): without it, FUSE leaves every check
// to rdmafs but asks it nothing for names it has cached, so a directory's
// search permission would go unchecked, as would opens of special files.
// rdmafs still asks the server (ACCESS) at open, as the kernel client does.
//
// With uid=, gid= or sec=none every call carries one identity whoever makes
// it: the caller's own uid means nothing to the server, so the kernel must
// not check permissions with it, and such a mount stays private to the user
// who made it unless allow_other says otherwise.
func sharing(o *mountopts.Options, euid int) (allowOther, defaultPermissions bool) {
	oneIdentity := o.FixedUID.Set || o.FixedGID.Set || o.Sec == mountopts.SecNone
	return o.AllowOther.Resolve(euid == 0 && !oneIdentity), o.DefaultPermissions.Resolve(!oneIdentity)
}

// readaheadCalls is how many rsize READs the kernel may read ahead of a
// program reading a file in sequence: 15, as the kernel NFS client's
// readahead (NFS_MAX_READAHEAD, one less than its default slot table).
// With 4 cold reads ran about a tenth slower on the host (make bench).
const readaheadCalls = 15

// setReadahead lets the kernel read ahead n bytes of a file read in
// sequence (the FUSE default is 128 KiB, too little to keep large READs
// in flight).
func setReadahead(mountpoint string, n int, logf func(string, ...any)) {
	var st syscall.Stat_t
	if err := syscall.Stat(mountpoint, &st); err != nil {
		return
	}
	path := fmt.Sprintf("/sys/class/bdi/%d:%d/read_ahead_kb", st.Dev>>8&0xfff, st.Dev&0xff|st.Dev>>12&0xfff00)
	if err := os.WriteFile(path, []byte(fmt.Sprint(n>>10)), 0); err != nil {
		logf("setting readahead: %v", err)
	}
}

// hostPort joins a host and a port.
func hostPort(host string, port int) string { return net.JoinHostPort(host, fmt.Sprint(port)) }
