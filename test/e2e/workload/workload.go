// Package workload is the file-system workload that the rdmafs tests run
// through a mount point: the e2e tests in the qemu guest (through rdmafs and
// through the kernel NFS client, against knfsd) and the host tests (against
// `rdmafs serve`) run the same operations and the same checks.
//
// Every file the workload writes is checked three ways: through the mount
// (stat and read back), and on the server side through a [Checker], which
// reads the server's copy without going through the client under test.
//
// Usage:
//
//	workload.Run(t, "/mnt/rdmafs", workload.DirChecker("/export"))
//
// Run works in a fresh directory under the mount point and removes it when
// every step passed (a failed run leaves it for inspection).
package workload

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math/rand/v2"
	"os"
	"path"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"syscall"
	"testing"
	"time"
)

// Sum is the SHA-256 digest of a file's content.
type Sum = [sha256.Size]byte

// Checker verifies a file from the server side, bypassing the client under
// test. rel is slash-separated and relative to the root of the export (which
// is the root of the mount point).
//
// A Checker returns nil if the server's copy of rel is a regular file whose
// content has SHA-256 digest want; an error wrapping [fs.ErrNotExist] if rel
// does not exist on the server (the workload uses this to check removals); and
// another error, saying what differs, in every other case.
type Checker func(rel string, want Sum) error

// DirChecker returns a Checker that reads the server's copy of a file from
// root, the exported directory as the server sees it (in the e2e guest, knfsd
// exports /export; for `rdmafs serve DIR` it is DIR).
func DirChecker(root string) Checker {
	return func(rel string, want Sum) error {
		p := filepath.Join(root, filepath.FromSlash(rel))
		f, err := os.Open(p)
		if err != nil {
			return fmt.Errorf("server copy: %w", err)
		}
		defer f.Close()
		st, err := f.Stat()
		if err != nil {
			return fmt.Errorf("server copy: %w", err)
		}
		if !st.Mode().IsRegular() {
			return fmt.Errorf("server copy %s is not a regular file (mode %v)", p, st.Mode())
		}
		h := sha256.New()
		n, err := io.Copy(h, f)
		if err != nil {
			return fmt.Errorf("server copy %s: read: %w", p, err)
		}
		var got Sum
		h.Sum(got[:0])
		if got != want {
			return fmt.Errorf("server copy %s (%d bytes) has sha256 %s, want %s", p, n, short(got), short(want))
		}
		return nil
	}
}

// FileSizes are the sizes of the files that Run writes and reads back.
var FileSizes = []int{0, 1, 511, 4095, 4096, 4097, 65535, 128<<10 + 3, 1 << 20, 8 << 20}

// ListEntries is the number of entries of the directory that Run lists.
const ListEntries = 2000

// Run runs the workload in a new directory under mnt and checks every result
// through the mount and, through check, on the server side:
//
//   - create, write and read back files of [FileSizes] bytes (0 to 8 MiB),
//     then overwrite the middle of one and append to it
//   - mkdir and rmdir, including EEXIST and ENOTEMPTY
//   - rename to a new name, over an existing file, and of a directory
//   - symlink and readlink
//   - hard link: the same inode number under both names, a link count of 2
//   - chmod of files and directories
//   - truncate (shrink, extend with zeros, ftruncate of an open file)
//   - unlink
//   - a listing of a directory of [ListEntries] entries, each name once
//   - statfs, which must account for the bytes written
//
// Failures are reported through t, naming the step, the path and what
// differs. check must not be nil.
func Run(t testing.TB, mnt string, check Checker) {
	t.Helper()
	if check == nil {
		t.Fatalf("workload.Run: nil Checker")
	}
	w := newRunner(t, mnt, check, "wl")
	start := time.Now()
	for _, s := range w.steps() {
		w.step(s.name, s.run)
	}
	t.Logf("workload: all steps done in %v", time.Since(start).Round(time.Millisecond))
}

// Steps are the names of Run's steps, in the order it runs them.
var Steps = []string{"files", "mkdir/rmdir", "rename", "symlink", "hardlink", "chmod", "truncate", "unlink", "readdir", "statfs", "cleanup"}

