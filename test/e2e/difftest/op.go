// Package difftest runs the same scripts of system calls on two mounts of
// one export, as several users, and compares every result: the differential
// conformance test of rdmafs against the kernel NFS client.
//
// A script is a list of operations, each made by one of the run's users
// (root and unprivileged ones) on paths relative to the run's directory.
// Each user's calls are made on an OS thread that holds that user's
// credentials for good, so FUSE and the kernel NFS client see them as that
// user's, with their supplementary groups. A result records what a program
// would look at: the return value and errno, the attributes of a stat, the
// bytes read (as a digest), the names listed.
//
// Compare lines up two runs of one script. Timestamps are compared as the
// kernel's own tests would: a time set explicitly must read back the same;
// otherwise what matters is whether an operation changed it, which is what
// the run records (Stat.Changed).
package difftest

import (
	"fmt"
	"strings"
)

// Op is one system call of a script.
type Op struct {
	User string // who makes the call: a User's Name
	Call Call
	Path string // relative to the run's directory
	// Path2 is the second path of rename, link and symlink (the new name),
	// or the target of a symlink.
	Path2 string
	FD    string // the name of a descriptor opened by an open of the script
	Flags int    // open flags, access(2) mode
	Mode  uint32 // creation mode or new mode
	Off   int64
	Len   int64 // bytes to write or read; the size of a truncate
	UID   int   // chown: -1 leaves it
	GID   int
	// Atime and Mtime are the times utimes sets, in seconds since the
	// epoch; Now sets both to the current time.
	Atime, Mtime int64
	Now          bool
	Seed         uint64 // what pwrite writes
	// ACL is the ACL SetACL sets, in the short text form (acl.go);
	// Default makes SetACL and GetACL work on a directory's default ACL.
	ACL     string
	Default bool
}

// Call names a system call.
type Call string

// The calls a script can make.
const (
	Open      Call = "open"      // open(Path, Flags, Mode) as descriptor FD
	Close     Call = "close"     // close(FD)
	Pwrite    Call = "pwrite"    // pwrite(FD, Len bytes of Seed, Off)
	Pread     Call = "pread"     // pread(FD, Len, Off): digest of the bytes
	Fsync     Call = "fsync"     // fsync(FD)
	Ftruncate Call = "ftruncate" // ftruncate(FD, Len)
	Fstat     Call = "fstat"     // fstat(FD)
	Truncate  Call = "truncate"  // truncate(Path, Len)
	Stat      Call = "stat"      // stat(Path)
	Lstat     Call = "lstat"     // lstat(Path)
	Chmod     Call = "chmod"     // chmod(Path, Mode)
	Chown     Call = "chown"     // lchown(Path, UID, GID)
	Utimes    Call = "utimes"    // utimensat(Path, Atime, Mtime) or (Path, NULL) if Now
	Unlink    Call = "unlink"
	Rmdir     Call = "rmdir"
	Mkdir     Call = "mkdir"    // mkdir(Path, Mode)
	Mkfifo    Call = "mkfifo"   // mknod(Path, S_IFIFO|Mode)
	Rename    Call = "rename"   // rename(Path, Path2)
	Link      Call = "link"     // link(Path, Path2)
	Symlink   Call = "symlink"  // symlink(Path2, Path): Path2 is the target
	Readlink  Call = "readlink" // readlink(Path)
	Access    Call = "access"   // faccessat(Path, Flags, AT_EACCESS)
	Readdir   Call = "readdir"  // the sorted names of directory Path
	ReadFile  Call = "readfile" // open, read to the end, close: digest
	Chdir     Call = "chdir"    // a path walk into Path, as chdir(2) does
	SetACL    Call = "setfacl"  // setxattr(Path, system.posix_acl_*, ACL): acl.go
	GetACL    Call = "getfacl"  // getxattr(Path, system.posix_acl_*): the ACL as text
)

func (op Op) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s: %s", op.User, op.Call)
	switch op.Call {
	case Open:
		fmt.Fprintf(&b, " %s flags %#o mode %#o as %s", op.Path, op.Flags, op.Mode, op.FD)
	case Close, Fsync, Fstat:
		fmt.Fprintf(&b, " %s", op.FD)
	case Pwrite, Pread:
		fmt.Fprintf(&b, " %s %#x bytes at %#x", op.FD, op.Len, op.Off)
	case Ftruncate:
		fmt.Fprintf(&b, " %s to %#x", op.FD, op.Len)
	case Truncate:
		fmt.Fprintf(&b, " %s to %#x", op.Path, op.Len)
	case Chmod, Mkdir, Mkfifo:
		fmt.Fprintf(&b, " %s %#o", op.Path, op.Mode)
	case Chown:
		fmt.Fprintf(&b, " %s %d:%d", op.Path, op.UID, op.GID)
	case Utimes:
		if op.Now {
			fmt.Fprintf(&b, " %s now", op.Path)
		} else {
			fmt.Fprintf(&b, " %s atime %d mtime %d", op.Path, op.Atime, op.Mtime)
		}
	case Rename, Link:
		fmt.Fprintf(&b, " %s %s", op.Path, op.Path2)
	case Symlink:
		fmt.Fprintf(&b, " %s -> %s", op.Path, op.Path2)
	case Access:
		fmt.Fprintf(&b, " %s %#o", op.Path, op.Flags)
	case SetACL, GetACL:
		if op.Default {
			b.WriteString(" default")
		}
		fmt.Fprintf(&b, " %s", op.Path)
		if op.Call == SetACL {
			fmt.Fprintf(&b, " %q", op.ACL)
		}
	default:
		fmt.Fprintf(&b, " %s", op.Path)
	}
	return b.String()
}

