package main

import (
	"strings"

	"github.com/rdmafs/rdmafs/mountopts"
)

// manPage returns the rdmafs(8) man page in roff (man macros). The
// command forms come from commandDocs, the serve options from serveopts'
// table and the mount options from mountopts' table, the same sources as
// rdmafs -h; docs/rdmafs.8 is this text, which TestManPage checks (make
// man rewrites it).
func manPage() string {
	var b strings.Builder
	w := func(lines ...string) {
		for _, l := range lines {
			b.WriteString(l + "\n")
		}
	}
	text := func(s string) { w(mountopts.Roff(s)) }
	w(`.TH RDMAFS 8 "" "rdmafs" "System Administration"`,
		".nh", // counter and option names must not be hyphenated
		".SH NAME",
		`rdmafs \- mount an NFSv3 export through FUSE, over TCP or RPC-over-RDMA`,
		".SH SYNOPSIS")
	for i, c := range commandDocs {
		if i > 0 {
			w(".br")
		}
		w(mountopts.RoffSyntax(c.synopsis))
	}
	w(".br", mountopts.RoffSyntax("mount -t fuse.rdmafs [-o OPTIONS] SERVER:/EXPORT MOUNTPOINT"))
	w(".SH DESCRIPTION")
	text("rdmafs is an NFSv3 client (RFC 1813) that runs in user space: it mounts an NFS export " +
		"through FUSE and turns every file operation into NFSv3 calls. The calls travel over TCP, " +
		"as with mount -t nfs, or over RPC-over-RDMA Version One (RFC 8166, RFC 8267, RFC 8797) " +
		"on libibverbs, where READ and WRITE data move by direct data placement into registered " +
		"buffers. It behaves like the Linux kernel NFS client and takes its mount options (nfs(5)) " +
		"and the tunables of its RPC-over-RDMA transport.")
	sections := []string{"MOUNTING", "SERVING A DIRECTORY", "STATISTICS"}
	for i, c := range commandDocs {
		w(".SH "+sections[i], ".PP", mountopts.RoffSyntax(c.synopsis), ".PP")
		text(c.text)
		if c.after == "" {
			manExamples(w, c.examples)
		}
		for _, it := range c.items {
			w(".TP", mountopts.RoffSyntax(it.syntax))
			text(it.help)
		}
		for _, sec := range c.sections {
			w(".PP")
			text(sec.title)
			for _, it := range sec.items {
				w(".TP", mountopts.RoffSyntax(it.syntax))
				text(it.help)
			}
		}
		if c.after != "" {
			w(".PP")
			text(c.after)
			manExamples(w, c.examples)
		}
		if c.tail != "" {
			w(".PP")
			text(c.tail)
		}
		if i == 0 {
			w(".SH MOUNT OPTIONS")
			b.WriteString(mountopts.ManOptions())
		}
		if i == 2 {
			w(".PP")
			text("The block has the lines of the kernel's: opts, age, caps, sec, events, bytes, the xprt " +
				"line of the transport (one per connection with nconnect; rdma adds payload_copies, " +
				"registered_bytes, registered_peak_bytes, credits_granted and write_chunks_placed at its end: the bytes of buffers the " +
				"connection has registered, and so pinned, now and at most, the credits the server grants now, and the write chunks " +
				"offered in an io_uring entry's buffer, whose READ data nothing in rdmafs copies) and the per-op statistics, so mountstats, mountstats iostat, mountstats " +
				"nfsstat and mountstats -S SINCEFILE work on it. The events and bytes count the FUSE " +
				"requests the kernel sent rdmafs; counters without a meaning for rdmafs stay 0: " +
				"dentryrevalidates and attrinvalidates, vfsupdatepage, vfsreadpage and vfswritepage, " +
				"congestionwait, extendwrite, shortreads, shortwrites, delay, pnfsreads and pnfswrites. " +
				"Reads that the page cache answers never reach rdmafs, so normalreadbytes counts only " +
				"what was fetched.")
		}
	}
	w(".SH INSTALLATION",
		".PP")
	text("make install puts rdmafs in $(PREFIX)/sbin (PREFIX is /usr/local unless given; DESTDIR " +
		"stages a package) and this page in $(PREFIX)/share/man/man8. mount(8) runs mount.fuse3, " +
		"which runs rdmafs, with the fixed search path " + helperPath + " whatever the caller's " +
		"PATH, so mount -t fuse.rdmafs, mount -a and fstab lines find rdmafs only in one of " +
		"those directories.")
	w(".PP", "An fstab(5) line; _netdev makes the boot wait for the network:", ".PP", ".nf", ".RS")
	text("server:/export  /mnt/data  fuse.rdmafs  proto=rdma,_netdev  0  0")
	w(".RE", ".fi")
	w(".SH EXIT STATUS")
	text(strings.TrimPrefix(exitDoc, "Exit status: "))
	w(".SH SEE ALSO",
		`.BR nfs (5),`, `.BR fstab (5),`, `.BR mount (8),`, `.BR mount.fuse3 (8),`,
		`.BR fusermount3 (1),`, `.BR mountstats (8),`, `.BR nfsiostat (8),`, `.BR exports (5)`)
	return b.String()
}

// helperPath is the search path mount(8) gives the helpers it runs
// (util-linux's default root path; checked on Debian 12).
const helperPath = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

func manExamples(w func(...string), lines []string) {
	if len(lines) == 0 {
		return
	}
	w(".PP", ".nf", ".RS")
	for _, l := range lines {
		w(mountopts.Roff(l))
	}
	w(".RE", ".fi")
}
