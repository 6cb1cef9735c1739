package fs

import (
	"bufio"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/rdmafs/rdmafs/nfs3"
	"github.com/rdmafs/rdmafs/nfs3/nlm"
)

// StatsXattr is the extended attribute of the mount's root directory that
// holds the statistics of WriteStats; `rdmafs stats` reads it.
const StatsXattr = "user.rdmafs.mountstats"

// Server capabilities of the "caps:" line, as the kernel numbers them
// (NFS_CAP_*, include/linux/nfs_fs_sb.h). The kernel sets hard links and
// symlinks for every NFSv3 mount and READDIRPLUS unless nordirplus; ACLs
// (the NFSACL side protocol) rdmafs does not speak.
const (
	capReaddirplus = 1 << 0
	capHardlinks   = 1 << 1
	capSymlinks    = 1 << 2
)

// WriteStats writes the statistics block of the mount in the format of
// /proc/self/mountstats (the kernel's nfs_show_stats and
// rpc_clnt_show_stats), which nfs-utils' mountstats and nfsiostat parse.
// Lines and what their fields mean for rdmafs:
//
//	device SOURCE mounted on MOUNTPOINT with fstype nfs statvers=1.1
//	opts:   the mount options in force (rsize and wsize as negotiated),
//	        and fuse_channel=io_uring or dev: how the FUSE requests come
//	        (fusechannel.go)
//	age:    seconds since the mount
//	caps:   caps=0x7 (0x6 with nordirplus), wtmult=0 (rdmafs does not use
//	        the server's write multiple), dtsize=the READDIR(PLUS) size
//	        asked for, bsize=0 (no bsize option), namlen=255
//	sec:    flavor=1,pseudoflavor=1 for sec=sys; flavor=0 for sec=none
//	events: what the kernel asked of rdmafs, counted as FUSE requests
//	        (events.go): inoderevalidates = GETATTR, vfsopen = OPEN,
//	        OPENDIR and CREATE, vfslookup = LOOKUP (a FUSE revalidation
//	        is a LOOKUP too, so dentryrevalidates stays 0), vfspermission =
//	        ACCESS, vfsreadpages and vfswritepages = READ and WRITE
//	        requests through the page cache, vfsreaddir = READDIR and
//	        READDIRPLUS, vfssetattr, vfsflush, vfsfsync (FSYNC, FSYNCDIR),
//	        vfslock (GETLK, SETLK, SETLKW), vfsrelease = RELEASE of a file,
//	        datainvalidates = opens answered without FOPEN_KEEP_CACHE (the
//	        file changed or had no cached data), setattrtrunc = SETATTR of
//	        the size, sillyrenames = files renamed to .nfs* while open.
//	        Always 0: attrinvalidates (rdmafs keeps no such flag; cached
//	        attributes time out), vfsupdatepage, vfsreadpage and
//	        vfswritepage (FUSE sends whole requests, not pages),
//	        congestionwait, extendwrite, shortreads, shortwrites and delay
//	        (not counted), pnfsreads and pnfswrites (NFSv4.1 only).
//	bytes:  normalreadbytes and normalwritebytes: bytes of READ and WRITE
//	        requests through the page cache (reads the page cache answers
//	        never reach rdmafs, so unlike the kernel's these count only
//	        what was fetched); directreadbytes and directwritebytes:
//	        O_DIRECT requests; serverreadbytes: data of NFS READ replies;
//	        serverwritebytes: data of NFS WRITE calls answered by the
//	        server; readpages and writepages: 4 KiB pages of the page-cache
//	        requests.
//	RPC iostats version: 1.1  p/v: 100003/3 (nfs)
//	xprt:   the transport's line (one per connection with nconnect)
//	per-op statistics: one line per NFSv3 procedure
//
// The block ends with an empty line, as in /proc/self/mountstats. On a
// mount whose locks go to the server's lock manager, a second block
// follows, which the kernel has no counterpart of per mount (it counts
// NLM for the whole host, in /proc/net/rpc/nlm):
//
//	per-op NLM statistics p/v: 100021/4 (nlockmgr)
//	then one line per NLM version 4 procedure, in the format of the
//	        NFS ones, named NLM_TEST, NLM_LOCK and so on
//
// and an empty line.
func (f *FS) WriteStats(w io.Writer, mountpoint string) error {
	rpc := f.nfs.RPC()
	b := bufio.NewWriter(w)
	caps := capHardlinks | capSymlinks
	if !f.opts.NoReaddirPlus {
		caps |= capReaddirplus
	}
	sec := "flavor=1,pseudoflavor=1"
	if f.opts.AuthNone {
		sec = "flavor=0"
	}
	fmt.Fprintf(b, "device %s mounted on %s with fstype nfs statvers=1.1\n", mangle(f.cfg.Source), mangle(mountpoint))
	fmt.Fprintf(b, "\topts:\t%s,fuse_channel=%s\n", f.cfg.MountOptions, f.FUSEChannel())
	fmt.Fprintf(b, "\tage:\t%d\n", int64(time.Since(f.start).Seconds()))
	fmt.Fprintf(b, "\tcaps:\tcaps=0x%x,wtmult=0,dtsize=%d,bsize=0,namlen=%d\n",
		caps, min(uint32(f.opts.RSize), dirPageMax), nfs3.MaxNameLen)
	fmt.Fprintf(b, "\tsec:\t%s\n", sec)
	// The kernel ends every number of these two lines with a space.
	b.WriteString("\tevents:\t")
	for i := range numEvents {
		v := f.events.events[i].Load()
		if i == evSillyRename {
			v = f.sillyCount.Load()
		}
		fmt.Fprintf(b, "%d ", v)
	}
	b.WriteString("\n\tbytes:\t")
	for i := range numByteCounts {
		v := f.events.bytes[i].Load()
		if i == bytesServerWritten {
			v = rpc.PayloadBytes(nfs3.ProcWrite)
		}
		fmt.Fprintf(b, "%d ", v)
	}
	fmt.Fprintf(b, "\n\tRPC iostats version: 1.1  p/v: %d/%d (nfs)\n", nfs3.Program, nfs3.Version)
	fmt.Fprintf(b, "\txprt:\t%s\n", rpc.Transport().XprtStats())
	b.WriteString("\tper-op statistics\n")
	if err := rpc.WriteOpStats(b); err != nil {
		return err
	}
	b.WriteString("\n")
	if f.cfg.Locks != nil {
		// A line nfs-utils' mountstats and nfsiostat take in their
		// stride: they read every line after the mount's RPC header as
		// an RPC line, and one that starts with per-op as the per-op
		// header, so the NLM procedures are listed with the NFS ones.
		fmt.Fprintf(b, "%s p/v: %d/%d (nlockmgr)\n", LockStatsHeader, nlm.Program, nlm.Version)
		if err := f.cfg.Locks.RPC().WriteOpStats(b); err != nil {
			return err
		}
		b.WriteString("\n")
	}
	return b.Flush()
}

// LockStatsHeader starts the block of NLM procedures that follows a
// mount's block in its statistics when its locks go to the server (the
// kernel has no such block: its lockd is the host's).
const LockStatsHeader = "per-op NLM statistics"

// mangle escapes the characters that would split a field of the
// mountstats line (space, tab, newline) and the backslash, as octal
// escapes, the way the kernel writes device names and mount points there
// (seq_escape, seq_path).
func mangle(s string) string {
	if !strings.ContainsAny(s, " \t\n\\") {
		return s
	}
	var b strings.Builder
	for i := range len(s) {
		switch c := s[i]; c {
		case ' ', '\t', '\n', '\\':
			fmt.Fprintf(&b, "\\%03o", c)
		default:
			b.WriteByte(c)
		}
	}
	return b.String()
}
