// Package exerciser runs random file operations through one or two mounts
// of one export and checks every answer against an in-memory model of the
// files' contents.
//
// The operations are the ones ordinary programs use on regular files:
// pwrite (with holes and extensions), pread through the descriptor that
// wrote and through a second one, ftruncate up and down, open with O_TRUNC,
// mmap reads and writes, copy_file_range, fsync, close and reopen, fstat.
// With two mounts, the files are closed on one and opened on the other
// (close-to-open consistency is the only promise NFS makes between
// clients). Every read must return exactly the model's bytes, zeros for
// holes, and never come back short below the end of the file.
//
// A run is a pure function of its seed: a failure names the seed, the
// operation and the bytes that differ, and Run with the same Config replays
// it.
package exerciser

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime/debug"
	"strings"

	"golang.org/x/sys/unix"
)

// Config is one run.
type Config struct {
	// Mounts are one or two mount points of the same export.
	Mounts []string
	// Dir is the directory, relative to each mount point, that the run
	// creates and works in; it is removed after a successful run.
	Dir string
	// Seed decides every operation and every byte written.
	Seed uint64
	// Ops is the number of operations.
	Ops int
	// Files is how many files the run works on (default 3).
	Files int
	// MaxSize bounds the files' sizes (default 4 MiB).
	MaxSize int64
	// Logf, if set, receives a line per operation.
	Logf func(format string, args ...any)
}

// file is one file of the run: its model and its open descriptors on the
// current mount.
type file struct {
	name  string
	model []byte
	fds   []*os.File // [0] read-write, more may be read-only
}

type run struct {
	cfg   Config
	rng   *rand.Rand
	mount int // index of the mount the files are open on
	files []*file
	op    int
	last  []string // the most recent operations, for a failure report
}

// Run performs cfg.Ops random operations and returns the first difference
// from the model, or nil.
func Run(cfg Config) (err error) {
	if len(cfg.Mounts) == 0 || len(cfg.Mounts) > 2 {
		return fmt.Errorf("exerciser: %d mounts; want 1 or 2", len(cfg.Mounts))
	}
	if cfg.Files <= 0 {
		cfg.Files = 3
	}
	if cfg.MaxSize <= 0 {
		cfg.MaxSize = 4 << 20
	}
	r := &run{cfg: cfg, rng: rand.New(rand.NewPCG(cfg.Seed, 0x9e3779b97f4a7c15))}
	dir := filepath.Join(cfg.Mounts[0], cfg.Dir)
	if err := os.Mkdir(dir, 0o755); err != nil {
		return fmt.Errorf("exerciser: %w", err)
	}
	for i := range cfg.Files {
		f := &file{name: fmt.Sprintf("f%d", i)}
		r.files = append(r.files, f)
		fd, err := os.OpenFile(r.path(f), os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o644)
		if err != nil {
			return fmt.Errorf("exerciser: %w", err)
		}
		f.fds = []*os.File{fd}
	}
	defer func() {
		r.closeAll()
		if err != nil {
			// The error comes last: a log cut to its end still shows it.
			err = fmt.Errorf("exerciser: last operations:\n  %s\nexerciser (seed %d, %d mounts, %d ops): operation %d: %w",
				strings.Join(r.last, "\n  "), cfg.Seed, len(cfg.Mounts), cfg.Ops, r.op, err)
		}
	}()
	for r.op = 0; r.op < cfg.Ops; r.op++ {
		if err := r.step(); err != nil {
			return err
		}
	}
	// Everything must be on the server: read each file afresh through
	// every mount.
	for m := range cfg.Mounts {
		r.closeAll()
		r.mount = m
		for _, f := range r.files {
			if err := r.verifyWhole(f, "final check"); err != nil {
				return err
			}
		}
	}
	r.closeAll()
	return os.RemoveAll(dir)
}

func (r *run) path(f *file) string {
	return filepath.Join(r.cfg.Mounts[r.mount], r.cfg.Dir, f.name)
}

func (r *run) logf(format string, args ...any) {
	line := fmt.Sprintf("%d: ", r.op) + fmt.Sprintf(format, args...)
	r.last = append(r.last, line)
	if len(r.last) > 24 {
		r.last = r.last[1:]
	}
	if r.cfg.Logf != nil {
		r.cfg.Logf("%s", line)
	}
}

func (r *run) closeAll() {
	for _, f := range r.files {
		for _, fd := range f.fds {
			fd.Close()
		}
		f.fds = nil
	}
}

// fd returns f's read-write descriptor, opening it if f is closed.
func (r *run) fd(f *file) (*os.File, error) {
	if len(f.fds) == 0 {
		fd, err := os.OpenFile(r.path(f), os.O_RDWR, 0)
		if err != nil {
			return nil, err
		}
		f.fds = []*os.File{fd}
	}
	return f.fds[0], nil
}

