package workload

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/rdmafs/rdmafs/nfs3/acl"
)

// Replies whose size decides how RPC-over-RDMA carries them: inline when
// they fit the inline threshold (1 KiB or 4 KiB, the kernel client's and
// knfsd's choices), else in the chunk the client offered (a write chunk
// for a READLINK's path, which RFC 8267 makes DDP-eligible; a reply chunk
// for a listing or an ACL). RunInlineSizes makes, on the server's side,
// files whose replies fall on both sides of each threshold, in small
// steps, and reads each back through the mount: a pairing of client and
// server that disagrees on a chunk fails one of them.

// InlineSymlinkLengths are the symlink target lengths: every 8 bytes
// across where a READLINK reply outgrows 1 KiB and 4 KiB, up to the
// longest path (PATH_MAX - 1).
var InlineSymlinkLengths = func() []int {
	l := []int{1, 100}
	for n := 824; n <= 1048; n += 8 {
		l = append(l, n)
	}
	for n := 3840; n < 4095; n += 8 {
		l = append(l, n)
	}
	return append(l, 4095)
}()

// InlineListings are the directories listed: count entries of names of
// nameLen bytes. Their listings grow by one entry at a time across 1 KiB
// and 4 KiB, for READDIR (about nameLen + 24 bytes an entry) and
// READDIRPLUS (about nameLen + 150).
var InlineListings = func() (l []struct{ Count, NameLen int }) {
	for n := 1; n <= 16; n++ {
		l = append(l, struct{ Count, NameLen int }{n, 255})
	}
	for n := 2; n <= 34; n += 2 {
		l = append(l, struct{ Count, NameLen int }{n, 100})
	}
	return l
}()

// InlineACLEntries are the numbers of named-user entries of the access
// ACLs: 12 bytes each on the wire, across where a GETACL reply (or a
// SETACL call) outgrows 1 KiB and 4 KiB.
var InlineACLEntries = func() []int {
	var l []int
	for n := 60; n <= 84; n += 3 {
		l = append(l, n)
	}
	for n := 312; n <= 342; n += 3 {
		l = append(l, n)
	}
	return l
}()

// RunInlineSizes makes under serverDir (the export's directory as the
// server sees it; mnt mounts it) symlinks of [InlineSymlinkLengths],
// directories of [InlineListings] and, with acls, files with ACLs of
// [InlineACLEntries] entries, and checks through the mount that each reads
// back as made. Half the symlinks and ACLs are made through the mount
// instead and checked on the server: the calls that carry them cross the
// thresholds too. It returns the names of the files that did not read
// back, having logged why; a failure to set up fails t.
func RunInlineSizes(t testing.TB, mnt, serverDir string, acls bool) (failed []string) {
	t.Helper()
	fail := func(name, format string, args ...any) {
		t.Helper()
		t.Logf("%s: %s", name, fmt.Sprintf(format, args...))
		failed = append(failed, name)
	}
	const dir = "inline-sizes"
	server, client := filepath.Join(serverDir, dir), filepath.Join(mnt, dir)
	if err := os.Mkdir(server, 0o777); err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(server)

	target := func(n int) string {
		return strings.Repeat(fmt.Sprintf("%04d/", n), n/5+1)[:n]
	}
	for i, n := range InlineSymlinkLengths {
		name := fmt.Sprintf("link-%04d", n)
		made, read := filepath.Join(server, name), filepath.Join(client, name)
		if i%2 == 1 {
			made, read = read, made
		}
		if err := os.Symlink(target(n), made); err != nil {
			fail(name, "symlink of a %d-byte target (%s): %v", n, made, err)
			continue
		}
		if got, err := os.Readlink(read); err != nil || got != target(n) {
			fail(name, "readlink of a %d-byte target (%s): %d bytes, %v", n, read, len(got), err)
		}
	}

	for _, l := range InlineListings {
		d := fmt.Sprintf("list-%02dx%d", l.Count, l.NameLen)
		if err := os.Mkdir(filepath.Join(server, d), 0o777); err != nil {
			t.Fatal(err)
		}
		var want []string
		for i := range l.Count {
			name := fmt.Sprintf("%03d-", i) + strings.Repeat("n", l.NameLen-4)
			if err := os.WriteFile(filepath.Join(server, d, name), nil, 0o644); err != nil {
				t.Fatal(err)
			}
			want = append(want, name)
		}
		ents, err := os.ReadDir(filepath.Join(client, d))
		var got []string
		for _, e := range ents {
			got = append(got, e.Name())
		}
		if err != nil || !slices.Equal(got, want) {
			fail(d, "listing of %d entries of %d-byte names: %d names, %v", l.Count, l.NameLen, len(got), err)
		}
	}

	if !acls {
		return failed
	}
	for i, n := range InlineACLEntries {
		name := fmt.Sprintf("acl-%03d", n)
		if err := os.WriteFile(filepath.Join(server, name), nil, 0o666); err != nil {
			t.Fatal(err)
		}
		a := acl.ACL{{Tag: acl.TagUserObj, ID: acl.UndefinedID, Perm: 6}}
		for u := range n {
			a = append(a, acl.Entry{Tag: acl.TagUser, ID: uint32(20000 + u), Perm: 4})
		}
		a = append(a, acl.ACL{
			{Tag: acl.TagGroupObj, ID: acl.UndefinedID, Perm: 4},
			{Tag: acl.TagMask, ID: acl.UndefinedID, Perm: 4},
			{Tag: acl.TagOther, ID: acl.UndefinedID, Perm: 4},
		}...)
		set, get := filepath.Join(server, name), filepath.Join(client, name)
		if i%2 == 1 {
			set, get = get, set
		}
		if err := unix.Setxattr(set, acl.XattrAccess, a.Xattr(), 0); err != nil {
			fail(name, "an ACL of %d named users (%s): %v", n, set, err)
			continue
		}
		got, err := getACL(get)
		if err != nil || !slices.Equal(got, a) {
			fail(name, "the ACL of %d named users read back (%s): %d entries, %v", n, get, len(got), err)
		}
	}
	return failed
}

// getACL reads the access ACL of path.
func getACL(path string) (acl.ACL, error) {
	buf := make([]byte, 64<<10)
	n, err := unix.Getxattr(path, acl.XattrAccess, buf)
	if errors.Is(err, syscall.ENODATA) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	return acl.FromXattr(buf[:n])
}
