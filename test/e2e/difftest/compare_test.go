package difftest

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// TestDiverges: a difference before a known divergence is reported; those
// from the diverging step on are counted as the known one.
func TestDiverges(t *testing.T) {
	ops := []Op{alice.stat("a"), alice.unlink("b"), alice.stat("a"), alice.readdir(".")}
	ref := []Result{{Ret: 1}, {Event: UnlinkedOpenLink}, {Ret: 1}, {Data: "a"}}
	got := []Result{{Ret: 2}, {}, {Ret: 2}, {Data: "a,.nfs"}}
	k := Known{Name: "k", Diverges: func(op Op, a, b Result) bool { return a.Event == UnlinkedOpenLink }}
	diffs, explained := Compare(ops, ref, got, []Known{k})
	if len(diffs) != 1 || diffs[0].Index != 0 {
		t.Errorf("differences %v; want step 0 alone", diffs)
	}
	if explained["k"] != 2 {
		t.Errorf("explained %v; want 2 of k", explained)
	}
}

// TestUnlinkedOpenLinkEvent: a run notices the removal of a name of an open
// file that has other names, by unlink or by a rename over it, and nothing
// else.
func TestUnlinkedOpenLinkEvent(t *testing.T) {
	run, dir := newTestRun(t)
	checkEvents(t, run, true, []eventStep{
		{alice.create("a", 0o644, "w"), ""},
		{alice.link("a", "b"), ""},
		{alice.create("c", 0o644, "x"), ""},
		{alice.unlink("c"), ""}, // one link only
		{alice.create("c", 0o644, "x"), ""},
		{alice.rename("c", "b"), UnlinkedOpenLink}, // b was a's other name
		{alice.unlink("b"), ""},                    // c's file now, one link
		{alice.link("a", "b"), ""},
		{alice.unlink("b"), UnlinkedOpenLink},
		{alice.unlink("a"), ""}, // the last name
	})
	var st unix.Stat_t
	if unix.Stat(dir+"/a", &st) == nil {
		t.Errorf("a is still there")
	}
}

// TestWriteToUnsearchableDirEvent: a run notices access(W_OK) of a
// directory whose mode denies the caller search permission, and only that.
func TestWriteToUnsearchableDirEvent(t *testing.T) {
	run, _ := newTestRun(t)
	checkEvents(t, run, false, []eventStep{
		{alice.mkdir("d", 0o777), ""},
		{alice.chmod("d", 0o666), ""},
		{alice.access("d", unix.W_OK), WriteToUnsearchableDir}, // owner, no x
		{alice.access("d", unix.R_OK), ""},                     // not a write
		{root.access("d", unix.W_OK), ""},                      // root may search anything
		{bob.access("d", unix.W_OK), WriteToUnsearchableDir},   // other, no x
		{alice.chmod("d", 0o766), ""},
		{alice.access("d", unix.W_OK), ""},
		{bob.access("d", unix.W_OK), WriteToUnsearchableDir},
	})
}

// TestFailedInUnwritableDirEvent: a run notices a failed change of a name
// in a directory whose mode denies the caller write permission, and only
// that.
func TestFailedInUnwritableDirEvent(t *testing.T) {
	run, _ := newTestRun(t)
	checkEvents(t, run, false, []eventStep{
		{root.mkdir("d", 0o755), ""},
		{root.create("d/f", 0o644, "r"), ""},
		{alice.rmdir("d/f"), FailedInUnwritableDir}, // EACCES here; ENOTDIR on the kernel client
		{alice.unlink("d/f"), FailedInUnwritableDir},
		{alice.rename("d/f", "g"), FailedInUnwritableDir},
		{alice.mkdir("g", 0o755), ""}, // a directory she may write
		{alice.mkdir("g", 0o755), ""}, // EEXIST, but not for want of permission
		{root.rmdir("d/f"), ""},       // root may write anywhere
		{alice.rename("g", "d/g"), FailedInUnwritableDir},
	})
}

