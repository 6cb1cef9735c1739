package fs

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/rdmafs/rdmafs/nfs3"
)

// A hard mount whose server is gone must still let umount(8) unmount it.
// Before umount2(2), umount (libmount) stats the mount point and statfs()es
// it: the root's GETATTR and a STATFS, which would wait for the dead server
// for ever. So while the server is silent (it has not answered for a major
// timeout: the RPC client's "not responding"), those two are answered from
// the last values seen, and that is logged. Their calls are not abandoned
// but go on in the background, at most one of each kind at a time, so that
// the server's return is noticed and fresh values replace the old ones.
// Nothing else is answered from memory: every other call waits, as a hard
// mount's must.

// silentKind names the calls that may be answered from memory.
type silentKind int

const (
	silentRootAttr silentKind = iota
	silentStatfs
	silentKinds
)

var silentKindNames = [silentKinds]string{"the root's attributes", "the statfs"}

// silenceWatch is how often a call waiting for the server looks whether the
// server has gone silent.
const silenceWatch = 100 * time.Millisecond

// errSilent is returned instead of a call's result while the server is
// silent; the caller answers from the last values seen.
var errSilent = errors.New("server not responding")

// silence holds what the fallback needs: the last statfs seen, and the
// calls left waiting in the background.
type silence struct {
	mu         sync.Mutex
	statfs     nfs3.FSStat
	statfsAt   time.Time // zero: none seen yet
	background [silentKinds]int
	logged     [silentKinds]bool // once per silent spell
}

// serverSilent reports whether the server has not answered for a major
// timeout.
func (f *FS) serverSilent() bool { return f.nfs.RPC().NotResponding() }

// unlessSilent returns call's result, unless the server is silent or
// becomes so while the call waits: then it returns errSilent, and the call
// goes on in the background until it gets its reply or the client closes.
// A program killed while it waits ends the call as usual.
func unlessSilent[T any](ctx context.Context, f *FS, kind silentKind, call func(context.Context) (T, error)) (T, error) {
	var zero T
	s := &f.silence
	s.mu.Lock()
	if s.background[kind] > 0 && f.serverSilent() {
		// One is already waiting for the server: no need for another.
		s.mu.Unlock()
		return zero, errSilent
	}
	s.background[kind]++
	s.mu.Unlock()

	type result struct {
		v   T
		err error
	}
	done := make(chan result, 1)
	cctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	go func() {
		v, err := call(cctx)
		cancel()
		s.mu.Lock()
		s.background[kind]--
		if err == nil {
			s.logged[kind] = false
		}
		s.mu.Unlock()
		done <- result{v, err}
	}()
	tick := time.NewTicker(silenceWatch)
	defer tick.Stop()
	for {
		if f.serverSilent() {
			return zero, errSilent
		}
		select {
		case r := <-done:
			return r.v, r.err
		case <-ctx.Done():
			cancel()
			return zero, ctx.Err()
		case <-tick.C:
		}
	}
}

// logSilent logs, once per silent spell, that kind is answered from memory.
func (f *FS) logSilent(kind silentKind, note string) {
	s := &f.silence
	s.mu.Lock()
	first := !s.logged[kind]
	s.logged[kind] = true
	s.mu.Unlock()
	if first {
		f.logf("server %s not responding: answering %s of %s with the last seen%s, so that umount works", f.cfg.Source, silentKindNames[kind], f.cfg.Mountpoint, note)
	}
}

// rootAttr returns the root's attributes: from the server, or the last seen
// while it is silent.
func (f *FS) rootAttr(ctx context.Context) (nfs3.Fattr, error) {
	obj := f.root.obj
	obj.mu.Lock()
	if time.Now().Before(obj.attrExpires) {
		a := obj.attr
		obj.mu.Unlock()
		return a, nil
	}
	obj.mu.Unlock()
	a, err := unlessSilent(ctx, f, silentRootAttr, func(ctx context.Context) (nfs3.Fattr, error) {
		return f.getattr(ctx, obj, false)
	})
	if errors.Is(err, errSilent) {
		f.logSilent(silentRootAttr, "")
		return obj.cachedAttr(), nil
	}
	return a, err
}

// fsstat returns the file system's statistics: from the server, or the
// last seen while it is silent (zeros if none was ever seen).
func (f *FS) fsstat(ctx context.Context, fh *nfs3.FH) (nfs3.FSStat, error) {
	cred := f.cred(ctx)
	st, err := unlessSilent(ctx, f, silentStatfs, func(ctx context.Context) (nfs3.FSStat, error) {
		st, err := f.nfs.Fsstat(ctx, cred, fh)
		if err == nil {
			f.silence.mu.Lock()
			f.silence.statfs, f.silence.statfsAt = st, time.Now()
			f.silence.mu.Unlock()
		}
		return st, err
	})
	if errors.Is(err, errSilent) {
		f.silence.mu.Lock()
		st, at := f.silence.statfs, f.silence.statfsAt
		f.silence.mu.Unlock()
		age := "none seen: zeros"
		if !at.IsZero() {
			age = time.Since(at).Round(time.Second).String() + " old"
		}
		f.logSilent(silentStatfs, " ("+age+")")
		return st, nil
	}
	return st, err
}