// steps are Run's steps, named as in Steps.
func (w *runner) steps() []struct {
	name string
	run  func()
} {
	return []struct {
		name string
		run  func()
	}{
		{"files", w.files},
		{"mkdir/rmdir", w.dirs},
		{"rename", w.rename},
		{"symlink", w.symlink},
		{"hardlink", w.hardlink},
		{"chmod", w.chmod},
		{"truncate", w.truncate},
		{"unlink", w.unlink},
		{"readdir", w.readdir},
		{"statfs", w.statfs},
		{"cleanup", w.cleanup},
	}
}

// RunWithout is Run without the steps named in skip (names of Steps), for
// a server known to lack what they check; the caller says why. "files" and
// "cleanup" cannot be skipped: the other steps work in the directory that
// "files" makes and "cleanup" removes. An unknown name fails t, so that a
// renamed step is not silently run again or skipped.
func RunWithout(t testing.TB, mnt string, check Checker, skip ...string) {
	t.Helper()
	if check == nil {
		t.Fatalf("workload.RunWithout: nil Checker")
	}
	for _, name := range skip {
		if !slices.Contains(Steps, name) || name == "files" || name == "cleanup" {
			t.Fatalf("workload.RunWithout: cannot skip step %q (steps: %v)", name, Steps)
		}
	}
	w := newRunner(t, mnt, check, "wl")
	start := time.Now()
	for _, s := range w.steps() {
		if slices.Contains(skip, s.name) {
			t.Logf("workload: %-12s skipped", s.name)
			continue
		}
		w.step(s.name, s.run)
	}
	t.Logf("workload: all steps but %v done in %v", skip, time.Since(start).Round(time.Millisecond))
}

// CrossCheck checks that two mounts of the same export see each other's
// writes with close-to-open consistency: files written and closed through
// mount a are read through mount b with the same content, and the other way
// round; a file rewritten through a after b has read it is read again
// through b with the new content. check verifies each file on the server.
func CrossCheck(t testing.TB, a, b string, check Checker) {
	t.Helper()
	if check == nil {
		t.Fatalf("workload.CrossCheck: nil Checker")
	}
	w := newRunner(t, a, check, "xc")
	wb := &runner{t: t, mnt: b, check: check, rnd: w.rnd, dir: w.dir}
	w.step("cross-check", func() {
		w.mkdir(w.dir)
		for _, size := range []int{0, 5000, 1<<20 + 1} {
			ab := fmt.Sprintf("a-to-b-%d", size)
			sum := w.writeFile(ab, w.random(size), 0o644)
			wb.expectContent(ab, sum, int64(size))

			ba := fmt.Sprintf("b-to-a-%d", size)
			sum = wb.writeFile(ba, w.random(size), 0o644)
			w.expectContent(ba, sum, int64(size))
		}
		// rewrite, same size, after the other side has read (and cached) it
		const name = "rewrite"
		w.writeFile(name, w.random(200000), 0o644)
		wb.readFile(name)
		sum := w.rewriteFile(name, w.random(200000))
		wb.expectContent(name, sum, 200000)
		w.removeAll(w.dir)
	})
}

// runner holds one run's state. Paths given to its methods are relative to
// dir, which is relative to mnt.
type runner struct {
	t     testing.TB
	mnt   string
	check Checker
	rnd   *rand.Rand
	dir   string // slash-separated, relative to mnt
	name  string // current step
}

func newRunner(t testing.TB, mnt string, check Checker, prefix string) *runner {
	st, err := os.Stat(mnt)
	if err != nil || !st.IsDir() {
		t.Fatalf("workload: mount point %s: not a directory (%v)", mnt, err)
	}
	seed := uint64(time.Now().UnixNano())
	t.Logf("workload: random seed %d", seed)
	var key [32]byte
	for i := range 4 {
		for j := range 8 {
			key[i*8+j] = byte(seed >> (8 * j))
		}
	}
	rnd := rand.New(rand.NewChaCha8(key))
	dir := fmt.Sprintf("%s-%d-%08x", prefix, os.Getpid(), rnd.Uint32())
	return &runner{t: t, mnt: mnt, check: check, rnd: rnd, dir: dir}
}

func (w *runner) step(name string, f func()) {
	w.t.Helper()
	w.name = name
	start := time.Now()
	f()
	w.t.Logf("workload: %-12s %v", name, time.Since(start).Round(time.Millisecond))
}

