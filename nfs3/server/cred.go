package server

import (
	"errors"
	"fmt"
	"runtime"
	"slices"
	"sync"

	"golang.org/x/sys/unix"
)

// cred is the identity a call is served as: its AUTH_SYS uid, gid and
// supplementary groups, or nobody for AUTH_NONE.
type cred struct {
	uid, gid uint32
	groups   []int
}

// identity is the server's own filesystem identity and the threads that
// serve calls as someone else.
type identity struct {
	uid, gid int
	groups   []int

	startThreads sync.Once
	jobs         chan credJob // calls for the credential threads
}

func currentIdentity() (*identity, error) {
	groups, err := unix.Getgroups()
	if err != nil {
		return nil, fmt.Errorf("server: getgroups: %w", err)
	}
	return &identity{uid: unix.Geteuid(), gid: unix.Getegid(), groups: groups}, nil
}

// credThreads is the number of OS threads that serve calls with a caller's
// credentials; calls beyond it wait for one to come free.
const credThreads = 16

// runAs runs fn on an OS thread whose filesystem credentials are c's, so the
// kernel checks permissions for the caller and gives new files the caller's
// ownership, as knfsd does.
//
// Linux keeps credentials per thread. setfsuid, setfsgid and setgroups as raw
// system calls (x/sys/unix's, unlike the standard library's Setgroups, which
// applies to every thread of the process) change only the calling thread.
// Switching back does not make the thread as it was: the kernel gives it a
// new credential object, and the RDMA character devices (rdma_cm, uverbs)
// refuse writes from a thread whose credentials are not the ones that opened
// the file ("changed security contexts after opening file descriptor"). So
// calls are served on a pool of goroutines locked for life to their own
// threads, and no other goroutine ever runs on a thread that switched.
//
// A non-zero fsuid drops the filesystem capabilities (CAP_DAC_OVERRIDE,
// CAP_CHOWN, CAP_FOWNER, CAP_FSETID, ...) from the thread; uid 0 keeps them,
// as knfsd keeps them for root. c is the identity after the export's
// squashing (see Export.squash).
func (id *identity) runAs(c cred, fn func() error) error {
	if id.is(c) {
		// The caller is the server's own identity (root, mostly): no
		// switch needed, and none of its dozen system calls.
		return fn()
	}
	id.startThreads.Do(func() {
		id.jobs = make(chan credJob)
		for range credThreads {
			go id.credThread()
		}
	})
	job := credJob{cred: c, fn: fn, done: make(chan error, 1)}
	id.jobs <- job
	return <-job.done
}

// credJob is one call for a credential thread.
type credJob struct {
	cred cred
	fn   func() error
	done chan error
}

// credThread serves jobs on its own OS thread, which it never gives back to
// the scheduler. It stops only if the thread cannot take a caller's
// credentials; the runtime then ends the thread with it.
func (id *identity) credThread() {
	runtime.LockOSThread()
	for job := range id.jobs {
		if err := id.enter(job.cred); err != nil {
			job.done <- err
			// Leave the thread in whatever state it is in and let the
			// runtime end it; another takes its place.
			go id.credThread()
			return
		}
		err := job.fn()
		job.done <- err
		if errors.Is(err, errThreadCaps) {
			// The thread holds a capability it should not: retire it.
			go id.credThread()
			return
		}
	}
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

// errThreadCaps reports that a credential thread could not give up a
// capability it raised for one operation; the thread serves no more calls.
var errThreadCaps = errors.New("server: cannot drop CAP_FSETID from a credential thread")

// withFSetID runs fn, inside runAs for c, with CAP_FSETID in the thread's
// effective set, so that fn's truncate keeps the file's setuid and setgid
// bits. knfsd sets a size with notify_change and no ATTR_KILL_SUID, so a
// client's truncate keeps them; ftruncate(2) by a thread without CAP_FSETID
// (any switched thread: a non-zero fsuid drops it) clears them. A server
// that lacks the capability itself runs fn as it is.
func (id *identity) withFSetID(c cred, fn func() error) error {
	if id.is(c) {
		return fn() // not switched: the server's own capabilities
	}
	hdr := unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3} // Pid 0: this thread
	var caps [2]unix.CapUserData
	if err := unix.Capget(&hdr, &caps[0]); err != nil {
		return fmt.Errorf("server: capget: %w", err)
	}
	const bit = 1 << unix.CAP_FSETID
	if caps[0].Permitted&bit == 0 || caps[0].Effective&bit != 0 {
		return fn()
	}
	caps[0].Effective |= bit
	if err := unix.Capset(&hdr, &caps[0]); err != nil {
		return fmt.Errorf("server: capset: %w", err)
	}
	err := fn()
	caps[0].Effective &^= bit
	if cerr := unix.Capset(&hdr, &caps[0]); cerr != nil {
		return fmt.Errorf("%w: %w", errThreadCaps, cerr)
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
