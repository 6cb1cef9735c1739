package server

import (
	"context"
	"errors"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/rdmafs/rdmafs/nfs3"
	"github.com/rdmafs/rdmafs/nfs3/acl"
	"github.com/rdmafs/rdmafs/sunrpc"
)

// aclTestClient is the real NFS and NFSACL client, on one connection as
// the Linux client has them.
type aclTestClient struct {
	nfs  *nfs3.Client
	acl  *nfs3.ACLClient
	root nfs3.FH
}

func dialACL(t *testing.T, addr string) *aclTestClient {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	host, portStr, _ := net.SplitHostPort(addr)
	port, _ := strconv.Atoi(portStr)
	auth := sunrpc.Auth{Flavor: sunrpc.AuthSys, Machine: "test"}
	mc, err := nfs3.DialMount(ctx, nfs3.DialConfig{Host: host, Port: port, Auth: auth, Timeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer mc.Close()
	root, _, err := mc.Mnt(ctx, &sunrpc.Cred{}, "/")
	if err != nil {
		t.Fatal(err)
	}
	tr := sunrpc.NewTCP(sunrpc.TCPConfig{Addr: addr})
	t.Cleanup(func() { tr.Close() })
	cfg := sunrpc.Config{Prog: nfs3.Program, Vers: nfs3.Version, Auth: auth, Timeout: 5 * time.Second, Soft: true}
	rpc := sunrpc.NewClient(tr, cfg)
	c := &aclTestClient{nfs: nfs3.NewClient(rpc, nfs3.ClientConfig{}), root: root}
	cfg.Prog, cfg.Vers = acl.Program, acl.Version
	c.acl = nfs3.NewACLClient(rpc.Sibling(cfg), nfs3.ClientConfig{})
	return c
}

func (c *aclTestClient) lookup(t *testing.T, name string) nfs3.FH {
	t.Helper()
	var res nfs3.LookupResult
	if err := c.nfs.Lookup(context.Background(), &sunrpc.Cred{}, &c.root, name, &res); err != nil {
		t.Fatalf("LOOKUP %s: %v", name, err)
	}
	return res.FH
}

// fileACL reads an ACL of the real file, as getfacl would.
func fileACL(t *testing.T, path, name string) acl.ACL {
	t.Helper()
	buf := make([]byte, 4096)
	n, err := unix.Getxattr(path, name, buf)
	if errors.Is(err, unix.ENODATA) {
		return nil
	}
	if err != nil {
		t.Fatalf("getxattr %s %s: %v", path, name, err)
	}
	a, err := acl.FromXattr(buf[:n])
	if err != nil {
		t.Fatal(err)
	}
	return a
}

var (
	owner    = &sunrpc.Cred{UID: 1001, GID: 1001}
	stranger = &sunrpc.Cred{UID: 1002, GID: 1002}
	// namedACL gives user 1002 read and write through a mask of rw.
	namedACL = acl.ACL{
		{Tag: acl.TagUserObj, ID: acl.UndefinedID, Perm: 6},
		{Tag: acl.TagUser, ID: 1002, Perm: 6},
		{Tag: acl.TagGroupObj, ID: acl.UndefinedID, Perm: 4},
		{Tag: acl.TagMask, ID: acl.UndefinedID, Perm: 6},
		{Tag: acl.TagOther, ID: acl.UndefinedID, Perm: 0},
	}
)

// TestSetACLWritesTheFilesACL: SETACL by the owner puts the ACL on the real
// file (whose mode then shows the mask as the group bits), GETACL reads it
// back, and the kernel then grants the named user access that the mode
// bits alone refuse; a stranger may not change the ACL.
func TestSetACLWritesTheFilesACL(t *testing.T) {
	root := exportDir(t)
	path := filepath.Join(root, "f")
	os.WriteFile(path, []byte("data"), 0o600)
	os.Chown(path, 1001, 1001)
	_, addr := startServer(t, Options{Root: root, Export: trusted})
	c := dialACL(t, addr)
	fh := c.lookup(t, "f")
	ctx := context.Background()

	var res acl.Result
	var attr nfs3.Fattr
	if _, err := c.acl.GetACL(ctx, stranger, &fh, acl.MaskACL|acl.MaskDefault, &res, &attr); err != nil {
		t.Fatalf("GETACL: %v", err)
	}
	if !slices.Equal(res.Access, acl.FromMode(0o600)) || len(res.Default) != 0 {
		t.Fatalf("GETACL of a file without ACL: access %v default %v; want the mode's and none", res.Access, res.Default)
	}
	if granted, _, _ := c.nfs.Access(ctx, stranger, &fh, nfs3.AccessRead, &attr); granted != 0 {
		t.Fatalf("before the ACL, ACCESS granted the stranger %#x", granted)
	}

	set := acl.SetArgs{Mask: acl.MaskACL, Access: namedACL}
	if _, err := c.acl.SetACL(ctx, stranger, &fh, &set, 1001, 1001, &attr); !errors.Is(err, nfs3.ErrPerm) {
		t.Fatalf("SETACL by a stranger: %v, want NFS3ERR_PERM", err)
	}
	hasAttr, err := c.acl.SetACL(ctx, owner, &fh, &set, 1001, 1001, &attr)
	if err != nil {
		t.Fatalf("SETACL by the owner: %v", err)
	}
	if got := fileACL(t, path, acl.XattrAccess); !slices.Equal(got, namedACL) {
		t.Fatalf("the file's ACL is %v, want %v", got, namedACL)
	}
	if !hasAttr || attr.Mode&0o777 != 0o660 {
		t.Fatalf("SETACL's attributes: %v, mode %#o; want the mask as the group bits, 0660", hasAttr, attr.Mode)
	}
	if _, err := c.acl.GetACL(ctx, stranger, &fh, acl.MaskACL, &res, &attr); err != nil || !slices.Equal(res.Access, namedACL) {
		t.Fatalf("GETACL after SETACL: %v, %v", res.Access, err)
	}
	if granted, _, _ := c.nfs.Access(ctx, stranger, &fh, nfs3.AccessRead|nfs3.AccessModify, &attr); granted != nfs3.AccessRead|nfs3.AccessModify {
		t.Fatalf("the named user's ACCESS: %#x, want read and modify", granted)
	}

	// An empty access ACL removes it: the file is back to its mode.
	set.Access = acl.FromMode(0o600)
	if _, err := c.acl.SetACL(ctx, owner, &fh, &set, 1001, 1001, &attr); err != nil {
		t.Fatalf("SETACL of the minimal ACL: %v", err)
	}
	if got := fileACL(t, path, acl.XattrAccess); got != nil {
		t.Fatalf("after a minimal ACL the file still has %v", got)
	}
}

// TestDefaultACLIsInherited: a default ACL set with SETACL on a directory
// comes back with GETACL and is inherited by a file created through NFS.
func TestDefaultACLIsInherited(t *testing.T) {
	root := exportDir(t)
	os.Mkdir(filepath.Join(root, "d"), 0o755)
	_, addr := startServer(t, Options{Root: root, Export: trusted})
	c := dialACL(t, addr)
	dir := c.lookup(t, "d")
	ctx := context.Background()
	set := acl.SetArgs{Mask: acl.MaskACL | acl.MaskDefault, Access: acl.FromMode(0o755), Default: namedACL}
	var attr nfs3.Fattr
	if _, err := c.acl.SetACL(ctx, &sunrpc.Cred{}, &dir, &set, 0, 0, &attr); err != nil {
		t.Fatalf("SETACL: %v", err)
	}
	var res acl.Result
	if _, err := c.acl.GetACL(ctx, &sunrpc.Cred{}, &dir, acl.MaskACL|acl.MaskDefault, &res, &attr); err != nil ||
		!slices.Equal(res.Default, namedACL) || !slices.Equal(res.Access, acl.FromMode(0o755)) {
		t.Fatalf("GETACL of the directory: access %v default %v, %v", res.Access, res.Default, err)
	}
	var cr nfs3.CreateResult
	sattr := nfs3.Sattr{SetMode: true, Mode: 0o666}
	if err := c.nfs.Create(ctx, &sunrpc.Cred{}, &dir, "f", nfs3.Unchecked, &sattr, nfs3.Verf{}, &cr); err != nil {
		t.Fatalf("CREATE: %v", err)
	}
	if got := fileACL(t, filepath.Join(root, "d", "f"), acl.XattrAccess); !slices.Equal(got, namedACL) {
		t.Fatalf("the new file's ACL is %v, want the default %v", got, namedACL)
	}
	// A directory made in it inherits the default ACL both as its access
	// ACL (within the mode asked for) and as its own default.
	sattr.Mode = 0o777
	if err := c.nfs.Mkdir(ctx, &sunrpc.Cred{}, &dir, "sub", &sattr, &cr); err != nil {
		t.Fatalf("MKDIR: %v", err)
	}
	sub := filepath.Join(root, "d", "sub")
	if got := fileACL(t, sub, acl.XattrAccess); !slices.Equal(got, namedACL) {
		t.Fatalf("the new directory's ACL is %v, want %v", got, namedACL)
	}
	if got := fileACL(t, sub, acl.XattrDefault); !slices.Equal(got, namedACL) {
		t.Fatalf("the new directory's default ACL is %v, want %v", got, namedACL)
	}
	// The directory's default ACL goes with an empty one.
	set.Default = nil
	if _, err := c.acl.SetACL(ctx, &sunrpc.Cred{}, &dir, &set, 0, 0, &attr); err != nil {
		t.Fatalf("SETACL removing the default: %v", err)
	}
	if got := fileACL(t, filepath.Join(root, "d"), acl.XattrDefault); got != nil {
		t.Fatalf("the default ACL is still %v", got)
	}
}

// TestSetACLReadOnly: a read-only export refuses SETACL.
func TestSetACLReadOnly(t *testing.T) {
	root := exportDir(t)
	os.WriteFile(filepath.Join(root, "f"), nil, 0o644)
	_, addr := startServer(t, Options{Root: root, Export: trusted, ReadOnly: true})
	c := dialACL(t, addr)
	fh := c.lookup(t, "f")
	set := acl.SetArgs{Mask: acl.MaskACL, Access: namedACL}
	var attr nfs3.Fattr
	if _, err := c.acl.SetACL(context.Background(), &sunrpc.Cred{}, &fh, &set, 0, 0, &attr); !errors.Is(err, nfs3.ErrROFS) {
		t.Fatalf("SETACL on a read-only export: %v, want NFS3ERR_ROFS", err)
	}
}

// TestSetACLRootSquashed: on an export that squashes root (the default),
// root's SETACL on a file of root's is refused, as its other changes are.
func TestSetACLRootSquashed(t *testing.T) {
	root := exportDir(t)
	os.WriteFile(filepath.Join(root, "f"), nil, 0o644)
	_, addr := startServer(t, Options{Root: root, Export: Export{Insecure: true}})
	c := dialACL(t, addr)
	fh := c.lookup(t, "f")
	set := acl.SetArgs{Mask: acl.MaskACL, Access: namedACL}
	var attr nfs3.Fattr
	if _, err := c.acl.SetACL(context.Background(), &sunrpc.Cred{}, &fh, &set, 0, 0, &attr); !errors.Is(err, nfs3.ErrPerm) {
		t.Fatalf("squashed root's SETACL: %v, want NFS3ERR_PERM", err)
	}
	if got := fileACL(t, filepath.Join(root, "f"), acl.XattrAccess); got != nil {
		t.Fatalf("the file has the ACL %v", got)
	}
}