// rel is the path relative to the mount (and export) root; abs the path through the mount.
func (w *runner) rel(p string) string { return path.Join(w.dir, p) }
func (w *runner) abs(p string) string { return filepath.Join(w.mnt, filepath.FromSlash(w.rel(p))) }

func (w *runner) fatalf(format string, args ...any) {
	w.t.Helper()
	w.t.Fatalf("workload %s: %s", w.name, fmt.Sprintf(format, args...))
}

func (w *runner) errorf(format string, args ...any) {
	w.t.Helper()
	w.t.Errorf("workload %s: %s", w.name, fmt.Sprintf(format, args...))
}

func (w *runner) random(n int) []byte {
	b := make([]byte, n)
	for i := 0; i < n; i += 8 {
		v := w.rnd.Uint64()
		for j := 0; j < 8 && i+j < n; j++ {
			b[i+j] = byte(v >> (8 * j))
		}
	}
	return b
}

func short(s Sum) string { return hex.EncodeToString(s[:8]) }

// writeFile creates p (which must not exist), writes data in chunks of
// varying size, fsyncs and closes it, and returns its digest.
func (w *runner) writeFile(p string, data []byte, mode os.FileMode) Sum {
	w.t.Helper()
	return w.write(p, data, os.O_CREATE|os.O_EXCL, mode)
}

// rewriteFile truncates the existing file p and writes data to it, like writeFile.
func (w *runner) rewriteFile(p string, data []byte) Sum {
	w.t.Helper()
	return w.write(p, data, os.O_TRUNC, 0)
}

func (w *runner) write(p string, data []byte, flags int, mode os.FileMode) Sum {
	w.t.Helper()
	f, err := os.OpenFile(w.abs(p), os.O_WRONLY|flags, mode)
	if err != nil {
		w.fatalf("open %s for writing: %v", p, err)
	}
	chunk := 1 << (12 + w.rnd.IntN(9)) // 4 KiB .. 1 MiB
	for off := 0; off < len(data); off += chunk {
		end := min(off+chunk, len(data))
		if n, err := f.Write(data[off:end]); err != nil || n != end-off {
			f.Close()
			w.fatalf("write %s at %d (%d bytes): wrote %d: %v", p, off, end-off, n, err)
		}
	}
	if err := f.Sync(); err != nil {
		f.Close()
		w.fatalf("fsync %s: %v", p, err)
	}
	if err := f.Close(); err != nil {
		w.fatalf("close %s: %v", p, err)
	}
	return sha256.Sum256(data)
}

func (w *runner) readFile(p string) []byte {
	w.t.Helper()
	b, err := os.ReadFile(w.abs(p))
	if err != nil {
		w.fatalf("read %s: %v", p, err)
	}
	return b
}

// expectContent checks p's size and content through the mount and on the server.
func (w *runner) expectContent(p string, want Sum, size int64) {
	w.t.Helper()
	st, err := os.Stat(w.abs(p))
	if err != nil {
		w.fatalf("stat %s: %v", p, err)
	}
	if st.Size() != size {
		w.errorf("stat %s: size %d, want %d", p, st.Size(), size)
	}
	got := w.readFile(p)
	if s := sha256.Sum256(got); s != want {
		w.errorf("read back %s through the mount: %d bytes, sha256 %s, want %d bytes, sha256 %s",
			p, len(got), short(s), size, short(want))
	}
	if err := w.check(w.rel(p), want); err != nil {
		w.errorf("server side, %s: %v", p, err)
	}
}

// expectGone checks that p exists neither through the mount nor on the server.
func (w *runner) expectGone(p string) {
	w.t.Helper()
	if _, err := os.Lstat(w.abs(p)); !errors.Is(err, fs.ErrNotExist) {
		w.errorf("lstat %s after removal: got %v, want ENOENT", p, err)
	}
	if err := w.check(w.rel(p), Sum{}); !errors.Is(err, fs.ErrNotExist) {
		w.errorf("server side, %s after removal: got %v, want it not to exist", p, err)
	}
}

func (w *runner) mkdir(p string) {
	w.t.Helper()
	if err := os.Mkdir(filepath.Join(w.mnt, filepath.FromSlash(p)), 0o755); err != nil {
		w.fatalf("mkdir %s: %v", p, err)
	}
}

