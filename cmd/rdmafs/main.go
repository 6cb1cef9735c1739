// Command rdmafs mounts an NFSv3 export through FUSE, over TCP or
// RPC-over-RDMA, and serves a directory over NFSv3 for tests and quick
// setups.
//
//	rdmafs [-f] [-d] [-o OPTIONS] SERVER:/EXPORT MOUNTPOINT
//	rdmafs serve [-o OPTIONS] DIR
//	rdmafs stats [-json | -prometheus | -listen ADDR] [-i SECONDS [COUNT]] [MOUNTPOINT...]
package main

import (
	"errors"
	"fmt"
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
