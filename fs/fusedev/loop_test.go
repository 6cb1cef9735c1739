package fusedev

import (
	"bytes"
	"context"
	"encoding/binary"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	gofs "github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"
	"golang.org/x/sys/unix"
)

// testRoot is a directory with one file, "data", that holds content.
type testRoot struct {
	gofs.Inode
	content []byte
}

var _ = (gofs.NodeOnAdder)((*testRoot)(nil))

func (r *testRoot) OnAdd(ctx context.Context) {
	f := r.NewPersistentInode(ctx, &gofs.MemRegularFile{Data: r.content, Attr: fuse.Attr{Mode: 0o444}}, gofs.StableAttr{})
	r.AddChild("data", f, false)
}

// devFDs returns the process's descriptors open on /dev/fuse.
func devFDs(t *testing.T) map[int]bool {
	fds, err := Descriptors()
	if err != nil {
		t.Fatal(err)
	}
	return fds
}

func countReaders() int {
	buf := make([]byte, 1<<20)
	buf = buf[:runtime.Stack(buf, true)]
	return strings.Count(string(buf), "fusedev.(*Loop).read(")
}

// serveLoop mounts root with go-fuse's server (which answers INIT) and
// serves its requests with a Loop of readers, for payloads of maxIO bytes;
// the test's end unmounts it, if the test did not.
func serveLoop(t *testing.T, root gofs.InodeEmbedder, maxIO, readers int) (string, *Loop) {
	t.Helper()
	if _, err := os.Stat("/dev/fuse"); err != nil || os.Geteuid() != 0 {
		t.Fatalf("needs root and /dev/fuse (%v)", err)
	}
	mnt := t.TempDir()
	opts := &gofs.Options{}
	opts.MaxWrite = maxIO
	opts.DisableSplice = true
	raw := gofs.NewNodeFS(root, opts)
	before := devFDs(t)
	server, err := fuse.NewServer(raw, mnt, &opts.MountOptions)
	if err != nil {
		t.Fatal(err)
	}
	devFD := -1
	for fd := range devFDs(t) {
		if !before[fd] {
			devFD = fd
		}
	}
	if devFD < 0 {
		syscall.Unmount(mnt, unix.MNT_DETACH)
		t.Fatal("no new /dev/fuse descriptor after the mount")
	}
	ps := fuse.NewProtocolServer(raw, &opts.MountOptions)
	if err := Initialize(ps, server.KernelSettings()); err != nil {
		syscall.Unmount(mnt, unix.MNT_DETACH)
		t.Fatal(err)
	}
	loop, err := Serve(Config{DevFD: devFD, Server: ps, Readers: readers, MaxWrite: maxIO, MaxRead: maxIO})
	if err != nil {
		syscall.Unmount(mnt, unix.MNT_DETACH)
		t.Fatal(err)
	}
	t.Cleanup(func() {
		syscall.Unmount(mnt, unix.MNT_DETACH) // EINVAL if the test unmounted it
		loop.Close()
	})
	if err := server.WaitMount(); err != nil {
		t.Fatal(err)
	}
	// go-fuse's server owns the mount's first descriptor in an
	// os.File, which a finalizer closes once the server is garbage: a
	// later test's mount could then get the same number, and devFDs
	// would not see it as new. The servers live as long as the tests.
	servers = append(servers, server)
	return mnt, loop
}

// servers are the tests' go-fuse servers, kept (see serveLoop).
var servers []*fuse.Server

// TestLoopServesAndEnds: a mount served by the loop answers lookups and
// READs larger than every other reply (the data comes through whole),
// keeps Readers readers, and the readers end at unmount.
func TestLoopServesAndEnds(t *testing.T) {
	content := bytes.Repeat([]byte("0123456789abcdef"), 16<<10) // 256 KiB
	const readers = 3
	mnt, loop := serveLoop(t, &testRoot{content: content}, 128<<10, readers)
	f, err := os.OpenFile(filepath.Join(mnt, "data"), os.O_RDONLY|syscall.O_DIRECT, 0)
	if err != nil {
		t.Fatal(err)
	}
	got := make([]byte, len(content))
	n, err := f.ReadAt(got, 0)
	f.Close()
	if err != nil || n != len(content) || !bytes.Equal(got, content) {
		t.Fatalf("read %d of %d bytes (%v); equal: %v", n, len(content), err, bytes.Equal(got[:n], content[:n]))
	}
	// A reader still answering what the close sent (RELEASE comes
	// after close returns) shows no stack: look for a while.
	n = countReaders()
	for deadline := time.Now().Add(2 * time.Second); n != readers && time.Now().Before(deadline); n = countReaders() {
		time.Sleep(10 * time.Millisecond)
	}
	if n != readers {
		t.Errorf("%d readers, want %d", n, readers)
	}

	if err := syscall.Unmount(mnt, 0); err != nil {
		t.Fatal(err)
	}
	ended := make(chan struct{})
	go func() { loop.Wait(); close(ended) }()
	select {
	case <-ended:
	case <-time.After(10 * time.Second):
		t.Fatal("readers still running 10 s after the unmount")
	}
	if n := countReaders(); n != 0 {
		t.Errorf("%d readers after the unmount", n)
	}
}

// bigDir is a directory of many entries with long names: its listing is
// far more than 64 KiB.
type bigDir struct{ gofs.Inode }

var _ = (gofs.NodeOnAdder)((*bigDir)(nil))

const bigDirEntries = 2000

func bigDirName(i int) string { return strconv.Itoa(i) + "-" + strings.Repeat("n", 200) }

func (d *bigDir) OnAdd(ctx context.Context) {
	for i := range bigDirEntries {
		f := d.NewPersistentInode(ctx, &gofs.MemRegularFile{Attr: fuse.Attr{Mode: 0o444}}, gofs.StableAttr{})
		d.AddChild(bigDirName(i), f, false)
	}
}

// TestLoopListsLargeDirectory: a listing read with a large getdents64
// buffer comes through whole. Newer kernels (6.18, 7.3) ask for as much of
// a directory as the caller's buffer holds (up to max_pages pages), far
// more than 64 KiB; the loop answered such a READDIRPLUS with EIO, so `ls`
// of every directory failed ("reading directory: Input/output error").
func TestLoopListsLargeDirectory(t *testing.T) {
	mnt, _ := serveLoop(t, &bigDir{}, 1<<20, 2)
	dir, err := os.Open(mnt)
	if err != nil {
		t.Fatal(err)
	}
	defer dir.Close()
	buf := make([]byte, 1<<20)
	names := 0
	for {
		n, err := unix.Getdents(int(dir.Fd()), buf)
		if err != nil {
			t.Fatalf("getdents64 of a directory of %d entries after %d of them: %v", bigDirEntries, names, err)
		}
		if n == 0 {
			break
		}
		for off := 0; off < n; {
			reclen := int(binary.LittleEndian.Uint16(buf[off+16:]))
			if name := unix.ByteSliceToString(buf[off+19 : off+reclen]); name != "." && name != ".." {
				names++
			}
			off += reclen
		}
	}
	if names != bigDirEntries {
		t.Errorf("listed %d entries, want %d", names, bigDirEntries)
	}
}
