package difftest

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// sillyName matches the names NFS clients give files unlinked while open.
var sillyName = regexp.MustCompile(`^\.nfs[0-9a-f]{24}$`)

// User is one identity of a run.
type User struct {
	Name     string
	UID, GID uint32
	Groups   []uint32
}

// Root and two unprivileged users who share a group (staff, 3000).
var (
	Root  = User{Name: "root"}
	Alice = User{Name: "alice", UID: 2001, GID: 2001, Groups: []uint32{2001, 3000}}
	Bob   = User{Name: "bob", UID: 2002, GID: 2002, Groups: []uint32{2002, 3000}}
	Users = []User{Root, Alice, Bob}
)

// worker makes one user's calls on an OS thread that holds the user's
// credentials for the rest of its life: raw setgroups, setresgid and
// setresuid change only the calling thread, and a thread that dropped root
// cannot take it back, so the thread is never given back to the runtime.
type worker struct {
	user User
	jobs chan func()
}

func startWorker(u User) (*worker, error) {
	w := &worker{user: u, jobs: make(chan func())}
	started := make(chan error, 1)
	go func() {
		runtime.LockOSThread() // for good: the thread ends with the goroutine
		if err := become(u); err != nil {
			started <- err
			return
		}
		started <- nil
		for job := range w.jobs {
			job()
		}
	}()
	if err := <-started; err != nil {
		return nil, fmt.Errorf("difftest: becoming %s: %w", u.Name, err)
	}
	return w, nil
}

func become(u User) error {
	if u.UID == 0 {
		return nil
	}
	groups := make([]int, len(u.Groups))
	for i, g := range u.Groups {
		groups[i] = int(g)
	}
	if err := unix.Setgroups(groups); err != nil {
		return err
	}
	if _, _, en := unix.RawSyscall(unix.SYS_SETRESGID, uintptr(u.GID), uintptr(u.GID), uintptr(u.GID)); en != 0 {
		return en
	}
	if _, _, en := unix.RawSyscall(unix.SYS_SETRESUID, uintptr(u.UID), uintptr(u.UID), uintptr(u.UID)); en != 0 {
		return en
	}
	return nil
}

func (w *worker) do(fn func()) {
	done := make(chan struct{})
	w.jobs <- func() { fn(); close(done) }
	<-done
}

// Run is one run of scripts in one directory.
type Run struct {
	dir     string
	workers map[string]*worker
	fds     map[string]int
	// hidden holds the files the run unlinked (or renamed over) while
	// they were open, by inode: the directory of the hidden name an NFS
	// client gives each until its last close.
	hidden map[uint64]string
	start  time.Time
	last   map[statKey]Attr // the previous stat of each file
}

// NewRun prepares runs in dir, which must exist and be writable by every
// user.
func NewRun(dir string, users []User) (*Run, error) {
	r := &Run{dir: dir, workers: make(map[string]*worker), fds: make(map[string]int), start: time.Now(), last: make(map[statKey]Attr), hidden: make(map[uint64]string)}
	for _, u := range users {
		w, err := startWorker(u)
		if err != nil {
			r.Close()
			return nil, err
		}
		r.workers[u.Name] = w
	}
	return r, nil
}

// Close closes the descriptors the scripts left open and ends the users'
// threads.
func (r *Run) Close() {
	for name, fd := range r.fds {
		unix.Close(fd)
		delete(r.fds, name)
	}
	for _, w := range r.workers {
		close(w.jobs)
	}
	r.workers = nil
}

// Script runs ops in order and returns their results.
func (r *Run) Script(ops []Op) []Result {
	res := make([]Result, len(ops))
	for i, op := range ops {
		if op.mutates() {
			// The servers' clocks tick every few milliseconds: a change
			// must land in a later tick than the previous one for the
			// times to show it.
			time.Sleep(12 * time.Millisecond)
		}
		res[i] = r.Do(op)
	}
	return res
}

// Do makes one call.
func (r *Run) Do(op Op) Result {
	w := r.workers[op.User]
	if w == nil {
		return Result{Errno: "no user " + op.User}
	}
	var res Result
	w.do(func() {
		unwritable := r.changesUnwritableDir(op)
		unreadable := (op.Call == Pread || op.Call == Pwrite) && r.readDenied(op)
		res = r.call(op)
		switch {
		case unwritable && res.Errno != "" && res.Event == "":
			res.Event = FailedInUnwritableDir
		case unreadable && op.Call == Pread:
			res.Event = ReadWithoutRead
		case unreadable:
			res.Event = WriteWithoutRead
		}
	})
	if res.Stat != nil {
		name := op.Path
		if op.Call == Fstat {
			name = "descriptor " + op.FD
		}
		r.note(statKey{name, res.Stat.Ino}, res.Stat)
	}
	return res
}