func (w *runner) removeAll(p string) {
	w.t.Helper()
	if err := os.RemoveAll(filepath.Join(w.mnt, filepath.FromSlash(p))); err != nil {
		w.fatalf("remove -r %s: %v", p, err)
	}
	if err := w.check(p, Sum{}); !errors.Is(err, fs.ErrNotExist) {
		w.errorf("server side, %s after remove -r: got %v, want it not to exist", p, err)
	}
}

func (w *runner) files() { w.filesOf(FileSizes) }

// filesOf writes a file of each size and checks it on the server, then
// rewrites the middle of the 1 MiB one and appends to it.
func (w *runner) filesOf(sizes []int) {
	w.mkdir(w.dir)
	for _, size := range sizes {
		p := fmt.Sprintf("file-%d", size)
		sum := w.writeFile(p, w.random(size), 0o644)
		w.expectContent(p, sum, int64(size))
	}
	// rewrite in place: overwrite the middle of the 1 MiB file, then append to it
	p := fmt.Sprintf("file-%d", 1<<20)
	data := w.readFile(p)
	f, err := os.OpenFile(w.abs(p), os.O_RDWR, 0)
	if err != nil {
		w.fatalf("open %s: %v", p, err)
	}
	patch := w.random(70001)
	if _, err := f.WriteAt(patch, 12345); err != nil {
		w.fatalf("pwrite %s: %v", p, err)
	}
	copy(data[12345:], patch)
	tail := w.random(5000)
	if _, err := f.WriteAt(tail, int64(len(data))); err != nil {
		w.fatalf("append to %s: %v", p, err)
	}
	data = append(data, tail...)
	if err := f.Close(); err != nil {
		w.fatalf("close %s: %v", p, err)
	}
	w.expectContent(p, sha256.Sum256(data), int64(len(data)))
}

func (w *runner) dirs() {
	d := "dir"
	w.mkdir(w.rel(d))
	st, err := os.Stat(w.abs(d))
	if err != nil || !st.IsDir() {
		w.fatalf("stat %s after mkdir: %v, %v", d, st, err)
	}
	if err := os.Mkdir(w.abs(d), 0o755); !errors.Is(err, fs.ErrExist) {
		w.errorf("mkdir of existing %s: got %v, want EEXIST", d, err)
	}
	w.writeFile(d+"/inside", []byte("x"), 0o644)
	if err := syscall.Rmdir(w.abs(d)); err != syscall.ENOTEMPTY && err != syscall.EEXIST {
		w.errorf("rmdir of non-empty %s: got %v, want ENOTEMPTY", d, err)
	}
	if err := os.Remove(w.abs(d + "/inside")); err != nil {
		w.fatalf("unlink %s/inside: %v", d, err)
	}
	if err := syscall.Rmdir(w.abs(d)); err != nil {
		w.fatalf("rmdir %s: %v", d, err)
	}
	w.expectGone(d)
	if err := os.MkdirAll(w.abs("a/b/c"), 0o755); err != nil {
		w.fatalf("mkdir -p a/b/c: %v", err)
	}
	sum := w.writeFile("a/b/c/deep", w.random(3000), 0o644)
	w.expectContent("a/b/c/deep", sum, 3000)
	w.removeAll(w.rel("a"))
}

func (w *runner) rename() {
	// to a new name
	sum := w.writeFile("src", w.random(10000), 0o644)
	if err := os.Rename(w.abs("src"), w.abs("dst")); err != nil {
		w.fatalf("rename src dst: %v", err)
	}
	w.expectGone("src")
	w.expectContent("dst", sum, 10000)
	// over an existing file: the target's old content is gone
	sumA := w.writeFile("over-a", w.random(7000), 0o644)
	w.writeFile("over-b", w.random(9000), 0o644)
	if err := os.Rename(w.abs("over-a"), w.abs("over-b")); err != nil {
		w.fatalf("rename over-a over-b (existing): %v", err)
	}
	w.expectGone("over-a")
	w.expectContent("over-b", sumA, 7000)
	// a directory with a file in it
	w.mkdir(w.rel("rdir"))
	sumD := w.writeFile("rdir/f", w.random(100), 0o644)
	if err := os.Rename(w.abs("rdir"), w.abs("rdir2")); err != nil {
		w.fatalf("rename rdir rdir2: %v", err)
	}
	w.expectGone("rdir")
	w.expectContent("rdir2/f", sumD, 100)
	for _, p := range []string{"dst", "over-b", "rdir2/f", "rdir2"} {
		if err := os.Remove(w.abs(p)); err != nil {
			w.fatalf("remove %s: %v", p, err)
		}
	}
}