// TestWriteWithoutReadEvent: a run notices a write through a read-write
// descriptor to a file whose mode denies the caller, not its owner, read
// permission, and only that.
func TestWriteWithoutReadEvent(t *testing.T) {
	run, _ := newTestRun(t)
	checkEvents(t, run, false, []eventStep{
		{alice.create("f", 0o666, "a"), ""},
		{alice.chmod("f", 0o666), ""}, // whatever the umask
		{bob.open("f", unix.O_RDWR, 0, "b"), ""},
		{bob.open("f", unix.O_WRONLY, 0, "w"), ""},
		{bob.pwrite("b", 0, 10, 1), ""}, // may read
		{alice.chmod("f", 0o662), ""},
		{bob.pwrite("b", 0, 10, 1), WriteWithoutRead},
		{bob.pwrite("w", 0, 10, 1), ""},   // not open for reading
		{alice.pwrite("a", 0, 10, 1), ""}, // the owner
		{alice.chmod("f", 0o626), ""},
		{alice.pwrite("a", 0, 10, 1), ""}, // the owner, still
		{bob.pwrite("b", 0, 10, 1), ""},   // may read as other
		{root.open("f", unix.O_RDWR, 0, "r"), ""},
		{alice.chmod("f", 0o000), ""},
		{root.pwrite("r", 0, 10, 1), ""}, // root reads anything
	})
}

// TestReadWithoutReadEvent: a run notices a read through a descriptor of a
// file whose mode denies the caller, not its owner, read permission, and
// only that.
func TestReadWithoutReadEvent(t *testing.T) {
	run, _ := newTestRun(t)
	checkEvents(t, run, false, []eventStep{
		{alice.create("f", 0o666, "a"), ""},
		{alice.chmod("f", 0o666), ""}, // whatever the umask
		{bob.open("f", unix.O_RDONLY, 0, "b"), ""},
		{bob.pread("b", 0, 10), ""},
		{alice.chmod("f", 0o660), ""},
		{bob.pread("b", 0, 10), ReadWithoutRead},
		{alice.pread("a", 0, 10), ""}, // the owner
		{alice.chmod("f", 0o066), ""},
		{alice.pread("a", 0, 10), ""}, // the owner, still
		{bob.pread("b", 0, 10), ""},   // may read as other
	})
}

// TestCloseWaitsForHiddenName: after the last close of a file it unlinked
// while open, a run waits until the file's hidden name is gone (as rdmafs
// removes it when FUSE's RELEASE comes, after close(2) returned), and only
// then goes on. Here the hidden name is a link that goes 300 ms later.
func TestCloseWaitsForHiddenName(t *testing.T) {
	run, dir := newTestRun(t)
	hidden := filepath.Join(dir, ".nfs0000000000000001000000aa")
	for _, op := range []Op{alice.create("f", 0o644, "w"), alice.link("f", filepath.Base(hidden)), alice.unlink("f")} {
		if r := run.Do(op); r.Errno != "" {
			t.Fatalf("%v: %v", op, r)
		}
	}
	go func() {
		time.Sleep(300 * time.Millisecond)
		os.Remove(hidden)
	}()
	start := time.Now()
	if r := run.Do(alice.close("w")); r.Errno != "" {
		t.Fatalf("close: %v", r)
	}
	if _, err := os.Lstat(hidden); err == nil {
		t.Errorf("the close returned after %v with the hidden name still there", time.Since(start).Round(time.Millisecond))
	}
}

// newTestRun makes a run of the three users in a new directory every one
// of them may work in, and returns it and the directory.
func newTestRun(t *testing.T) (*Run, string) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("a run's users need root to become them")
	}
	dir := t.TempDir()
	os.Chmod(filepath.Dir(dir), 0o755) // alice and bob must reach it
	os.Chmod(dir, 0o777)
	run, err := NewRun(dir, Users)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(run.Close)
	return run, dir
}

// eventStep is a call and the event its result must carry.
type eventStep struct {
	op   Op
	want Event
}

// checkEvents makes each step's call and checks its event; with
// mustSucceed, a call that fails ends the test.
func checkEvents(t *testing.T, run *Run, mustSucceed bool, steps []eventStep) {
	t.Helper()
	for _, step := range steps {
		r := run.Do(step.op)
		if mustSucceed && r.Errno != "" {
			t.Fatalf("%v: %v", step.op, r)
		}
		if r.Event != step.want {
			t.Errorf("%v: event %q, want %q (%v)", step.op, r.Event, step.want, r)
		}
	}
}
