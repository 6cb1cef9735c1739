package fs

import (
	"bytes"
	"context"
	"math"
	"os"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/hanwen/go-fuse/v2/fuse"

	"github.com/rdmafs/rdmafs/nfs3"
	"github.com/rdmafs/rdmafs/sunrpc"
)

const alice, bob = 2001, 2002

// TestAccessCacheFollowsMode: the answers of ACCESS a file keeps are
// dropped when its mode changes, through this client or any other, so a
// grant taken away is refused at once and one given is granted at once.
func TestAccessCacheFollowsMode(t *testing.T) {
	h := newHarness(t, harnessConfig{})
	a := h.as(alice, alice)
	node, fh := a.mustCreate(rootNode, "f", 0o666)
	a.close(node, fh)
	if fh, _, en := a.open(node, syscall.O_WRONLY); en != 0 {
		t.Fatalf("owner opens a 0666 file for writing: %v", en)
	} else {
		a.close(node, fh)
	}
	if _, en := a.setattr(node, fuse.SetAttrIn{SetAttrInCommon: fuse.SetAttrInCommon{Valid: fuse.FATTR_MODE, Mode: 0o477}}); en != 0 {
		t.Fatal(en)
	}
	if _, _, en := a.open(node, syscall.O_WRONLY); en != syscall.EACCES {
		t.Errorf("owner opens for writing right after chmod 0477: %v, want EACCES", en)
	}
	// Behind the client's back: the next check after the attributes are
	// fetched again must follow the new mode.
	os.Chmod(h.dir+"/f", 0o677)
	if _, en := a.getattr(node); en != 0 {
		t.Fatal(en)
	}
	h.fs.invalidate(h.fs.objectOf(t, "f"))
	if _, en := a.getattr(node); en != 0 {
		t.Fatal(en)
	}
	if fh, _, en := a.open(node, syscall.O_WRONLY); en != 0 {
		t.Errorf("owner opens for writing after the server's chmod 0677 is seen: %v", en)
	} else {
		a.close(node, fh)
	}
}

// objectOf returns the object of the file the root directory holds as
// name, which a test has looked up.
func (f *FS) objectOf(t *testing.T, name string) *object {
	t.Helper()
	obj := f.root.childObject(name)
	if obj == nil {
		t.Fatalf("%s is not known", name)
	}
	return obj
}

// TestTruncateNeedsWritePermission: truncate(2), and open(2) with O_TRUNC
// (which FUSE turns into a SETATTR of the size without a file handle), need
// write permission even from the file's owner, whom the server would let
// truncate it; ftruncate(2) of a descriptor open for writing needs nothing
// more.
func TestTruncateNeedsWritePermission(t *testing.T) {
	h := newHarness(t, harnessConfig{})
	a := h.as(alice, alice)
	node, fh := a.mustCreate(rootNode, "f", 0o644)
	if en := a.write(node, fh, 0, []byte("precious data")); en != 0 {
		t.Fatal(en)
	}
	a.close(node, fh)
	for _, mode := range []uint32{0o444, 0o477} {
		if _, en := a.setattr(node, fuse.SetAttrIn{SetAttrInCommon: fuse.SetAttrInCommon{Valid: fuse.FATTR_MODE, Mode: mode}}); en != 0 {
			t.Fatal(en)
		}
		_, en := a.setattr(node, fuse.SetAttrIn{SetAttrInCommon: fuse.SetAttrInCommon{Valid: fuse.FATTR_SIZE, Size: 0}})
		if en != syscall.EACCES {
			t.Errorf("owner truncates a %#o file: %v, want EACCES", mode, en)
		}
		if got := string(h.serverFile("f")); got != "precious data" {
			t.Fatalf("after the owner's refused truncate of a %#o file the server has %q", mode, got)
		}
	}
	a.setattr(node, fuse.SetAttrIn{SetAttrInCommon: fuse.SetAttrInCommon{Valid: fuse.FATTR_MODE, Mode: 0o644}})
	fh, _, en := a.open(node, syscall.O_WRONLY)
	if en != 0 {
		t.Fatal(en)
	}
	a.setattr(node, fuse.SetAttrIn{SetAttrInCommon: fuse.SetAttrInCommon{Valid: fuse.FATTR_MODE, Mode: 0o444}})
	if _, en := a.setattr(node, fuse.SetAttrIn{SetAttrInCommon: fuse.SetAttrInCommon{Valid: fuse.FATTR_SIZE | fuse.FATTR_FH, Size: 7, Fh: fh}}); en != 0 {
		t.Errorf("ftruncate of a descriptor opened for writing before chmod 0444: %v", en)
	}
	a.close(node, fh)
	if got := string(h.serverFile("f")); got != "preciou" {
		t.Errorf("after ftruncate to 7 the server has %q", got)
	}
}