func (w *runner) symlink() {
	targets := map[string]string{
		"link-file":     "file-4096",
		"link-dangling": strings.Repeat("no-such-dir/", 20) + "target",
	}
	for name, target := range targets {
		if err := os.Symlink(target, w.abs(name)); err != nil {
			w.fatalf("symlink %s -> %s: %v", name, target, err)
		}
		got, err := os.Readlink(w.abs(name))
		if err != nil || got != target {
			w.errorf("readlink %s: %q, %v; want %q", name, got, err, target)
		}
		st, err := os.Lstat(w.abs(name))
		if err != nil || st.Mode()&fs.ModeSymlink == 0 {
			w.errorf("lstat %s: %v, %v; want a symlink", name, st, err)
		}
	}
	st, err := os.Stat(w.abs("link-file"))
	if err != nil || st.Size() != 4096 {
		w.errorf("stat through link-file: %v, %v; want the 4096-byte target", st, err)
	}
	if _, err := os.Stat(w.abs("link-dangling")); !errors.Is(err, fs.ErrNotExist) {
		w.errorf("stat through link-dangling: %v, want ENOENT", err)
	}
	for name := range targets {
		if err := os.Remove(w.abs(name)); err != nil {
			w.fatalf("remove %s: %v", name, err)
		}
		w.expectGone(name)
	}
}

func ino(t testing.TB, st fs.FileInfo) (uint64, uint64) {
	sys, ok := st.Sys().(*syscall.Stat_t)
	if !ok {
		t.Fatalf("workload: no syscall.Stat_t for %s", st.Name())
	}
	return sys.Ino, uint64(sys.Nlink)
}

func (w *runner) hardlink() {
	data := w.random(6000)
	w.writeFile("hl-1", data, 0o644)
	if err := os.Link(w.abs("hl-1"), w.abs("hl-2")); err != nil {
		w.fatalf("link hl-1 hl-2: %v", err)
	}
	st1, err1 := os.Stat(w.abs("hl-1"))
	st2, err2 := os.Stat(w.abs("hl-2"))
	if err1 != nil || err2 != nil {
		w.fatalf("stat of the links: %v, %v", err1, err2)
	}
	i1, n1 := ino(w.t, st1)
	i2, n2 := ino(w.t, st2)
	if i1 != i2 || n1 != 2 || n2 != 2 {
		w.errorf("hard links: inode %d nlink %d and inode %d nlink %d; want one inode, nlink 2", i1, n1, i2, n2)
	}
	// a write through one name is seen through the other
	f, err := os.OpenFile(w.abs("hl-2"), os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		w.fatalf("open hl-2: %v", err)
	}
	more := w.random(3000)
	if _, err := f.Write(more); err != nil {
		w.fatalf("append to hl-2: %v", err)
	}
	if err := f.Close(); err != nil {
		w.fatalf("close hl-2: %v", err)
	}
	data = append(data, more...)
	sum := sha256.Sum256(data)
	w.expectContent("hl-1", sum, int64(len(data)))
	w.expectContent("hl-2", sum, int64(len(data)))
	if err := os.Remove(w.abs("hl-1")); err != nil {
		w.fatalf("unlink hl-1: %v", err)
	}
	w.expectGone("hl-1")
	st2, err = os.Stat(w.abs("hl-2"))
	if err != nil {
		w.fatalf("stat hl-2 after unlinking hl-1: %v", err)
	}
	if i, n := ino(w.t, st2); i != i1 || n != 1 {
		w.errorf("hl-2 after unlinking hl-1: inode %d nlink %d; want inode %d nlink 1", i, n, i1)
	}
	w.expectContent("hl-2", sum, int64(len(data)))
	if err := os.Remove(w.abs("hl-2")); err != nil {
		w.fatalf("unlink hl-2: %v", err)
	}
}

