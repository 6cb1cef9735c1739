// Command rdmafs mounts an NFSv3 export through FUSE, over TCP or
// RPC-over-RDMA, and serves a directory over NFSv3 for tests and quick
// setups.
//
//	rdmafs [-f] [-d] [-o OPTIONS] SERVER:/EXPORT MOUNTPOINT
//	rdmafs serve [-o OPTIONS] DIR
//	rdmafs stats [-json] [-i SECONDS [COUNT]] [MOUNTPOINT...]
package main

import (
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/rdmafs/rdmafs/mountopts"
)

// Exit statuses.
const (
	exitOK    = 0
	exitError = 1  // a failure after the mount, or of serve and stats
	exitUsage = 2  // bad command line or options; nothing was done
	exitMount = 32 // the mount failed, as mount(8) reports it
)

const usageText = `usage:
  rdmafs [-f] [-d] [-o OPTIONS] SERVER:/EXPORT MOUNTPOINT
      Mount the NFSv3 export SERVER:/EXPORT on MOUNTPOINT (an empty
      directory). rdmafs returns once the mount is ready and keeps serving
      it in the background; unmount with umount or fusermount3 -u.
        -f   stay in the foreground
        -d   log every FUSE request (implies -f)
        -o   comma-separated options, below; may be given more than once
      The same works from mount(8) and fstab:
        mount -t fuse.rdmafs SERVER:/EXPORT MOUNTPOINT -o proto=tcp
        SERVER:/EXPORT MOUNTPOINT fuse.rdmafs proto=tcp,_netdev 0 0
      Over RPC-over-RDMA: -o proto=rdma (port 20049 unless port= says
      otherwise); without an RDMA device, provider=soft runs the RDMA path
      in software (rdmafs at both ends).

  rdmafs serve [-o OPTIONS] DIR
      Export the directory DIR as "/" over NFSv3 (MOUNT and NFS on one TCP
      port) until SIGTERM or SIGINT, and print the command that mounts it.
      Options:
        port=N          TCP port (default 2049; 0 picks a free one)
        addr=IP         address to listen on (default 127.0.0.1)
        ro | rw         refuse or allow changes (default rw)
        workers=N       calls served at once per connection (default 8)
        proto=tcp|rdma  rdma: also serve NFS over RPC-over-RDMA (MOUNT stays
                        on TCP); default tcp
        rdmaport=N      RDMA port (default 20049; 0 picks a free one)
        provider=ibverbs|soft  verbs provider for rdma (default ibverbs)
      Export options, as knfsd's (exports(5)), safe by default:
        secure | insecure      calls over TCP only from ports below 1024
                               (root's); default secure. RDMA connections
                               count as secure, as in knfsd
        root_squash | no_root_squash  uid/gid 0 served as anonuid/anongid
                               (default root_squash)
        all_squash | no_all_squash    everyone served as anonuid/anongid
                               (default no_all_squash)
        anonuid=N, anongid=N   the anonymous identity (default 65534)
        clients=LIST           addresses and networks (CIDR) joined by +,
                               or *; default: this host only (the address
                               served on)
        max_connections=N      TCP connections at once (default 256)
        idle_timeout=SECONDS   close idle connections (default 360; 0 never)

  rdmafs stats [-json] [-i SECONDS [COUNT]] [MOUNTPOINT...]
      Print the statistics of the rdmafs mount at each MOUNTPOINT (all rdmafs
      mounts if none) as its block of /proc/self/mountstats, which nfs-utils'
      mountstats reads: rdmafs stats >FILE; mountstats -f FILE.
        -json  one JSON object per mount and line, every counter by name
        -i     every SECONDS, COUNT times (default: until killed): the rates
               of the last interval as nfsiostat shows them (the first report
               since the mount); with -json, the counters

Exit status: 0 success, 2 bad usage or options, 32 the mount failed,
1 any other failure.

Mount options:
`

func usage(w io.Writer) {
	fmt.Fprint(w, usageText)
	fmt.Fprint(w, mountopts.Usage())
}

// usageError is an error in the command line: exit status 2.
type usageError struct{ msg string }

func (e *usageError) Error() string { return e.msg }

func main() {
	os.Exit(run(os.Args[1:]))
}

func run(args []string) int {
	var err error
	status := exitError
	switch {
	case len(args) > 0 && args[0] == "serve":
		err = serve(args[1:])
	case len(args) > 0 && args[0] == "stats":
		err = stats(args[1:])
	default:
		status = exitMount
		err = mount(args)
	}
	if err == nil {
		return exitOK
	}
	if errors.Is(err, errHelp) {
		usage(os.Stdout)
		return exitOK
	}
	fmt.Fprintf(os.Stderr, "rdmafs: %v\n", err)
	var ue *usageError
	var oe *mountopts.Error
	if errors.As(err, &ue) || errors.As(err, &oe) {
		return exitUsage
	}
	return status
}

var errHelp = errors.New("help")
