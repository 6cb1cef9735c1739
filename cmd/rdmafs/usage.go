package main

import (
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/rdmafs/rdmafs/cmd/rdmafs/serveopts"
	"github.com/rdmafs/rdmafs/mountopts"
)

// commandDoc documents one form of the command line. rdmafs -h and the
// rdmafs(8) man page are both made from these, so they say the same.
type commandDoc struct {
	synopsis string
	text     string       // what it does
	items    []itemDoc    // its flags or options
	sections []sectionDoc // further items under a heading of their own
	after    string       // a paragraph after the items
	examples []string     // lines shown as they are: commands, fstab lines
	tail     string       // a last paragraph
}

// itemDoc is one flag or option: how it is written and what it does.
type itemDoc struct{ syntax, help string }

// sectionDoc is a group of items under a heading.
type sectionDoc struct {
	title string
	items []itemDoc
}

var commandDocs = []commandDoc{
	{
		synopsis: "rdmafs [-f] [-d] [-o OPTIONS] SERVER:/EXPORT MOUNTPOINT",
		text: "Mount the NFSv3 export SERVER:/EXPORT on MOUNTPOINT (an empty directory). " +
			"rdmafs returns once the mount is ready and keeps serving it in the background; " +
			"unmount with umount or fusermount3 -u.",
		items: []itemDoc{
			{"-f", "stay in the foreground"},
			{"-d", "log every FUSE request (implies -f)"},
			{"-o", "comma-separated options, below; may be given more than once"},
		},
		after: "The same works from mount(8) and fstab:",
		examples: []string{
			"mount -t fuse.rdmafs SERVER:/EXPORT MOUNTPOINT -o proto=tcp",
			"SERVER:/EXPORT MOUNTPOINT fuse.rdmafs proto=tcp,_netdev 0 0",
		},
		tail: "Over RPC-over-RDMA: -o proto=rdma (port " + strconv.Itoa(defaultRDMAPort) + " unless port= says otherwise); " +
			"without an RDMA device, provider=soft runs the RDMA path in software (rdmafs at both ends).",
	},
	{
		synopsis: "rdmafs serve [-o OPTIONS] DIR",
		text: `Export the directory DIR as "/" over NFSv3 (MOUNT and NFS on one TCP port) until ` +
			"SIGTERM or SIGINT, and print the command that mounts it. Options:",
		items:    serveItems(serveopts.Sections()[0].Items),
		sections: serveSections(serveopts.Sections()[1:]),
	},
	{
		synopsis: statsSynopsis,
		text: "Print the statistics of the rdmafs mount at each MOUNTPOINT (all rdmafs mounts if none) " +
			"as its block of /proc/self/mountstats, which nfs-utils' mountstats reads:",
		examples: []string{"rdmafs stats >FILE; mountstats -f FILE"},
		items: []itemDoc{
			{"-json", "one JSON object per mount and line, every counter by name"},
			{"-i", "every SECONDS, COUNT times (default: until killed): the rates of the last interval " +
				"as nfsiostat shows them (the first report since the mount); with -json, the counters"},
			{"-prometheus", "the Prometheus text format, for node_exporter's textfile collector: " +
				"node_exporter's node_mountstats_nfs_* names for what mountstats has, rdmafs_* for " +
				"per-operation errors, latency histograms and the RPC-over-RDMA counters; no mounts, no output"},
			{"-listen ADDR", "serve the same on HTTP at ADDR (HOST:PORT) on /metrics, found afresh for " +
				"each scrape, until SIGTERM or SIGINT; it answers nothing else"},
		},
	},
}

// exitDoc documents the exit status.
const exitDoc = "Exit status: 0 success, 2 bad usage or options, 32 the mount failed, 1 any other failure."

func usage(w io.Writer) {
	var b strings.Builder
	b.WriteString("usage:\n")
	for i, c := range commandDocs {
		if i > 0 {
			b.WriteString("\n")
		}
		b.WriteString("  " + c.synopsis + "\n")
		mountopts.Wrap(&b, c.text, "      ", "      ")
		// Examples before the items are what the text announces.
		if c.after == "" {
			writeExamples(&b, c.examples)
		}
		writeItems(&b, c.items)
		for _, sec := range c.sections {
			mountopts.Wrap(&b, sec.title, "      ", "      ")
			writeItems(&b, sec.items)
		}
		if c.after != "" {
			mountopts.Wrap(&b, c.after, "      ", "      ")
			writeExamples(&b, c.examples)
		}
		if c.tail != "" {
			mountopts.Wrap(&b, c.tail, "      ", "      ")
		}
	}
	b.WriteString("\n")
	mountopts.Wrap(&b, exitDoc, "", "")
	b.WriteString("\nMount options:\n")
	b.WriteString(mountopts.Usage())
	io.WriteString(w, b.String())
}

// writeItems writes items as a table: the syntax, then the help wrapped in
// a column of its own; a syntax too long for the column gets the help
// after it.
func writeItems(b *strings.Builder, items []itemDoc) {
	width := 0
	for _, it := range items {
		width = max(width, min(len(it.syntax), 16))
	}
	for _, it := range items {
		head := fmt.Sprintf("        %-*s  ", width, it.syntax)
		if len(it.syntax) > width {
			head = "        " + it.syntax + "  "
		}
		mountopts.Wrap(b, it.help, head, strings.Repeat(" ", 8+width+2))
	}
}

// serveItems are the options of rdmafs serve, from its option table.
func serveItems(items []serveopts.Item) []itemDoc {
	docs := make([]itemDoc, len(items))
	for i, it := range items {
		docs[i] = itemDoc{it.Syntax, it.Help}
	}
	return docs
}

func serveSections(secs []serveopts.Section) []sectionDoc {
	docs := make([]sectionDoc, len(secs))
	for i, s := range secs {
		docs[i] = sectionDoc{s.Title, serveItems(s.Items)}
	}
	return docs
}

func writeExamples(b *strings.Builder, lines []string) {
	for _, l := range lines {
		b.WriteString("        " + l + "\n")
	}
}