// statKey names a file whose stats a run compares with each other: the
// name it was reached by and its inode number. Inode numbers alone are
// not enough: a file system gives a deleted file's number to a new one at
// times of its choosing, which differ between two runs.
type statKey struct {
	name string
	ino  uint64
}

// note works out which times of a stat moved since the file's last stat in
// the run, and which were set far from the run's time.
func (r *Run) note(key statKey, a *Attr) {
	prev, seen := r.last[key]
	a.Changed = "-"
	if seen {
		var c string
		if a.Mtime != prev.Mtime {
			c += "m"
		}
		if a.Ctime != prev.Ctime {
			c += "c"
		}
		if c != "" {
			a.Changed = c
		}
	}
	r.last[key] = *a
	far := func(t Time) bool {
		d := time.Unix(t.Sec, t.Nsec).Sub(r.start)
		return d < -24*time.Hour || d > 24*time.Hour
	}
	var set []string
	if far(a.Atime) {
		set = append(set, fmt.Sprintf("atime %d.%09d", a.Atime.Sec, a.Atime.Nsec))
	}
	if far(a.Mtime) {
		set = append(set, fmt.Sprintf("mtime %d.%09d", a.Mtime.Sec, a.Mtime.Nsec))
	}
	a.Set = strings.Join(set, " ")
}

func (r *Run) path(p string) string { return filepath.Join(r.dir, p) }

// The permission bits of the owner class that modeDenies checks, shifted
// to the caller's class.
const (
	searchBit = 0o100
	writeBit  = 0o200
	readBit   = 0o400
)

// modeDenies reports whether the mode bits of st deny u the permission
// bit, in u's class: owner, group or other.
func modeDenies(st *unix.Stat_t, u User, bit uint32) bool {
	switch {
	case st.Uid == u.UID:
		return st.Mode&bit == 0
	case st.Gid == u.GID || slices.Contains(u.Groups, st.Gid):
		return st.Mode&(bit>>3) == 0
	}
	return st.Mode&(bit>>6) == 0
}

// dirDenies reports whether path is a directory whose mode bits deny user
// the permission bit (searchBit or writeBit), which root always has.
func (r *Run) dirDenies(user string, path string, bit uint32) bool {
	w := r.workers[user]
	var st unix.Stat_t
	if w == nil || w.user.UID == 0 || unix.Lstat(path, &st) != nil || st.Mode&unix.S_IFMT != unix.S_IFDIR {
		return false
	}
	return modeDenies(&st, w.user, bit)
}

// readDenied reports whether op's descriptor is open for reading, of a
// file whose mode bits deny op's user, who does not own it, read
// permission (the owner may read whatever the mode, on knfsd as on rdmafs
// serve).
func (r *Run) readDenied(op Op) bool {
	w := r.workers[op.User]
	fd, ok := r.fds[op.FD]
	if w == nil || !ok || w.user.UID == 0 {
		return false
	}
	flags, err := unix.FcntlInt(uintptr(fd), unix.F_GETFL, 0)
	var st unix.Stat_t
	if err != nil || flags&unix.O_ACCMODE == unix.O_WRONLY || unix.Fstat(fd, &st) != nil || st.Uid == w.user.UID {
		return false
	}
	return modeDenies(&st, w.user, readBit)
}

// changesUnwritableDir reports whether op adds or removes a name in a
// directory whose mode bits deny op's user write permission.
func (r *Run) changesUnwritableDir(op Op) bool {
	var dirs []string
	switch op.Call {
	case Unlink, Rmdir, Mkdir, Mkfifo, Symlink:
		dirs = []string{op.Path}
	case Link:
		dirs = []string{op.Path2}
	case Rename:
		dirs = []string{op.Path, op.Path2}
	}
	for _, d := range dirs {
		if r.dirDenies(op.User, r.path(filepath.Dir(d)), writeBit) {
			return true
		}
	}
	return false
}

// openFile returns the inode number and link count of the regular file
// path names if one of the run's descriptors has it open; ino is 0 if not.
func (r *Run) openFile(path string) (ino, links uint64) {
	var st unix.Stat_t
	if unix.Lstat(path, &st) != nil || st.Mode&unix.S_IFMT != unix.S_IFREG || !r.fdOpen(st.Ino) {
		return 0, 0
	}
	return st.Ino, st.Nlink
}

