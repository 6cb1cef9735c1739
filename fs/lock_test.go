package fs

import (
	"syscall"
	"testing"

	"github.com/hanwen/go-fuse/v2/fuse"

	"github.com/rdmafs/rdmafs/fs/lockd"
)

// setlkRecorder is a raw file system that records the SETLK requests it
// gets.
type setlkRecorder struct {
	fuse.RawFileSystem
	got []fuse.LkIn
}

func (r *setlkRecorder) SetLk(_ <-chan struct{}, in *fuse.LkIn) fuse.Status {
	r.got = append(r.got, *in)
	return fuse.OK
}

func (r *setlkRecorder) SetLkw(_ <-chan struct{}, in *fuse.LkIn) fuse.Status {
	r.got = append(r.got, *in)
	return fuse.OK
}

// TestLocksReleasedOnCloseAndRelease: the kernel does not release a FUSE
// file system's locks itself. A FLUSH (close(2)) releases its process's
// locks on the file, and the RELEASE of an open file (its last close)
// those taken through it, OFD and flock locks, each as an unlock of the
// whole file for its owner; without NLM nothing is sent.
func TestLocksReleasedOnCloseAndRelease(t *testing.T) {
	unlocks := func(r *setlkRecorder) map[uint64]bool {
		owners := make(map[uint64]bool)
		for _, in := range r.got {
			if in.Lk.Typ == syscall.F_UNLCK {
				if in.Lk.Start != 0 || in.Lk.End != lockd.MaxOffset {
					t.Errorf("unlock of owner %d covers %d-%d, want the whole file", in.Owner, in.Lk.Start, in.Lk.End)
				}
				owners[in.Owner] = true
			}
		}
		return owners
	}

	r := &setlkRecorder{RawFileSystem: fuse.NewDefaultRawFileSystem()}
	c := &countingFS{RawFileSystem: r, ev: &ioEvents{}, locking: true}
	c.SetLkw(nil, &fuse.LkIn{Fh: 5, Owner: 77, Lk: fuse.FileLock{Typ: syscall.F_WRLCK, End: lockd.MaxOffset}})
	c.SetLk(nil, &fuse.LkIn{Fh: 5, Owner: 78, LkFlags: fuse.LK_FLOCK, Lk: fuse.FileLock{Typ: syscall.F_RDLCK, End: lockd.MaxOffset}})
	c.SetLk(nil, &fuse.LkIn{Fh: 6, Owner: 79, Lk: fuse.FileLock{Typ: syscall.F_WRLCK, End: 10}})
	r.got = nil

	c.Flush(nil, &fuse.FlushIn{Fh: 5, LockOwner: 9})
	if got := unlocks(r); len(got) != 1 || !got[9] {
		t.Errorf("FLUSH with lock owner 9 unlocked owners %v, want 9", got)
	}
	r.got = nil
	c.Release(nil, &fuse.ReleaseIn{Fh: 5})
	if got := unlocks(r); len(got) != 2 || !got[77] || !got[78] {
		t.Errorf("RELEASE of open file 5 unlocked owners %v, want 77 and 78 (not 79, of open file 6)", got)
	}
	r.got = nil
	c.Release(nil, &fuse.ReleaseIn{Fh: 5})
	if got := unlocks(r); len(got) != 0 {
		t.Errorf("a second RELEASE of open file 5 unlocked owners %v, want none", got)
	}

	local := &setlkRecorder{RawFileSystem: fuse.NewDefaultRawFileSystem()}
	c = &countingFS{RawFileSystem: local, ev: &ioEvents{}}
	c.Flush(nil, &fuse.FlushIn{Fh: 5, LockOwner: 9})
	c.Release(nil, &fuse.ReleaseIn{Fh: 5})
	if len(local.got) != 0 {
		t.Errorf("without NLM, FLUSH and RELEASE sent %d lock requests, want none", len(local.got))
	}
}