// mutates reports whether op may change a file's timestamps, so the run
// lets the clock move on before it (the servers' timestamps come from a
// clock that advances in ticks of a few milliseconds).
func (op Op) mutates() bool {
	switch op.Call {
	case Pwrite, Ftruncate, Truncate, Chmod, Chown, Utimes, Unlink, Rmdir, Mkdir, Mkfifo,
		Rename, Link, Symlink, Fsync, Close, SetACL:
		return true
	case Open:
		return op.Flags&(0o100|0o1000) != 0 // O_CREAT, O_TRUNC
	}
	return false
}

// Result is what a call returned.
type Result struct {
	Errno string // "" on success, else the errno's name (EACCES)
	Ret   int64  // bytes written or read
	Stat  *Attr  // of stat, lstat, fstat
	Data  string // digest of the bytes read, link target, names listed
	// Event is what the run noticed about the call beyond its result,
	// for a known difference to recognise; never compared.
	Event Event
}

// Event is something a run notices about a call.
type Event string

// UnlinkedOpenLink: an unlink or rename removed a name of a regular file
// that has other names and that the run has open. The kernel client hides
// the name (a silly rename) only if the file was opened through it; rdmafs
// cannot tell through which name a file was opened and always hides it.
const UnlinkedOpenLink Event = "removed a name of an open file with other links"

// WriteToUnsearchableDir: access(2) asked for write permission on a
// directory whose mode bits deny the caller search permission. The kernel
// client asks the server, and knfsd grants no change to a directory
// without search permission; FUSE with default_permissions answers from
// the mode bits, which grant write.
const WriteToUnsearchableDir Event = "asked for write access to a directory it may not search"

// FailedInUnwritableDir: a call that adds or removes a name failed, in a
// directory whose mode bits deny the caller write permission. FUSE with
// default_permissions checks that permission first (EACCES); the kernel
// client leaves it to the server and may fail first for another reason
// it sees itself (rmdir of a file: ENOTDIR).
const FailedInUnwritableDir Event = "failed to change a directory it may not write"

// WriteWithoutRead: a pwrite through a descriptor open for reading and
// writing, to a file whose mode bits deny the caller, not its owner, read
// permission. Before a partial write to a page it does not hold, the kernel
// client reads the page (read-modify-write), and the server refuses that
// READ; whether the page is held depends on what the page cache kept,
// which timing decides, so the write fails with EACCES or succeeds, and
// its data may then fail to reach the server, which later fsyncs of the
// file report.
const WriteWithoutRead Event = "wrote through a read-write descriptor to a file it may not read"

// ReadWithoutRead: a pread through a descriptor of a file whose mode bits
// deny the caller, not its owner, read permission (taken away after the
// open). A client answers from its page cache as far as that holds the
// range, and the server refuses the rest; which pages the cache holds
// depends on readahead, which FUSE sizes differently from the NFS client,
// so the count read may differ, or one may read nothing (EACCES).
const ReadWithoutRead Event = "read through a descriptor of a file it may no longer read"

// Attr is what a stat shows.
type Attr struct {
	Mode     uint32 // type and permission bits
	UID, GID uint32
	Nlink    uint64
	Size     int64
	Ino      uint64 // to relate the stats of one run; never compared
	Atime    Time
	Mtime    Time
	Ctime    Time
	// Changed says which of mtime and ctime moved since the previous
	// stat of the same file in the run: "m", "c", "mc" or "-".
	Changed string
	// Set holds the times far from the run's own, which the script set
	// explicitly and which must read back exactly ("mtime 4294967295.0").
	Set string
}

// Time is a timestamp.
type Time struct {
	Sec, Nsec int64
}

func (r Result) String() string {
	var b strings.Builder
	if r.Errno != "" {
		b.WriteString(r.Errno)
	} else {
		fmt.Fprintf(&b, "ok %d", r.Ret)
	}
	if r.Data != "" {
		fmt.Fprintf(&b, " data %s", r.Data)
	}
	if a := r.Stat; a != nil {
		fmt.Fprintf(&b, " mode %#o uid %d gid %d nlink %d size %d changed %s", a.Mode, a.UID, a.GID, a.Nlink, a.Size, a.Changed)
		if a.Set != "" {
			fmt.Fprintf(&b, " %s", a.Set)
		}
	}
	return b.String()
}