// fdOpen reports whether one of the run's descriptors has inode ino open.
func (r *Run) fdOpen(ino uint64) bool {
	for _, fd := range r.fds {
		var st unix.Stat_t
		if unix.Fstat(fd, &st) == nil && st.Ino == ino {
			return true
		}
	}
	return false
}

// removedName records what an unlink or rename that removed path, a name
// of open file ino (0: none) with links names, did if it succeeded: the
// file keeps a hidden name until its last close (closeFD), and when it had
// other names the result carries UnlinkedOpenLink.
func (r *Run) removedName(res Result, path string, ino, links uint64) Result {
	if res.Errno != "" || ino == 0 {
		return res
	}
	r.hidden[ino] = filepath.Dir(path)
	if links > 1 {
		res.Event = UnlinkedOpenLink
	}
	return res
}

// hiddenNameWait bounds how long a run waits for the hidden name of a file
// unlinked while open to go after its last close.
const hiddenNameWait = 2 * time.Second

// closeFD closes fd. When it was the last of the run's descriptors of a
// file unlinked while open, it then waits, at most hiddenNameWait, until
// the hidden name an NFS client gave the file is gone: rdmafs removes it
// when FUSE's RELEASE comes, after close(2) has returned (a known
// difference, test/e2e/README.md), the kernel client with an RPC of its
// own; the run compares what follows once it has happened.
func (r *Run) closeFD(fd int) error {
	var st unix.Stat_t
	ino := uint64(0)
	if unix.Fstat(fd, &st) == nil {
		ino = st.Ino
	}
	err := unix.Close(fd)
	dir, ok := r.hidden[ino]
	if !ok || r.fdOpen(ino) {
		return err
	}
	delete(r.hidden, ino)
	for deadline := time.Now().Add(hiddenNameWait); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		if !hiddenNameOf(dir, ino) {
			break
		}
	}
	return err
}

// hiddenNameOf reports whether dir holds a hidden name of inode ino.
func hiddenNameOf(dir string, ino uint64) bool {
	names, err := os.ReadDir(dir)
	if err != nil {
		return false
	}
	for _, e := range names {
		var st unix.Stat_t
		if sillyName.MatchString(e.Name()) && unix.Lstat(filepath.Join(dir, e.Name()), &st) == nil && st.Ino == ino {
			return true
		}
	}
	return false
}

