package fusedev

import (
	"os"
	"strconv"
)

// Descriptors returns the process's descriptors open on /dev/fuse. go-fuse
// does not export the descriptor its fuse.Server opens for a mount: the
// one that Descriptors gives after the mount and did not give before it
// is that mount's, which Serve then reads.
func Descriptors() (map[int]bool, error) {
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		return nil, err
	}
	fds := map[int]bool{}
	for _, e := range ents {
		fd, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if target, err := os.Readlink("/proc/self/fd/" + e.Name()); err == nil && target == "/dev/fuse" {
			fds[fd] = true
		}
	}
	return fds, nil
}
