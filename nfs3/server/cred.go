package server

import (
	"fmt"
	"runtime"
	"slices"

	"golang.org/x/sys/unix"
)

// cred is the identity a call is served as: its AUTH_SYS uid, gid and
// supplementary groups, or nobody for AUTH_NONE.
type cred struct {
	uid, gid uint32
	groups   []int
}

// identity is the server's own filesystem identity, the state every thread
// returns to after serving a call.
type identity struct {
	uid, gid int
	groups   []int
}

func currentIdentity() (identity, error) {
	groups, err := unix.Getgroups()
	if err != nil {
		return identity{}, fmt.Errorf("server: getgroups: %w", err)
	}
	return identity{uid: unix.Geteuid(), gid: unix.Getegid(), groups: groups}, nil
}

// runAs runs fn on a locked OS thread whose filesystem credentials are c's,
// so the kernel checks permissions for the caller and gives new files the
// caller's ownership, as knfsd does.
//
// Linux keeps credentials per thread. setfsuid, setfsgid and setgroups as raw
// system calls (x/sys/unix's, unlike the standard library's Setgroups, which
// applies to every thread of the process) change only the calling thread, so
// the goroutine is locked to its thread for the duration and the thread gets
// the server's identity back before it is released. A thread whose identity
// cannot be restored stays locked: the runtime then ends it with this
// goroutine instead of running other goroutines on it.
//
// A non-zero fsuid drops the filesystem capabilities (CAP_DAC_OVERRIDE,
// CAP_CHOWN, CAP_FOWNER, ...) from the thread; uid 0 keeps them. There is no
// root squashing.
func (id *identity) runAs(c cred, fn func() error) error {
	if id.is(c) {
		// The caller is the server's own identity (root, mostly): no
		// switch needed, and none of its dozen system calls.
		return fn()
	}
	runtime.LockOSThread()
	err := id.enter(c)
	if err == nil {
		err = fn()
	}
	if rerr := id.leave(); rerr != nil {
		return fmt.Errorf("server: thread left with caller credentials: %w", rerr)
	}
	runtime.UnlockOSThread()
	return err
}

// is reports whether serving c needs no switch: c is the server's own
// identity or, for a server running as root, root with the server's gid
// (root's rights do not depend on its supplementary groups).
func (id *identity) is(c cred) bool {
	if int(c.uid) != id.uid || int(c.gid) != id.gid {
		return false
	}
	return id.uid == 0 || slices.Equal(c.groups, id.groups)
}

// asSelf runs fn with the server's identity inside runAs, for the few checks
// knfsd also makes with its own rights (the owner of a file may read and
// write it whatever its mode says).
func (id *identity) asSelf(c cred, fn func() error) error {
	if err := id.leave(); err != nil {
		return err
	}
	err := fn()
	if eerr := id.enter(c); eerr != nil {
		return eerr
	}
	return err
}

// enter switches the locked thread to c. Groups and gid go first, while the
// thread still has CAP_SETGID in full; each switch is verified because
// setfsuid and setfsgid report failure only by leaving the id unchanged.
func (id *identity) enter(c cred) error {
	if err := unix.Setgroups(c.groups); err != nil {
		return fmt.Errorf("server: setgroups: %w", err)
	}
	if err := setfsgid(int(c.gid)); err != nil {
		return err
	}
	return setfsuid(int(c.uid))
}

// leave gives the thread back the server's identity, fsuid first so the
// thread regains its capabilities.
func (id *identity) leave() error {
	if err := setfsuid(id.uid); err != nil {
		return err
	}
	if err := setfsgid(id.gid); err != nil {
		return err
	}
	if err := unix.Setgroups(id.groups); err != nil {
		return fmt.Errorf("server: setgroups: %w", err)
	}
	return nil
}

func setfsuid(uid int) error {
	unix.SetfsuidRetUid(uid)
	// An invalid id (-1) changes nothing and returns the current one.
	if cur, _ := unix.SetfsuidRetUid(-1); cur != uid {
		return fmt.Errorf("server: setfsuid(%d) left fsuid %d: %w", uid, cur, unix.EPERM)
	}
	return nil
}

func setfsgid(gid int) error {
	unix.SetfsgidRetGid(gid)
	if cur, _ := unix.SetfsgidRetGid(-1); cur != gid {
		return fmt.Errorf("server: setfsgid(%d) left fsgid %d: %w", gid, cur, unix.EPERM)
	}
	return nil
}

// checkSwitching proves that this process may switch credentials: New fails
// early instead of every call failing later.
func (id *identity) checkSwitching() error {
	probe := cred{uid: nobody, gid: nobody, groups: []int{nobody}}
	return id.runAs(probe, func() error {
		groups, err := unix.Getgroups()
		if err != nil {
			return fmt.Errorf("server: getgroups: %w", err)
		}
		if !slices.Equal(groups, probe.groups) {
			return fmt.Errorf("server: setgroups did not apply to the thread")
		}
		return nil
	})
}