// TestRenameOverUpdatesOtherLinks: a rename over a name, and an unlink,
// take a link from a file whose other names must show it at once.
func TestRenameOverUpdatesOtherLinks(t *testing.T) {
	h := newHarness(t, harnessConfig{})
	a := h.as(alice, alice)
	node, fh := a.mustCreate(rootNode, "a", 0o644)
	a.close(node, fh)
	if en := a.link(node, rootNode, "b"); en != 0 {
		t.Fatal(en)
	}
	if attr, _ := a.getattr(node); attr.Nlink != 2 {
		t.Fatalf("after link: nlink %d", attr.Nlink)
	}
	c, fh := a.mustCreate(rootNode, "c", 0o644)
	a.close(c, fh)
	a.mustLookup(rootNode, "b")
	if en := a.rename(rootNode, "c", rootNode, "b"); en != 0 {
		t.Fatal(en)
	}
	if attr, _ := a.getattr(node); attr.Nlink != 1 {
		t.Errorf("a after c was renamed over its other name b: nlink %d, want 1", attr.Nlink)
	}
	if en := a.link(node, rootNode, "d"); en != 0 {
		t.Fatal(en)
	}
	a.mustLookup(rootNode, "d")
	if en := a.unlink(rootNode, "d"); en != 0 {
		t.Fatal(en)
	}
	if attr, _ := a.getattr(node); attr.Nlink != 1 {
		t.Errorf("a after its other name d was unlinked: nlink %d, want 1", attr.Nlink)
	}
}

// TestTimesClamped: times NFSv3 cannot carry are clamped to its range, as
// the kernel client clamps them, never wrapped round.
func TestTimesClamped(t *testing.T) {
	h := newHarness(t, harnessConfig{})
	a := h.as(alice, alice)
	node, fh := a.mustCreate(rootNode, "f", 0o644)
	a.close(node, fh)
	for _, c := range []struct {
		set  int64
		want int64
	}{{1 << 32, math.MaxUint32}, {1<<33 + 5, math.MaxUint32}, {-100, 0}, {1234567890, 1234567890}, {math.MaxUint32 - 1, math.MaxUint32 - 1}} {
		in := fuse.SetAttrIn{SetAttrInCommon: fuse.SetAttrInCommon{Valid: fuse.FATTR_MTIME, Mtime: uint64(c.set)}}
		attr, en := a.setattr(node, in)
		if en != 0 {
			t.Fatalf("set mtime %d: %v", c.set, en)
		}
		st, err := os.Stat(h.dir + "/f")
		if err != nil {
			t.Fatal(err)
		}
		if got := st.ModTime().Unix(); got != c.want || int64(attr.Mtime) != c.want {
			t.Errorf("set mtime %d: the server has %d, the client shows %d; want %d", c.set, got, attr.Mtime, c.want)
		}
	}
}

// TestStatSendsQueuedWrites: a stat after a write shows the mtime the
// server gave the file for it, as the kernel client's stat, which sends
// the written data first.
func TestStatSendsQueuedWrites(t *testing.T) {
	h := newHarness(t, harnessConfig{})
	node, fh := h.mustCreate(rootNode, "f", 0o644)
	before, en := h.getattr(node)
	if en != 0 {
		t.Fatal(en)
	}
	time.Sleep(20 * time.Millisecond)
	if en := h.write(node, fh, 0, []byte("data")); en != 0 {
		t.Fatal(en)
	}
	after, en := h.getattr(node)
	if en != 0 {
		t.Fatal(en)
	}
	if after.Mtime == before.Mtime && after.Mtimensec == before.Mtimensec {
		t.Errorf("mtime after a write is the one before it (%d.%09d)", after.Mtime, after.Mtimensec)
	}
	if got := string(h.serverFile("f")); got != "data" {
		t.Errorf("the server has %q after the stat", got)
	}
	h.close(node, fh)
}

// TestRmdirOfOpenDirectory: an fstat of a directory that was removed while
// open shows no links, as the kernel client's does.
func TestRmdirOfOpenDirectory(t *testing.T) {
	h := newHarness(t, harnessConfig{})
	node, en := h.mkdir(rootNode, "d", 0o755)
	if en != 0 {
		t.Fatal(en)
	}
	if attr, _ := h.getattr(node); attr.Nlink != 2 {
		t.Fatalf("new directory: nlink %d", attr.Nlink)
	}
	hd := h.header(rootNode)
	if en := errnoOf(h.raw.Rmdir(nil, &hd, "d")); en != 0 {
		t.Fatal(en)
	}
	if attr, en := h.getattr(node); en != 0 || attr.Nlink != 0 {
		t.Errorf("the removed directory: nlink %d (%v), want 0", attr.Nlink, en)
	}
}

