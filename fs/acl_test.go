package fs

import (
	"path/filepath"
	"slices"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/rdmafs/rdmafs/nfs3/acl"
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
