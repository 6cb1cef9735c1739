package host

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/rdmafs/rdmafs/test/e2e/difftest"
)

// TestWriteBehindRefused: alice writes through a descriptor she opened
// while the file was hers, after root gave it away; the server refuses
// the WRITE. The kernel NFS client (the guest's differential test found
// this) shows the file at the size the server keeps once its write-back
// failed, even to a stat whose path lookup is what fetches the
// attributes; the write(2) succeeds, as the data only waits in the client;
// a chown by root succeeds; and the close reports the failure, as do the
// fsyncs of other descriptors, as Linux's errseq_t has it.
func TestWriteBehindRefused(t *testing.T) {
	needHost(t)
	s := startServer(t, "", 0, "no_root_squash") // root gives the file away
	// Names are looked up again after a second (acdirmin): root's stat
	// below walks the path with a LOOKUP, whose reply carries attributes.
	mnt := sharedMount(t, s, "acdirmin=1,acdirmax=1,acregmin=1,acregmax=1")
	dir := filepath.Join(mnt, "refused")
	if err := os.Mkdir(dir, 0o777); err != nil {
		t.Fatal(err)
	}
	os.Chmod(dir, 0o777)
	run, err := difftest.NewRun(dir, difftest.Users)
	if err != nil {
		t.Fatal(err)
	}
	defer run.Close()
	op := func(user string, c difftest.Call, path string) difftest.Op {
		return difftest.Op{User: user, Call: c, Path: path, UID: -1, GID: -1}
	}
	do := func(o difftest.Op) difftest.Result {
		t.Helper()
		r := run.Do(o)
		t.Logf("%s: %s", o, r)
		return r
	}
	create := op("alice", difftest.Open, "b")
	create.Flags, create.Mode, create.FD = unix.O_WRONLY|unix.O_CREAT|unix.O_TRUNC, 0o604, "w"
	if r := do(create); r.Errno != "" {
		t.Fatal(r)
	}
	chown := op("root", difftest.Chown, "b")
	chown.UID, chown.GID = 0, 3000
	if r := do(chown); r.Errno != "" {
		t.Fatal(r)
	}
	reader := op("root", difftest.Open, "b")
	reader.Flags, reader.FD = unix.O_RDONLY, "r"
	if r := do(reader); r.Errno != "" {
		t.Fatal(r)
	}
	write := op("alice", difftest.Pwrite, "")
	write.FD, write.Off, write.Len, write.Seed = "w", 368871, 64217, 1
	if r := do(write); r.Errno != "" {
		t.Fatalf("alice's first write: %s; want it taken (it waits in the client)", r)
	}
	time.Sleep(1500 * time.Millisecond)
	if r := do(op("root", difftest.Stat, "b")); r.Errno != "" || r.Stat.Size != 0 {
		t.Errorf("root's stat of b after alice's refused write: %s; want size 0, what the server holds", r)
	}
	write.Off, write.Len = 0xb496e, 0xb88
	if r := do(write); r.Errno != "" {
		t.Errorf("alice's write after the refused write-back: %s; want it taken, as the kernel client does (the error waits for fsync or close)", r)
	}
	// Root's chown waits for alice's data to be sent, but neither fails
	// because the server refused it nor takes the error away from alice's
	// close: the kernel client's SETATTR ignores what writing back the
	// file's data returned (the differential test's random seed
	// 1796064925702279499 found this).
	if r := do(chown); r.Errno != "" {
		t.Errorf("root's chown while alice's write-back is refused: %s; want it done", r)
	}
	closeOp := op("alice", difftest.Close, "")
	closeOp.FD = "w"
	if r := do(closeOp); r.Errno != "EACCES" {
		t.Errorf("alice's close: %s; want EACCES, the refused write-back", r)
	}
	// The kernel client reports a write-back failure as Linux's errseq_t
	// has it (the differential test's random seeds 1796075544119007556
	// found it): a close does not count as reporting it, so the fsync
	// of a descriptor opened after alice's close reports it, and so does
	// the fsync of every descriptor open when it happened, although
	// root wrote nothing through them; each once.
	reader.FD = "r2"
	do(reader)
	fsync := op("root", difftest.Fsync, "")
	fsync.FD = "r2"
	if r := do(fsync); r.Errno != "EACCES" {
		t.Errorf("root's fsync of a descriptor opened after alice's close reported the failure: %s; want EACCES", r)
	}
	fsync.FD = "r"
	if r := do(fsync); r.Errno != "EACCES" {
		t.Errorf("root's fsync of a descriptor open when alice's write-back failed: %s; want EACCES", r)
	}
	if r := do(fsync); r.Errno != "" {
		t.Errorf("root's second fsync: %s; want it done (the failure is reported once)", r)
	}
	reader.FD = "r3" // opened after an fsync reported the failure
	do(reader)
	fsync.FD = "r3"
	if r := do(fsync); r.Errno != "" {
		t.Errorf("fsync of a descriptor opened after an fsync reported the failure: %s; want it done", r)
	}
	closeReader := op("root", difftest.Close, "")
	closeReader.FD = "r"
	if r := do(closeReader); r.Errno != "" {
		t.Errorf("close of a read-only descriptor: %s; want it done, as the kernel client's", r)
	}
}