func (w *runner) chmod() {
	w.writeFile("mode", []byte("mode"), 0o644)
	for _, m := range []fs.FileMode{0o600, 0o755, 0o640, 0o444, fs.ModeSetuid | 0o755, 0o644} {
		if err := os.Chmod(w.abs("mode"), m); err != nil {
			w.fatalf("chmod %v mode: %v", m, err)
		}
		st, err := os.Stat(w.abs("mode"))
		if err != nil {
			w.fatalf("stat mode: %v", err)
		}
		if got := st.Mode() & (fs.ModePerm | fs.ModeSetuid); got != m {
			w.errorf("after chmod %v: mode %v", m, got)
		}
	}
	w.mkdir(w.rel("mdir"))
	if err := os.Chmod(w.abs("mdir"), 0o700); err != nil {
		w.fatalf("chmod 700 mdir: %v", err)
	}
	if st, err := os.Stat(w.abs("mdir")); err != nil || st.Mode().Perm() != 0o700 || !st.IsDir() {
		w.errorf("stat mdir after chmod 700: %v, %v", st, err)
	}
	for _, p := range []string{"mode", "mdir"} {
		if err := os.Remove(w.abs(p)); err != nil {
			w.fatalf("remove %s: %v", p, err)
		}
	}
}

func (w *runner) truncate() {
	data := w.random(100000)
	w.writeFile("trunc", data, 0o644)
	for _, size := range []int{1000, 70000, 0} {
		if err := os.Truncate(w.abs("trunc"), int64(size)); err != nil {
			w.fatalf("truncate trunc to %d: %v", size, err)
		}
		want := make([]byte, size)
		copy(want, data) // shrinking keeps a prefix, extending adds zeros
		w.expectContent("trunc", sha256.Sum256(want), int64(size))
		data = want
	}
	// ftruncate of an open file, then a write past the new end
	f, err := os.OpenFile(w.abs("trunc"), os.O_RDWR, 0)
	if err != nil {
		w.fatalf("open trunc: %v", err)
	}
	if err := f.Truncate(5000); err != nil {
		w.fatalf("ftruncate trunc to 5000: %v", err)
	}
	tail := w.random(100)
	if _, err := f.WriteAt(tail, 6000); err != nil {
		w.fatalf("pwrite trunc at 6000: %v", err)
	}
	if err := f.Close(); err != nil {
		w.fatalf("close trunc: %v", err)
	}
	want := make([]byte, 6100)
	copy(want[6000:], tail)
	w.expectContent("trunc", sha256.Sum256(want), 6100)
	if err := os.Remove(w.abs("trunc")); err != nil {
		w.fatalf("remove trunc: %v", err)
	}
}

func (w *runner) unlink() {
	w.writeFile("victim", w.random(33333), 0o644)
	if err := os.Remove(w.abs("victim")); err != nil {
		w.fatalf("unlink victim: %v", err)
	}
	w.expectGone("victim")
	if err := os.Remove(w.abs("victim")); !errors.Is(err, fs.ErrNotExist) {
		w.errorf("second unlink of victim: got %v, want ENOENT", err)
	}
}

