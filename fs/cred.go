package fs

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"strconv"
	"sync"
	"time"

	"github.com/hanwen/go-fuse/v2/fuse"

	"github.com/rdmafs/rdmafs/sunrpc"
)

// A FUSE request carries the caller's uid, gid and pid but not its
// supplementary groups, which AUTH_SYS sends as the kernel client does.
// They are read from /proc/PID/status and kept for credTTL per process.
const (
	credTTL       = time.Second
	credCacheSize = 4096
)

type credCache struct {
	mu    sync.Mutex
	byPid map[uint32]*credEntry
	self  sunrpc.Cred // for requests without a caller (the daemon's own)
}

type credEntry struct {
	cred    sunrpc.Cred
	expires time.Time
}

func (c *credCache) init() {
	c.byPid = make(map[uint32]*credEntry)
	c.self = sunrpc.Cred{UID: uint32(os.Geteuid()), GID: uint32(os.Getegid())}
}

// lookup returns the credential of the caller in ctx, with the fixed uid or
// gid in place of the caller's when given.
func (c *credCache) lookup(ctx context.Context, fixedUID, fixedGID *uint32) *sunrpc.Cred {
	caller, ok := fuse.FromContext(ctx)
	if !ok {
		return &c.self
	}
	uid, gid := caller.Uid, caller.Gid
	if fixedUID != nil {
		uid = *fixedUID
	}
	if fixedGID != nil {
		gid = *fixedGID
	}
	now := time.Now()
	c.mu.Lock()
	e := c.byPid[caller.Pid]
	if e != nil && e.cred.UID == uid && e.cred.GID == gid && now.Before(e.expires) {
		c.mu.Unlock()
		return &e.cred
	}
	c.mu.Unlock()

	e = &credEntry{cred: sunrpc.Cred{UID: uid, GID: gid}, expires: now.Add(credTTL)}
	if fixedUID == nil && fixedGID == nil && caller.Pid != 0 {
		e.cred.Groups, _ = processGroups(caller.Pid)
	}
	c.mu.Lock()
	if len(c.byPid) >= credCacheSize {
		clear(c.byPid)
	}
	c.byPid[caller.Pid] = e
	c.mu.Unlock()
	return &e.cred
}

// processGroups reads the supplementary groups of process pid.
func processGroups(pid uint32) ([]uint32, error) {
	var groups []uint32
	var bad error
	err := procStatus(pid, func(name string, value []byte) bool {
		if name != "Groups" {
			return true
		}
		for _, field := range bytes.Fields(value) {
			g, err := strconv.ParseUint(string(field), 10, 32)
			if err != nil {
				bad = fmt.Errorf("groups of process %d: %q", pid, value)
				return false
			}
			groups = append(groups, uint32(g))
		}
		return false
	})
	if err == nil {
		err = bad
	}
	return groups, err
}
