package workload

import (
	"crypto/sha256"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
)

// The workload against a local directory, with the same directory as the
// "server side": every step must pass on a POSIX file system.
func TestRunLocal(t *testing.T) {
	dir := t.TempDir()
	Run(t, dir, DirChecker(dir))
	left, err := os.ReadDir(dir)
	if err != nil || len(left) != 0 {
		t.Errorf("after Run the directory holds %v (%v), want nothing", left, err)
	}
}

func TestCrossCheckLocal(t *testing.T) {
	dir := t.TempDir()
	// two "mounts" of one directory: a symlink is a second path to it
	alias := filepath.Join(t.TempDir(), "alias")
	if err := os.Symlink(dir, alias); err != nil {
		t.Fatal(err)
	}
	CrossCheck(t, dir, alias, DirChecker(dir))
}

func TestDirChecker(t *testing.T) {
	dir := t.TempDir()
	data := []byte("hello")
	if err := os.WriteFile(filepath.Join(dir, "f"), data, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(filepath.Join(dir, "d"), 0o755); err != nil {
		t.Fatal(err)
	}
	check := DirChecker(dir)
	if err := check("f", sha256.Sum256(data)); err != nil {
		t.Errorf("matching file: %v", err)
	}
	if err := check("f", sha256.Sum256([]byte("other"))); err == nil || errors.Is(err, fs.ErrNotExist) {
		t.Errorf("wrong content: got %v, want a mismatch error", err)
	}
	if err := check("missing", Sum{}); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("missing file: got %v, want fs.ErrNotExist", err)
	}
	if err := check("d", Sum{}); err == nil || errors.Is(err, fs.ErrNotExist) {
		t.Errorf("directory: got %v, want a not-a-regular-file error", err)
	}
}

// recorder is a testing.TB that records failures instead of failing the
// test, so that a test can check that the workload detects a fault.
type recorder struct {
	testing.TB
	mu     sync.Mutex
	failed bool
	msgs   []string
}

func (r *recorder) Helper()                   {}
func (r *recorder) Logf(string, ...any)       {}
func (r *recorder) Log(...any)                {}
func (r *recorder) Fail()                     { r.mu.Lock(); r.failed = true; r.mu.Unlock() }
func (r *recorder) Failed() bool              { r.mu.Lock(); defer r.mu.Unlock(); return r.failed }
func (r *recorder) FailNow()                  { r.Fail(); runtime.Goexit() }
func (r *recorder) Error(args ...any)         { r.add(fmt.Sprint(args...)) }
func (r *recorder) Errorf(f string, a ...any) { r.add(fmt.Sprintf(f, a...)) }
func (r *recorder) Fatal(args ...any)         { r.add(fmt.Sprint(args...)); runtime.Goexit() }
func (r *recorder) Fatalf(f string, a ...any) { r.add(fmt.Sprintf(f, a...)); runtime.Goexit() }

func (r *recorder) add(msg string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.failed = true
	r.msgs = append(r.msgs, msg)
}

// runRecorded runs Run with a recorder and returns what it reported.
func runRecorded(t *testing.T, mnt string, check Checker) []string {
	r := &recorder{TB: t}
	done := make(chan struct{})
	go func() {
		defer close(done)
		Run(r, mnt, check)
	}()
	<-done
	if !r.Failed() {
		t.Fatalf("Run reported no failure")
	}
	return r.msgs
}

func expectMessage(t *testing.T, msgs []string, want string) {
	t.Helper()
	for _, m := range msgs {
		if strings.Contains(m, want) {
			return
		}
	}
	t.Errorf("no failure message contains %q; got %q", want, msgs)
}

// A server whose copy of one file differs must fail the run.
func TestRunDetectsServerMismatch(t *testing.T) {
	dir := t.TempDir()
	real := DirChecker(dir)
	check := func(rel string, want Sum) error {
		if strings.HasSuffix(rel, "/file-4097") {
			want[0] ^= 1
		}
		return real(rel, want)
	}
	msgs := runRecorded(t, dir, check)
	expectMessage(t, msgs, "server side, file-4097")
}

// A server that still has a file the client removed must fail the run.
func TestRunDetectsStaleServerFile(t *testing.T) {
	dir := t.TempDir()
	real := DirChecker(dir)
	check := func(rel string, want Sum) error {
		if strings.HasSuffix(rel, "/victim") {
			return nil // claims the removed file is still there
		}
		return real(rel, want)
	}
	msgs := runRecorded(t, dir, check)
	expectMessage(t, msgs, "server side, victim after removal")
}

// A mount point that does not exist fails at once, naming it.
func TestRunMissingMount(t *testing.T) {
	msgs := runRecorded(t, filepath.Join(t.TempDir(), "nope"), DirChecker(t.TempDir()))
	expectMessage(t, msgs, "not a directory")
}

// Steps, which RunWithout checks the names it skips against, names Run's
// steps in the order Run runs them.
func TestStepsNamesRunsSteps(t *testing.T) {
	var names []string
	for _, s := range (&runner{}).steps() {
		names = append(names, s.name)
	}
	if !slices.Equal(names, Steps) {
		t.Fatalf("Run's steps are %v, Steps says %v", names, Steps)
	}
}

// RunWithout runs the other steps, and they pass on a POSIX file system.
func TestRunWithoutLocal(t *testing.T) {
	dir := t.TempDir()
	RunWithout(t, dir, DirChecker(dir), "hardlink", "statfs")
	left, err := os.ReadDir(dir)
	if err != nil || len(left) != 0 {
		t.Errorf("after RunWithout the directory holds %v (%v), want nothing", left, err)
	}
}

// RunInlineSizes against a local directory that is its own server side:
// every symlink, listing and ACL it makes reads back.
func TestRunInlineSizesLocal(t *testing.T) {
	dir := t.TempDir()
	if failed := RunInlineSizes(t, dir, dir, true); len(failed) > 0 {
		t.Errorf("did not read back: %v", failed)
	}
}