// TestFailedCallsRefreshTheDirectory: a call that fails still says what
// its directory is like afterwards (LINK's, CREATE's weak cache
// consistency data, LOOKUP's directory attributes), and the directory's
// cached attributes take it, as the kernel client's do.
func TestFailedCallsRefreshTheDirectory(t *testing.T) {
	h := newHarness(t, harnessConfig{})
	d, en := h.mkdir(rootNode, "d", 0o777)
	if en != 0 {
		t.Fatal(en)
	}
	f, fh := h.mustCreate(d, "f", 0o644)
	h.close(f, fh)
	for _, fail := range []struct {
		name string
		call func() syscall.Errno
	}{
		{"LINK over an existing name", func() syscall.Errno { return h.link(f, d, "f") }},
		{"CREATE of an existing name, exclusive", func() syscall.Errno {
			_, _, en := h.create(d, "f", syscall.O_RDWR|syscall.O_CREAT|syscall.O_EXCL, 0o644)
			return en
		}},
		{"LOOKUP of a missing name", func() syscall.Errno { _, _, en := h.lookup(d, "missing"); return en }},
	} {
		before, _ := h.getattr(d)
		time.Sleep(20 * time.Millisecond)
		// Behind the client's back: the directory changes on the server.
		if err := os.WriteFile(h.dir+"/d/other-"+fail.name[:4], nil, 0o644); err != nil {
			t.Fatal(err)
		}
		if en := fail.call(); en == 0 {
			t.Fatalf("%s succeeded", fail.name)
		}
		after, _ := h.getattr(d)
		if after.Mtime == before.Mtime && after.Mtimensec == before.Mtimensec {
			t.Errorf("after a failed %s, the directory shows its old mtime", fail.name)
		}
	}
}

// TestSillyRenameRefreshesAttributes: unlinking an open file renames it to
// a hidden name, which changes its ctime on the server; its attributes
// must show that at once, as the kernel client's do.
func TestSillyRenameRefreshesAttributes(t *testing.T) {
	h := newHarness(t, harnessConfig{})
	a := h.as(alice, alice)
	node, fh := a.mustCreate(rootNode, "f", 0o644)
	before, en := a.getattr(node)
	if en != 0 {
		t.Fatal(en)
	}
	time.Sleep(20 * time.Millisecond) // a ctime the server can tell apart
	if en := a.unlink(rootNode, "f"); en != 0 {
		t.Fatal(en)
	}
	after, en := a.getattr(node)
	if en != 0 {
		t.Fatal(en)
	}
	if after.Ctime == before.Ctime && after.Ctimensec == before.Ctimensec {
		t.Errorf("ctime of an open file after its unlink (a rename to a hidden name on the server): unchanged %d.%09d", after.Ctime, after.Ctimensec)
	}
	a.close(node, fh)
}

// TestLateReplyKeepsNewerAttributes: the attributes a READ reply carries
// were the file's when the server read it; a truncate that completes while
// the reply is on its way is newer, and the reply must not undo it (the
// kernel client orders attribute updates the same way). The guest's
// exerciser saw an fstat show the size from before an ftruncate to 0.
func TestLateReplyKeepsNewerAttributes(t *testing.T) {
	var holdReads atomic.Bool
	replied := make(chan struct{}, 1)
	release := make(chan struct{})
	h := newHarness(t, harnessConfig{wrap: func(tr sunrpc.Transport) sunrpc.Transport {
		return &lateReplies{Transport: tr, late: func(call *sunrpc.Call) bool {
			return holdReads.Load() && call.Proc == nfs3.ProcRead
		}, replied: replied, release: release}
	}})
	h.writeServerFile("f", bytes.Repeat([]byte("x"), 8192), 0o666)
	node := h.mustLookup(rootNode, "f")
	fh, _, en := h.open(node, syscall.O_RDWR)
	if en != 0 {
		t.Fatal(en)
	}
	holdReads.Store(true)
	done := make(chan struct{})
	go func() {
		defer close(done)
		h.read(node, fh, 0, 4096)
	}()
	<-replied // the server has read the file at 8192 bytes
	holdReads.Store(false)
	var in fuse.SetAttrIn
	in.Valid, in.Size, in.Fh = fuse.FATTR_SIZE|fuse.FATTR_FH, 0, fh
	if _, en := h.setattr(node, in); en != 0 {
		t.Fatal(en)
	}
	close(release)
	<-done
	if attr, en := h.getattr(node); en != 0 || attr.Size != 0 {
		t.Errorf("size after a truncate to 0 and a READ reply from before it: %d (%v), want 0", attr.Size, en)
	}
	h.close(node, fh)
}

// lateReplies holds the replies of the calls late says so until release
// is closed, after telling replied: replies that overtake later calls.
type lateReplies struct {
	sunrpc.Transport
	late    func(*sunrpc.Call) bool
	replied chan struct{}
	release chan struct{}
}

var _ sunrpc.Transport = (*lateReplies)(nil)

func (l *lateReplies) RoundTrip(ctx context.Context, call *sunrpc.Call) error {
	late := l.late(call)
	err := l.Transport.RoundTrip(ctx, call)
	if late {
		l.replied <- struct{}{}
		<-l.release
	}
	return err
}
