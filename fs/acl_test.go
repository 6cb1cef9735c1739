package fs

import (
	"encoding/binary"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/rdmafs/rdmafs/nfs3/acl"
	"github.com/rdmafs/rdmafs/sunrpc"
)

func (h *harness) getxattr(node uint64, name string) ([]byte, syscall.Errno) {
	hd := h.header(node)
	buf := make([]byte, 4096)
	n, st := h.raw.GetXAttr(nil, &hd, name, buf)
	return buf[:n], errnoOf(st)
}

// TestACLCachedWithAttributes: a file's ACL is answered from the cache
// while its attributes stay the same, and asked for again once they
// change: an ACL set on the server shows after the open that revalidates
// the file's attributes (close-to-open), as with the kernel client.
func TestACLCachedWithAttributes(t *testing.T) {
	h := newHarness(t, harnessConfig{acl: true})
	node, fh := h.mustCreate(rootNode, "f", 0o600)
	h.close(node, fh)
	if _, en := h.getxattr(node, acl.XattrAccess); en != syscall.ENODATA {
		t.Fatalf("getxattr of a file without an ACL: %v, want ENODATA", en)
	}
	named := acl.ACL{
		{Tag: acl.TagUserObj, ID: acl.UndefinedID, Perm: 6},
		{Tag: acl.TagUser, ID: 2001, Perm: 4},
		{Tag: acl.TagGroupObj, ID: acl.UndefinedID, Perm: 0},
		{Tag: acl.TagMask, ID: acl.UndefinedID, Perm: 4},
		{Tag: acl.TagOther, ID: acl.UndefinedID, Perm: 0},
	}
	if err := unix.Setxattr(filepath.Join(h.dir, "f"), acl.XattrAccess, named.Xattr(), 0); err != nil {
		t.Fatal(err)
	}
	if _, en := h.getxattr(node, acl.XattrAccess); en != syscall.ENODATA {
		t.Fatalf("getxattr while the attributes are fresh: %v, want the cached ENODATA", en)
	}
	fh, _, en := h.open(node, syscall.O_RDONLY)
	if en != 0 {
		t.Fatal(en)
	}
	h.close(node, fh)
	b, en := h.getxattr(node, acl.XattrAccess)
	if en != 0 {
		t.Fatalf("getxattr after the open saw the new ctime: %v", en)
	}
	if got, err := acl.FromXattr(b); err != nil || !slices.Equal(got, named) {
		t.Fatalf("getxattr after the open: %v, %v; want %v", got, err, named)
	}
}

// TestCreatesKeepTheDirectorysACL: a create moves its directory's ctime,
// but the reply's attributes from before say the change was this client's
// own, so the directory's cached ACL stays (the kernel client's
// nfs_wcc_update_inode): a run of creates asks GETACL of the directory
// once, not once per file, which made creates a quarter slower. A default
// ACL set through another client shows, as through the kernel client,
// once the directory's cached attributes are too old (acdirmax): the next
// create asks again, and the new file gets its permissions from the ACL
// (no umask).
func TestCreatesKeepTheDirectorysACL(t *testing.T) {
	const acdir = 300 * time.Millisecond
	opts := Options{ACRegMin: 3 * time.Second, ACRegMax: 60 * time.Second, ACDirMin: acdir, ACDirMax: acdir,
		LookupPositive: true, LookupNegative: true}
	var getACLs atomic.Int64
	h := newHarness(t, harnessConfig{opts: opts, acl: true, wrap: func(tr sunrpc.Transport) sunrpc.Transport {
		// Nothing is changed: the call hook only counts.
		return &misbehaving{Transport: tr, call: func(call *sunrpc.Call) {
			if binary.BigEndian.Uint32(call.Head[12:]) == acl.Program && call.Proc == acl.ProcGetACL {
				getACLs.Add(1)
			}
		}}
	}})
	dir, en := h.mkdir(rootNode, "d", 0o777)
	if en != 0 {
		t.Fatal(en)
	}
	create := func(name string) {
		t.Helper()
		node, fh := h.mustCreate(dir, name, 0o666)
		h.close(node, fh)
	}
	create("first") // asks for the directory's ACLs
	asked := getACLs.Load()
	for i := range 5 {
		create(fmt.Sprintf("f%d", i))
	}
	if n := getACLs.Load() - asked; n != 0 {
		t.Fatalf("5 more creates in the directory asked GETACL %d more times, want none", n)
	}
	// rwx for everyone by default: the caller's umask must not apply.
	everyone := acl.ACL{
		{Tag: acl.TagUserObj, ID: acl.UndefinedID, Perm: 7},
		{Tag: acl.TagGroupObj, ID: acl.UndefinedID, Perm: 7},
		{Tag: acl.TagOther, ID: acl.UndefinedID, Perm: 7},
	}
	if err := unix.Setxattr(filepath.Join(h.dir, "d"), acl.XattrDefault, everyone.Xattr(), 0); err != nil {
		t.Fatal(err)
	}
	time.Sleep(acdir + 100*time.Millisecond)
	create("after")
	if n := getACLs.Load() - asked; n != 1 {
		t.Fatalf("a create after a default ACL was set elsewhere asked GETACL %d times, want once", n)
	}
	if fi, err := os.Stat(filepath.Join(h.dir, "d", "after")); err != nil || fi.Mode().Perm() != 0o666 {
		t.Fatalf("a file made in a directory with a default ACL: %v, %v; want mode 0666", fi.Mode(), err)
	}
}

// TestGetACLAsksAsTheKernelClient: GETACL asks for a file's access ACL
// with its entry count (NFS_ACL|NFS_ACLCNT), and for a directory's
// default ACL and count too, as the kernel client's nfs3_get_acl does:
// some servers answer a mask without the counts with no ACL at all.
func TestGetACLAsksAsTheKernelClient(t *testing.T) {
	var masks []uint32
	var mu sync.Mutex
	h := newHarness(t, harnessConfig{acl: true, wrap: func(tr sunrpc.Transport) sunrpc.Transport {
		return &misbehaving{Transport: tr, call: func(call *sunrpc.Call) {
			if binary.BigEndian.Uint32(call.Head[12:]) == acl.Program && call.Proc == acl.ProcGetACL {
				mu.Lock()
				masks = append(masks, binary.BigEndian.Uint32(call.Head[len(call.Head)-4:]))
				mu.Unlock()
			}
		}}
	}})
	file, fh := h.mustCreate(rootNode, "f", 0o600)
	h.close(file, fh)
	dir, en := h.mkdir(rootNode, "d", 0o755)
	if en != 0 {
		t.Fatal(en)
	}
	mu.Lock()
	masks = nil // the creates asked for the root's default ACL
	mu.Unlock()
	for _, node := range []uint64{file, dir} {
		if _, en := h.getxattr(node, acl.XattrAccess); en != syscall.ENODATA {
			t.Fatalf("getxattr of a minimal ACL: %v, want ENODATA", en)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	want := []uint32{acl.MaskACL | acl.MaskACLCount, acl.MaskACL | acl.MaskACLCount | acl.MaskDefault | acl.MaskDefaultCount}
	if !slices.Equal(masks, want) {
		t.Errorf("GETACL masks %#x (file, then directory), want %#x", masks, want)
	}
}