// offset picks an offset: often near the end of the file (appends, small
// holes), sometimes anywhere below the size bound.
func (r *run) offset(size int64) int64 {
	switch r.rng.IntN(4) {
	case 0:
		return size
	case 1:
		return min(size+r.rng.Int64N(256<<10), r.cfg.MaxSize-1)
	case 2:
		if size > 0 {
			return r.rng.Int64N(size)
		}
	}
	return r.rng.Int64N(r.cfg.MaxSize)
}

// length picks an I/O length: mostly small and odd, sometimes large.
func (r *run) length() int {
	switch r.rng.IntN(8) {
	case 0:
		return 1 + r.rng.IntN(2<<20)
	case 1, 2:
		return 1 + r.rng.IntN(128<<10)
	}
	return 1 + r.rng.IntN(16<<10)
}

func (r *run) step() error {
	f := r.files[r.rng.IntN(len(r.files))]
	switch k := r.rng.IntN(100); {
	case k < 30:
		return r.pwrite(f)
	case k < 50:
		return r.pread(f, false)
	case k < 58:
		return r.pread(f, true)
	case k < 64:
		return r.truncate(f)
	case k < 68:
		return r.mmapRead(f)
	case k < 72:
		return r.mmapWrite(f)
	case k < 77:
		return r.copyRange(f, r.files[r.rng.IntN(len(r.files))])
	case k < 82:
		return r.fsync(f)
	case k < 88:
		return r.reopen(f)
	case k < 91:
		return r.openTrunc(f)
	case k < 96:
		return r.fstat(f)
	default:
		return r.switchMount()
	}
}

func (r *run) pwrite(f *file) error {
	fd, err := r.fd(f)
	if err != nil {
		return err
	}
	off := r.offset(int64(len(f.model)))
	n := int(min(int64(r.length()), r.cfg.MaxSize-off))
	data := make([]byte, n)
	for i := range data {
		data[i] = byte(r.rng.Uint32())
	}
	r.logf("pwrite %s %#x bytes at %#x (size %#x)", f.name, n, off, len(f.model))
	got, err := fd.WriteAt(data, off)
	if err != nil {
		return fmt.Errorf("pwrite %s %#x at %#x: wrote %#x: %w", f.name, n, off, got, err)
	}
	f.model = writeModel(f.model, off, data)
	return nil
}

// writeModel writes data at off into model, extending it with zeros.
func writeModel(model []byte, off int64, data []byte) []byte {
	if len(data) == 0 {
		return model
	}
	if end := off + int64(len(data)); end > int64(len(model)) {
		model = append(model, make([]byte, end-int64(len(model)))...)
	}
	copy(model[off:], data)
	return model
}

// pread reads a range through f's descriptor or, if second, through a new
// read-only descriptor of the same file.
func (r *run) pread(f *file, second bool) error {
	fd, err := r.fd(f)
	if err != nil {
		return err
	}
	if second {
		if len(f.fds) < 2 {
			ro, err := os.Open(r.path(f))
			if err != nil {
				return err
			}
			f.fds = append(f.fds, ro)
		}
		fd = f.fds[1]
	}
	size := int64(len(f.model))
	off := r.rng.Int64N(size + 1)
	if r.rng.IntN(4) == 0 {
		off = 0
	}
	n := r.length()
	r.logf("pread %s %#x bytes at %#x (size %#x, second descriptor %v)", f.name, n, off, size, second)
	buf := make([]byte, n)
	got, err := readFull(fd, buf, off)
	want := f.model[min(off, size):min(off+int64(n), size)]
	if err != nil {
		return fmt.Errorf("pread %s %#x at %#x: %w", f.name, n, off, err)
	}
	return compare(fmt.Sprintf("pread %s %#x at %#x", f.name, n, off), buf[:got], want, off)
}

// readFull reads into buf at off until buf is full or a read returns 0
// (end of file), as a program that loops on short reads does.
func readFull(fd *os.File, buf []byte, off int64) (int, error) {
	done := 0
	for done < len(buf) {
		n, err := unix.Pread(int(fd.Fd()), buf[done:], off+int64(done))
		if err != nil {
			return done, err
		}
		if n == 0 {
			break
		}
		done += n
	}
	return done, nil
}

// compare reports the first difference between what a read returned and
// the model's bytes from off.
func compare(what string, got, want []byte, off int64) error {
	if bytes.Equal(got, want) {
		return nil
	}
	for i := 0; i < min(len(got), len(want)); i++ {
		if got[i] != want[i] {
			return fmt.Errorf("%s: byte %#x is %#02x, want %#02x (%#x bytes returned, want %#x)",
				what, off+int64(i), got[i], want[i], len(got), len(want))
		}
	}
	return fmt.Errorf("%s: returned %#x bytes, want %#x (the bytes returned are right)", what, len(got), len(want))
}

