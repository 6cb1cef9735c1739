package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/rdmafs/rdmafs/fs/lockd"
	"github.com/rdmafs/rdmafs/mountopts"
	"github.com/rdmafs/rdmafs/nfs3"
	"github.com/rdmafs/rdmafs/nfs3/nlm"
	"github.com/rdmafs/rdmafs/sunrpc"
)

// startLocks sets up the locks of a mount (nfs(5) lock, nolock and
// local_lock): with lock, the server's lock manager through its
// portmapper, and the callback service. It returns nil when locks stay
// local.
//
// The kernel's mount.nfs does not ask the server for its lock manager: a
// lock mount of a server without one mounts, and every lock then fails
// with ENOLCK. rdmafs asks at mount time. Given lock explicitly, the mount
// fails if the server has none, with a message naming nolock. By default
// (neither lock nor nolock) such a mount keeps its locks local, as with
// nolock, and says so once in the log: a mount that worked before rdmafs
// had NLM keeps working. With mountport= (a server without a portmapper)
// and neither word, it does not ask.
func startLocks(ctx context.Context, a *mountArgs, logf func(string, ...any)) (*lockd.Client, error) {
	o := &a.opts
	if o.Lock == mountopts.ChoiceOff || o.LocalLock == mountopts.LocalLockAll {
		o.Lock = mountopts.ChoiceOff
		return nil, nil
	}
	if o.Lock == mountopts.ChoiceAuto && o.MountPort != 0 {
		// mountport= says the server has no portmapper to find a lock
		// manager through: do not wait on it.
		logf("mountport=%d without lock: locks stay local to this client, as with nolock", o.MountPort)
		o.Lock = mountopts.ChoiceOff
		return nil, nil
	}
	machine, _ := os.Hostname()
	auth := sunrpc.Auth{Flavor: sunrpc.AuthSys, Machine: machine}
	dial := nfs3.DialConfig{
		Host: a.host, Auth: auth,
		ReservedPort: !o.NoResvPort && os.Geteuid() == 0,
		Timeout:      min(time.Duration(o.Timeo)*time.Second/10, mountTimeout),
	}
	c, err := lockd.Dial(ctx, lockd.Config{Dial: dial, CallerName: machine, StateDir: lockStateDir(), Logf: logf})
	if err != nil {
		if o.Lock == mountopts.ChoiceOn {
			if errors.Is(err, lockd.ErrNoNLM) {
				return nil, fmt.Errorf("%w: mount with nolock to keep locks local to this client", err)
			}
			return nil, fmt.Errorf("lock: %w (mount with nolock to keep locks local to this client)", err)
		}
		logf("%v: locks stay local to this client, as with nolock", err)
		o.Lock = mountopts.ChoiceOff
		return nil, nil
	}
	o.Lock = mountopts.ChoiceOn
	// Before the callback service: a dead rdmafs's registration with
	// this host's portmapper goes with its locks.
	if n, err := c.RecoverStale(ctx); err != nil {
		logf("lockd: dropping the locks of an rdmafs that died: %v", err)
	} else if n > 0 {
		logf("lockd: dropped %d locks on %s of an rdmafs that died holding them", n, a.host)
	}
	c.ServeCallbacks(ctx)
	c.WatchServer(serverState(dial, a.host))
	return c, nil
}

// serverState returns the function that asks the server's statd for its
// state number. statd's port changes when the server restarts, so a failed
// call finds it again through the portmapper at the next one.
func serverState(dial nfs3.DialConfig, host string) func(context.Context) (int32, error) {
	var nsm *nlm.NSMClient
	return func(ctx context.Context) (int32, error) {
		if nsm == nil {
			var err error
			if nsm, err = nlm.DialNSM(ctx, dial); err != nil {
				return 0, err
			}
		}
		st, err := nsm.Stat(ctx, host)
		if errors.Is(err, nlm.ErrSMFail) {
			// Linux's statd answers with its state even when it
			// cannot resolve the name asked about.
			return st, nil
		}
		if err != nil {
			nsm.Close()
			nsm = nil
		}
		return st, err
	}
}

// lockStateDir is where the lock journals are (lockd's journal.go):
// /var/lib/rdmafs/nlm for root, $XDG_STATE_HOME/rdmafs/nlm (or
// ~/.local/state/rdmafs/nlm) for other users; "" if there is none.
func lockStateDir() string {
	if os.Geteuid() == 0 {
		return "/var/lib/rdmafs/nlm"
	}
	if d := os.Getenv("XDG_STATE_HOME"); d != "" {
		return filepath.Join(d, "rdmafs", "nlm")
	}
	if h, err := os.UserHomeDir(); err == nil {
		return filepath.Join(h, ".local", "state", "rdmafs", "nlm")
	}
	return ""
}
