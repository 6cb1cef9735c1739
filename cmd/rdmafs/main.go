// Command rdmafs mounts an NFSv3 export through FUSE, over TCP or
// RPC-over-RDMA, and serves a directory over NFSv3 for tests and quick
// setups.
//
//	rdmafs [-f] [-d] [-o OPTIONS] SERVER:/EXPORT MOUNTPOINT
//	rdmafs serve [-o OPTIONS] DIR
//	rdmafs stats MOUNTPOINT
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

  rdmafs stats MOUNTPOINT
      Print the mount's statistics in the format of /proc/self/mountstats.

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
	var ae *afterMountError
	switch {
	case errors.As(err, &ue) || errors.As(err, &oe):
		return exitUsage
	case errors.As(err, &ae):
		return exitError
	}
	return status
}

var errHelp = errors.New("help")