func (r *run) truncate(f *file) error {
	fd, err := r.fd(f)
	if err != nil {
		return err
	}
	size := int64(len(f.model))
	var to int64
	switch r.rng.IntN(3) {
	case 0:
		to = r.rng.Int64N(size + 1) // down
	case 1:
		to = min(size+r.rng.Int64N(512<<10), r.cfg.MaxSize) // up
	}
	r.logf("ftruncate %s to %#x (size %#x)", f.name, to, size)
	if err := fd.Truncate(to); err != nil {
		return fmt.Errorf("ftruncate %s to %#x: %w", f.name, to, err)
	}
	f.model = truncateModel(f.model, to)
	return nil
}

func truncateModel(model []byte, to int64) []byte {
	if to <= int64(len(model)) {
		return model[:to:to]
	}
	return append(model, make([]byte, to-int64(len(model)))...)
}

func (r *run) openTrunc(f *file) error {
	r.logf("open %s O_TRUNC", f.name)
	fd, err := os.OpenFile(r.path(f), os.O_RDWR|os.O_TRUNC, 0)
	if err != nil {
		return fmt.Errorf("open %s O_TRUNC: %w", f.name, err)
	}
	f.fds = append(f.fds, fd)
	f.fds[0], f.fds[len(f.fds)-1] = fd, f.fds[0]
	f.model = f.model[:0:0]
	return nil
}

// withMapping maps f's first size bytes and runs fn on them, turning a
// fault (SIGBUS: the kernel thinks the file is shorter) into an error.
func (r *run) withMapping(f *file, prot int, fn func(m []byte)) (err error) {
	fd, err := r.fd(f)
	if err != nil {
		return err
	}
	size := len(f.model)
	m, err := unix.Mmap(int(fd.Fd()), 0, size, prot, unix.MAP_SHARED)
	if err != nil {
		return fmt.Errorf("mmap %s %#x bytes: %w", f.name, size, err)
	}
	defer unix.Munmap(m)
	old := debug.SetPanicOnFault(true)
	defer debug.SetPanicOnFault(old)
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("mmap of %s (%#x bytes): fault: %v (%s)", f.name, size, p, kernelView(fd))
		}
	}()
	fn(m)
	return nil
}

func (r *run) mmapRead(f *file) error {
	size := int64(len(f.model))
	if size == 0 {
		return nil
	}
	off := r.rng.Int64N(size)
	n := min(int64(r.length()), size-off)
	r.logf("mmap read %s %#x bytes at %#x (size %#x)", f.name, n, off, size)
	var got []byte
	err := r.withMapping(f, unix.PROT_READ, func(m []byte) {
		got = bytes.Clone(m[off : off+n])
	})
	if err == nil {
		err = compare(fmt.Sprintf("mmap read %s %#x at %#x", f.name, n, off), got, f.model[off:off+n], off)
	}
	if err != nil {
		// Tell a stale page cache or size from wrong data on the
		// server: read the range again with pread.
		fd, ferr := r.fd(f)
		if ferr != nil {
			return fmt.Errorf("%w; reopening for a pread: %v", err, ferr)
		}
		buf := make([]byte, n)
		k, rerr := readFull(fd, buf, off)
		pread := "right"
		if rerr != nil {
			pread = rerr.Error()
		} else if cerr := compare("pread", buf[:k], f.model[off:off+n], off); cerr != nil {
			pread = cerr.Error()
		}
		return fmt.Errorf("%w; then a pread of the range: %s; then %s", err, pread, kernelView(fd))
	}
	return nil
}

// kernelView describes the file open as fd as a stat sees it, for a
// failure report.
func kernelView(fd *os.File) string {
	var st unix.Stat_t
	if err := unix.Fstat(int(fd.Fd()), &st); err != nil {
		return fmt.Sprintf("fstat: %v", err)
	}
	return fmt.Sprintf("fstat says size %#x, mtime %d.%09d, ctime %d.%09d", st.Size, st.Mtim.Sec, st.Mtim.Nsec, st.Ctim.Sec, st.Ctim.Nsec)
}

func (r *run) mmapWrite(f *file) error {
	size := int64(len(f.model))
	if size == 0 {
		return nil
	}
	off := r.rng.Int64N(size)
	n := min(int64(r.length()), size-off)
	data := make([]byte, n)
	for i := range data {
		data[i] = byte(r.rng.Uint32())
	}
	sync := r.rng.IntN(2) == 0
	r.logf("mmap write %s %#x bytes at %#x (size %#x, msync %v)", f.name, n, off, size, sync)
	var serr error
	if err := r.withMapping(f, unix.PROT_READ|unix.PROT_WRITE, func(m []byte) {
		copy(m[off:], data)
		if sync {
			serr = unix.Msync(m, unix.MS_SYNC)
		}
	}); err != nil {
		return err
	}
	if serr != nil {
		return fmt.Errorf("msync %s: %w", f.name, serr)
	}
	copy(f.model[off:], data)
	return nil
}