func (w *runner) readdir() {
	d := "many"
	w.mkdir(w.rel(d))
	want := make(map[string]bool, ListEntries)
	for i := range ListEntries {
		name := fmt.Sprintf("entry-%04d", i)
		if i%97 == 0 { // some long names, to vary the entry sizes
			name += "-" + strings.Repeat("x", 200)
		}
		want[name] = true
		f, err := os.OpenFile(w.abs(d+"/"+name), os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
		if err != nil {
			w.fatalf("create %s/%s: %v", d, name, err)
		}
		if err := f.Close(); err != nil {
			w.fatalf("close %s/%s: %v", d, name, err)
		}
	}
	seen := w.countNames(d, ListEntries)
	var dup, extra, missing []string
	for name, n := range seen {
		if n > 1 {
			dup = append(dup, fmt.Sprintf("%s (x%d)", name, n))
		}
		if !want[name] {
			extra = append(extra, name)
		}
	}
	for name := range want {
		if seen[name] == 0 {
			missing = append(missing, name)
		}
	}
	if len(dup)+len(extra)+len(missing) > 0 {
		sort.Strings(dup)
		sort.Strings(extra)
		sort.Strings(missing)
		w.errorf("listing of %d entries: %d distinct names; duplicated %v, unexpected %v, missing %v",
			ListEntries, len(seen), clip(dup), clip(extra), clip(missing))
	}
	// the same through os.ReadDir (one call, sorted)
	ents, err := os.ReadDir(w.abs(d))
	if err != nil || len(ents) != ListEntries {
		w.errorf("os.ReadDir %s: %d entries, %v; want %d", d, len(ents), err, ListEntries)
	}
	var empty Sum = sha256.Sum256(nil)
	for _, i := range []int{0, 1, 999, ListEntries - 1} {
		name := fmt.Sprintf("entry-%04d", i)
		if i%97 == 0 {
			name += "-" + strings.Repeat("x", 200)
		}
		if err := w.check(w.rel(d+"/"+name), empty); err != nil {
			w.errorf("server side, %s/%s: %v", d, name, err)
		}
	}
	w.removeAll(w.rel(d))
}

func clip(s []string) []string {
	if len(s) > 10 {
		return append(s[:10:10], fmt.Sprintf("... %d more", len(s)-10))
	}
	return s
}

// statfs runs while the files of the first step (about 9.2 MiB) are still there.
func (w *runner) statfs() {
	var held int64
	for _, s := range FileSizes {
		held += int64(s)
	}
	var st syscall.Statfs_t
	if err := syscall.Statfs(w.mnt, &st); err != nil {
		w.fatalf("statfs %s: %v", w.mnt, err)
	}
	bs := st.Bsize
	if st.Frsize > 0 {
		bs = st.Frsize
	}
	switch {
	case bs <= 0 || st.Blocks == 0:
		w.errorf("statfs: block size %d, %d blocks; want both > 0", bs, st.Blocks)
	case st.Bfree > st.Blocks || st.Bavail > st.Blocks:
		w.errorf("statfs: %d blocks, %d free, %d available; want free and available <= blocks", st.Blocks, st.Bfree, st.Bavail)
	case int64(st.Blocks-st.Bfree)*bs < held-2*bs:
		// NFS clients round the server's byte counts down to blocks: allow 2
		w.errorf("statfs: %d bytes used (%d blocks of %d, %d free), but the workload holds %d bytes",
			int64(st.Blocks-st.Bfree)*bs, st.Blocks, bs, st.Bfree, held)
	case st.Ffree > st.Files:
		w.errorf("statfs: %d files, %d free; want free <= files", st.Files, st.Ffree)
	}
	if st.Namelen < 255 {
		w.errorf("statfs: maximum name length %d, want >= 255", st.Namelen)
	}
}

func (w *runner) cleanup() {
	want := make([]string, 0, len(FileSizes))
	for _, s := range FileSizes {
		want = append(want, fmt.Sprintf("file-%d", s))
	}
	sort.Strings(want)
	// A file unlinked while open lives on as .nfsXXXX until its last
	// close reaches the client, which for FUSE (RELEASE) and for the
	// kernel client (its asynchronous silly delete) comes a little after
	// close(2) returns: give it a few seconds to go.
	deadline := time.Now().Add(10 * time.Second)
	for {
		names, err := os.ReadDir(w.abs("."))
		if err != nil {
			w.fatalf("readdir %s: %v", w.dir, err)
		}
		var got []string
		sillyOnly := true
		for _, e := range names {
			got = append(got, e.Name())
			if !slices.Contains(want, e.Name()) && !strings.HasPrefix(e.Name(), ".nfs") {
				sillyOnly = false
			}
		}
		if slices.Equal(got, want) {
			break
		}
		if !sillyOnly || time.Now().After(deadline) {
			w.errorf("the work directory holds %v, want exactly %v", got, want)
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	w.removeAll(w.dir)
}

// countNames lists directory d in small batches, so that the listing
// takes many calls, and counts how often each name comes.
func (w *runner) countNames(d string, expect int) map[string]int {
	dir, err := os.Open(w.abs(d))
	if err != nil {
		w.fatalf("open %s: %v", d, err)
	}
	defer dir.Close()
	seen := make(map[string]int, expect)
	for {
		ents, err := dir.ReadDir(64)
		for _, e := range ents {
			seen[e.Name()]++
		}
		if err == io.EOF {
			return seen
		}
		if err != nil {
			w.fatalf("readdir %s after %d entries: %v", d, len(seen), err)
		}
	}
}