// call makes op on the calling thread.
func (r *Run) call(op Op) Result {
	p, p2 := r.path(op.Path), r.path(op.Path2)
	switch op.Call {
	case Open:
		fd, err := unix.Open(p, op.Flags|unix.O_CLOEXEC, op.Mode)
		if err == nil {
			if old, ok := r.fds[op.FD]; ok {
				delete(r.fds, op.FD)
				r.closeFD(old)
			}
			r.fds[op.FD] = fd
		}
		return result(0, err)
	case Close:
		fd, ok := r.fds[op.FD]
		if !ok {
			return Result{Errno: "EBADF"}
		}
		delete(r.fds, op.FD)
		return result(0, r.closeFD(fd))
	case Pwrite:
		fd, ok := r.fds[op.FD]
		if !ok {
			return Result{Errno: "EBADF"}
		}
		n, err := unix.Pwrite(fd, Bytes(op.Seed, int(op.Len)), op.Off)
		return result(int64(n), err)
	case Pread:
		fd, ok := r.fds[op.FD]
		if !ok {
			return Result{Errno: "EBADF"}
		}
		buf := make([]byte, op.Len)
		n, err := unix.Pread(fd, buf, op.Off)
		res := result(int64(n), err)
		if err == nil {
			res.Data = digest(buf[:n])
		}
		return res
	case Fsync:
		fd, ok := r.fds[op.FD]
		if !ok {
			return Result{Errno: "EBADF"}
		}
		return result(0, unix.Fsync(fd))
	case Ftruncate:
		fd, ok := r.fds[op.FD]
		if !ok {
			return Result{Errno: "EBADF"}
		}
		return result(0, unix.Ftruncate(fd, op.Len))
	case Fstat:
		fd, ok := r.fds[op.FD]
		if !ok {
			return Result{Errno: "EBADF"}
		}
		var st unix.Stat_t
		return statResult(&st, unix.Fstat(fd, &st))
	case Truncate:
		return result(0, unix.Truncate(p, op.Len))
	case Stat:
		var st unix.Stat_t
		return statResult(&st, unix.Stat(p, &st))
	case Lstat:
		var st unix.Stat_t
		return statResult(&st, unix.Lstat(p, &st))
	case Chmod:
		return result(0, unix.Chmod(p, op.Mode))
	case Chown:
		return result(0, unix.Lchown(p, op.UID, op.GID))
	case Utimes:
		if op.Now {
			return result(0, unix.UtimesNanoAt(unix.AT_FDCWD, p, nil, 0))
		}
		ts := []unix.Timespec{{Sec: op.Atime}, {Sec: op.Mtime}}
		return result(0, unix.UtimesNanoAt(unix.AT_FDCWD, p, ts, 0))
	case Unlink:
		ino, links := r.openFile(p)
		return r.removedName(result(0, unix.Unlink(p)), p, ino, links)
	case Rmdir:
		return result(0, unix.Rmdir(p))
	case Mkdir:
		return result(0, unix.Mkdir(p, op.Mode))
	case Mkfifo:
		return result(0, unix.Mknod(p, unix.S_IFIFO|op.Mode, 0))
	case Rename:
		ino, links := r.openFile(p2)
		return r.removedName(result(0, unix.Rename(p, p2)), p2, ino, links)
	case Link:
		return result(0, unix.Link(p, p2))
	case Symlink:
		return result(0, unix.Symlink(op.Path2, p))
	case Readlink:
		buf := make([]byte, 4096)
		n, err := unix.Readlink(p, buf)
		res := result(0, err)
		if err == nil {
			res.Data = string(buf[:n])
		}
		return res
	case Access:
		res := result(0, unix.Faccessat2(unix.AT_FDCWD, p, uint32(op.Flags), unix.AT_EACCESS))
		if op.Flags&unix.W_OK != 0 && r.dirDenies(op.User, p, searchBit) {
			res.Event = WriteToUnsearchableDir
		}
		return res
	case Readdir:
		f, err := os.Open(p)
		if err != nil {
			return result(0, err)
		}
		defer f.Close()
		names, err := f.Readdirnames(-1)
		for i, name := range names {
			if sillyName.MatchString(name) {
				// The hidden name of a file unlinked while open: the
				// kernel client and rdmafs both make it from the
				// file's id, which differs between runs.
				names[i] = ".nfs*"
			}
		}
		slices.Sort(names)
		res := result(int64(len(names)), err)
		res.Data = strings.Join(names, ",")
		return res
	case ReadFile:
		data, err := os.ReadFile(p)
		res := result(int64(len(data)), err)
		if err == nil {
			res.Data = digest(data)
		}
		return res
	case SetACL:
		return setACL(p, op)
	case GetACL:
		return getACL(p, op)
	case Chdir:
		// The thread's working directory is the process's: open the
		// directory instead, which walks the path as chdir does.
		fd, err := unix.Open(p, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
		if err == nil {
			unix.Close(fd)
		}
		return result(0, err)
	}
	return Result{Errno: "unknown call " + string(op.Call)}
}

func result(ret int64, err error) Result {
	if err == nil {
		return Result{Ret: ret}
	}
	var en syscall.Errno
	if errors.As(err, &en) {
		return Result{Errno: errnoName(en)}
	}
	return Result{Errno: err.Error()}
}

func statResult(st *unix.Stat_t, err error) Result {
	if err != nil {
		return result(0, err)
	}
	return Result{Stat: &Attr{
		Mode: st.Mode, UID: st.Uid, GID: st.Gid, Nlink: st.Nlink, Size: st.Size, Ino: st.Ino,
		Atime: Time{st.Atim.Sec, st.Atim.Nsec},
		Mtime: Time{st.Mtim.Sec, st.Mtim.Nsec},
		Ctime: Time{st.Ctim.Sec, st.Ctim.Nsec},
	}}
}

func errnoName(en syscall.Errno) string {
	if name := unix.ErrnoName(en); name != "" {
		return name
	}
	return fmt.Sprintf("errno %d", int(en))
}

func digest(b []byte) string {
	sum := sha256.Sum256(b)
	return fmt.Sprintf("%d:%s", len(b), hex.EncodeToString(sum[:6]))
}

// Bytes returns n pseudo-random bytes of seed: what a Pwrite writes.
func Bytes(seed uint64, n int) []byte {
	rng := rand.New(rand.NewPCG(seed, seed^0x5bd1e995))
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(rng.Uint32())
	}
	return b
}