// copyRange copies a range of src into dst with copy_file_range, looping
// on short copies as cp does; 0 means the end of src.
func (r *run) copyRange(dst, src *file) error {
	sfd, err := r.fd(src)
	if err != nil {
		return err
	}
	dfd, err := r.fd(dst)
	if err != nil {
		return err
	}
	srcSize := int64(len(src.model))
	offIn := r.rng.Int64N(srcSize + 1)
	n := int64(r.length())
	offOut := r.offset(int64(len(dst.model)))
	if src == dst {
		// The ranges of one file must not overlap, and the copy must not
		// read past the end: what it writes would move the end.
		n = min(n, srcSize-offIn)
		if offOut < offIn+n && offIn < offOut+n {
			return nil
		}
	}
	n = min(n, r.cfg.MaxSize-offOut)
	r.logf("copy_file_range %s %#x bytes at %#x to %s at %#x (sizes %#x, %#x)", src.name, n, offIn, dst.name, offOut, srcSize, len(dst.model))
	want := bytes.Clone(src.model[min(offIn, srcSize):min(offIn+n, srcSize)])
	copied := int64(0)
	for copied < n {
		in, out := offIn+copied, offOut+copied
		k, err := unix.CopyFileRange(int(sfd.Fd()), &in, int(dfd.Fd()), &out, int(n-copied), 0)
		if err != nil {
			return fmt.Errorf("copy_file_range %s at %#x to %s at %#x after %#x bytes: %w", src.name, offIn+copied, dst.name, offOut+copied, copied, err)
		}
		if k == 0 {
			break
		}
		copied += int64(k)
	}
	if copied != int64(len(want)) {
		return fmt.Errorf("copy_file_range %s %#x bytes at %#x (size %#x): copied %#x, want %#x",
			src.name, n, offIn, srcSize, copied, len(want))
	}
	dst.model = writeModel(dst.model, offOut, want)
	return nil
}

func (r *run) fsync(f *file) error {
	fd, err := r.fd(f)
	if err != nil {
		return err
	}
	r.logf("fsync %s", f.name)
	if err := fd.Sync(); err != nil {
		return fmt.Errorf("fsync %s: %w", f.name, err)
	}
	return nil
}

// reopen closes f's descriptors and checks the whole file through a new
// one, or only closes them.
func (r *run) reopen(f *file) error {
	r.logf("close %s and reopen", f.name)
	for _, fd := range f.fds {
		if err := fd.Close(); err != nil {
			return fmt.Errorf("close %s: %w", f.name, err)
		}
	}
	f.fds = nil
	if r.rng.IntN(2) == 0 {
		return r.verifyWhole(f, "after reopen")
	}
	return nil
}

// verifyWhole checks f's size and content through a new descriptor.
func (r *run) verifyWhole(f *file, when string) error {
	fd, err := os.Open(r.path(f))
	if err != nil {
		return fmt.Errorf("open %s %s: %w", f.name, when, err)
	}
	defer fd.Close()
	st, err := fd.Stat()
	if err != nil {
		return err
	}
	if st.Size() != int64(len(f.model)) {
		return fmt.Errorf("%s: %s is %#x bytes, want %#x", when, f.name, st.Size(), len(f.model))
	}
	buf := make([]byte, len(f.model)+1)
	n, err := readFull(fd, buf, 0)
	if err != nil {
		return fmt.Errorf("read %s %s: %w", f.name, when, err)
	}
	return compare(fmt.Sprintf("%s: read all of %s", when, f.name), buf[:n], f.model, 0)
}

func (r *run) fstat(f *file) error {
	fd, err := r.fd(f)
	if err != nil {
		return err
	}
	r.logf("fstat %s", f.name)
	var st unix.Stat_t
	if err := unix.Fstat(int(fd.Fd()), &st); err != nil {
		return fmt.Errorf("fstat %s: %w", f.name, err)
	}
	if st.Size != int64(len(f.model)) {
		return fmt.Errorf("fstat %s: size %#x, want %#x", f.name, st.Size, len(f.model))
	}
	return nil
}

// switchMount closes every file and goes on through the other mount:
// close-to-open consistency says it sees everything written so far.
func (r *run) switchMount() error {
	if len(r.cfg.Mounts) < 2 {
		return nil
	}
	for _, f := range r.files {
		for _, fd := range f.fds {
			if err := fd.Close(); err != nil {
				return fmt.Errorf("close %s before switching mounts: %w", f.name, err)
			}
		}
		f.fds = nil
	}
	r.mount = 1 - r.mount
	r.logf("switch to mount %d", r.mount)
	return nil
}
