package fs

import (
	"context"
	"net"
	"os"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/hanwen/go-fuse/v2/fuse"

	"github.com/rdmafs/rdmafs/nfs3"
	"github.com/rdmafs/rdmafs/nfs3/acl"
	"github.com/rdmafs/rdmafs/nfs3/server"
	"github.com/rdmafs/rdmafs/sunrpc"
)

// The tests of this package run the file system against the in-process
// server of `rdmafs serve` over loopback TCP, through go-fuse's node bridge
// but without a kernel mount: a test makes the FUSE requests the kernel
// would make, as the caller it chooses, and looks at the replies and at the
// exported directory.

// harness is one file system over one server.
type harness struct {
	t      *testing.T
	dir    string // the exported directory, as the server sees it
	fs     *FS
	raw    fuse.RawFileSystem
	caller fuse.Caller
}

// harnessConfig changes what newHarness sets up.
type harnessConfig struct {
	opts Options
	// wrap, if set, stands between the client and the TCP transport: a
	// test can make the server misbehave by changing calls and replies.
	wrap func(sunrpc.Transport) sunrpc.Transport
	// acl serves POSIX ACLs with NFSACL on the NFS transport.
	acl bool
	// rpc, if set, changes the RPC client's call policy (soft, with 5 s
	// timeouts, by default).
	rpc func(*sunrpc.Config)
}

const rootNode = 1 // the FUSE node id of the root directory

func newHarness(t *testing.T, cfg harnessConfig) *harness {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("the in-process NFS server switches credentials per call and needs root")
	}
	dir := t.TempDir()
	os.Chmod(dir, 0o777)
	// The harness connects from an ordinary port and works as root too.
	srv, err := server.New(server.Options{Root: dir, Export: server.Export{Insecure: true, NoRootSquash: true}, Logf: t.Logf})
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	port := ln.Addr().(*net.TCPAddr).Port

	ctx := context.Background()
	auth := sunrpc.Auth{Flavor: sunrpc.AuthSys, Machine: "fs-test"}
	mc, err := nfs3.DialMount(ctx, nfs3.DialConfig{Host: "127.0.0.1", Port: port, Auth: auth, Timeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer mc.Close()
	root, _, err := mc.Mnt(ctx, nil, "/")
	if err != nil {
		t.Fatal(err)
	}
	var tr sunrpc.Transport = sunrpc.NewTCP(sunrpc.TCPConfig{Addr: ln.Addr().String()})
	if cfg.wrap != nil {
		tr = cfg.wrap(tr)
	}
	rpcCfg := sunrpc.Config{
		Prog: nfs3.Program, Vers: nfs3.Version, Auth: auth,
		Timeout: 5 * time.Second, Retrans: 2, Soft: true, ProcNames: nfs3.ProcNames,
	}
	if cfg.rpc != nil {
		cfg.rpc(&rpcCfg)
	}
	rpc := sunrpc.NewClient(tr, rpcCfg)
	t.Cleanup(func() { rpc.Close() })
	client := nfs3.NewClient(rpc, nfs3.ClientConfig{})
	var rootAttr nfs3.Fattr
	if err := client.Getattr(ctx, nil, &root, &rootAttr); err != nil {
		t.Fatal(err)
	}
	opts := cfg.opts
	if opts.ACRegMax == 0 && opts.ACDirMax == 0 {
		opts.ACRegMin, opts.ACRegMax = 3*time.Second, 60*time.Second
		opts.ACDirMin, opts.ACDirMax = 30*time.Second, 60*time.Second
		opts.LookupPositive, opts.LookupNegative = true, true
	}
	var aclClient *nfs3.ACLClient
	if cfg.acl {
		aclClient = nfs3.NewACLClient(rpc.Sibling(sunrpc.Config{
			Prog: acl.Program, Vers: acl.Version, Auth: auth,
			Timeout: 5 * time.Second, Retrans: 2, Soft: true, ProcNames: acl.ProcNames,
		}), nfs3.ClientConfig{})
	}
	f := New(Config{Client: client, ACL: aclClient, Root: root, RootAttr: rootAttr, Options: opts, Logf: t.Logf})
	raw := f.nodeFS(f.MountOptions())
	return &harness{t: t, dir: dir, fs: f, raw: raw, caller: fuse.Caller{Pid: uint32(os.Getpid())}}
}

// as returns the harness acting as uid and gid (and the test's process,
// whose supplementary groups the client reads from /proc).
func (h *harness) as(uid, gid uint32) *harness {
	c := *h
	c.caller.Owner = fuse.Owner{Uid: uid, Gid: gid}
	return &c
}

func (h *harness) header(node uint64) fuse.InHeader {
	return fuse.InHeader{NodeId: node, Caller: h.caller}
}

// harnessUmask is the umask the harness's creates bring, as the kernel's
// bring the caller's.
const harnessUmask = 0o022

// ctx is the context of a request of the harness's caller.
func (h *harness) ctx() context.Context {
	return &fuse.Context{Caller: h.caller, Cancel: make(chan struct{})}
}

func errnoOf(st fuse.Status) syscall.Errno { return syscall.Errno(st) }

func (h *harness) lookup(parent uint64, name string) (uint64, fuse.Attr, syscall.Errno) {
	var out fuse.EntryOut
	hd := h.header(parent)
	st := h.raw.Lookup(nil, &hd, name, &out)
	if st.Ok() && out.NodeId == 0 {
		// A negative entry, which the kernel caches: "no such name".
		return 0, out.Attr, syscall.ENOENT
	}
	return out.NodeId, out.Attr, errnoOf(st)
}

func (h *harness) mustLookup(parent uint64, name string) uint64 {
	h.t.Helper()
	id, _, en := h.lookup(parent, name)
	if en != 0 {
		h.t.Fatalf("lookup %s: %v", name, en)
	}
	return id
}

func (h *harness) create(parent uint64, name string, flags, mode uint32) (node, fh uint64, en syscall.Errno) {
	in := fuse.CreateIn{InHeader: h.header(parent), Flags: flags, Mode: mode, Umask: harnessUmask}
	var out fuse.CreateOut
	st := h.raw.Create(make(chan struct{}), &in, name, &out)
	return out.NodeId, out.Fh, errnoOf(st)
}

func (h *harness) mustCreate(parent uint64, name string, mode uint32) (node, fh uint64) {
	h.t.Helper()
	node, fh, en := h.create(parent, name, syscall.O_RDWR, mode)
	if en != 0 {
		h.t.Fatalf("create %s: %v", name, en)
	}
	return node, fh
}

func (h *harness) open(node uint64, flags uint32) (fh uint64, openFlags uint32, en syscall.Errno) {
	in := fuse.OpenIn{InHeader: h.header(node), Flags: flags}
	var out fuse.OpenOut
	st := h.raw.Open(nil, &in, &out)
	return out.Fh, out.OpenFlags, errnoOf(st)
}

func (h *harness) read(node, fh uint64, off int64, n int) ([]byte, syscall.Errno) {
	in := fuse.ReadIn{InHeader: h.header(node), Fh: fh, Offset: uint64(off), Size: uint32(n)}
	buf := make([]byte, n)
	res, st := h.raw.Read(nil, &in, buf)
	if !st.Ok() {
		return nil, errnoOf(st)
	}
	data, st := res.Bytes(buf)
	data = append([]byte(nil), data...)
	res.Done()
	return data, errnoOf(st)
}

func (h *harness) write(node, fh uint64, off int64, data []byte) syscall.Errno {
	in := fuse.WriteIn{InHeader: h.header(node), Fh: fh, Offset: uint64(off), Size: uint32(len(data))}
	n, st := h.raw.Write(nil, &in, data)
	if st.Ok() && int(n) != len(data) {
		h.t.Errorf("write of %d bytes wrote %d", len(data), n)
	}
	return errnoOf(st)
}

func (h *harness) flush(node, fh uint64) syscall.Errno {
	in := fuse.FlushIn{InHeader: h.header(node), Fh: fh}
	return errnoOf(h.raw.Flush(nil, &in))
}

func (h *harness) release(node, fh uint64) {
	in := fuse.ReleaseIn{InHeader: h.header(node), Fh: fh}
	h.raw.Release(nil, &in)
}

// close is close(2) of the only descriptor of fh: FLUSH, then RELEASE.
func (h *harness) close(node, fh uint64) syscall.Errno {
	en := h.flush(node, fh)
	h.release(node, fh)
	return en
}

func (h *harness) getattr(node uint64) (fuse.Attr, syscall.Errno) {
	in := fuse.GetAttrIn{InHeader: h.header(node)}
	var out fuse.AttrOut
	st := h.raw.GetAttr(nil, &in, &out)
	return out.Attr, errnoOf(st)
}

func (h *harness) setattr(node uint64, in fuse.SetAttrIn) (fuse.Attr, syscall.Errno) {
	in.InHeader = h.header(node)
	var out fuse.AttrOut
	st := h.raw.SetAttr(nil, &in, &out)
	return out.Attr, errnoOf(st)
}

func (h *harness) unlink(parent uint64, name string) syscall.Errno {
	hd := h.header(parent)
	return errnoOf(h.raw.Unlink(nil, &hd, name))
}

func (h *harness) rename(parent uint64, name string, newParent uint64, newName string) syscall.Errno {
	in := fuse.RenameIn{InHeader: h.header(parent), Newdir: newParent}
	return errnoOf(h.raw.Rename(nil, &in, name, newName))
}

func (h *harness) link(node, newParent uint64, name string) syscall.Errno {
	in := fuse.LinkIn{InHeader: h.header(newParent), Oldnodeid: node}
	var out fuse.EntryOut
	return errnoOf(h.raw.Link(nil, &in, name, &out))
}

func (h *harness) mkdir(parent uint64, name string, mode uint32) (uint64, syscall.Errno) {
	in := fuse.MkdirIn{InHeader: h.header(parent), Mode: mode, Umask: harnessUmask}
	var out fuse.EntryOut
	st := h.raw.Mkdir(make(chan struct{}), &in, name, &out)
	return out.NodeId, errnoOf(st)
}

// listRoot lists the root directory as readdir(3) does, through the
// directory handle.
func (h *harness) listRoot() ([]string, syscall.Errno) {
	ctx := h.ctx()
	fh, _, en := h.fs.root.OpendirHandle(ctx, 0)
	if en != 0 {
		return nil, en
	}
	d := fh.(*dirHandle)
	var names []string
	for {
		e, en := d.Readdirent(ctx)
		if en != 0 {
			return names, en
		}
		if e == nil {
			return names, 0
		}
		names = append(names, e.Name)
	}
}

// serverFile returns what the server's directory holds at name.
func (h *harness) serverFile(name string) []byte {
	h.t.Helper()
	data, err := os.ReadFile(h.dir + "/" + name)
	if err != nil {
		h.t.Fatal(err)
	}
	return data
}

// writeServerFile makes a file on the server, behind the client's back.
func (h *harness) writeServerFile(name string, data []byte, mode os.FileMode) {
	h.t.Helper()
	if err := os.WriteFile(h.dir+"/"+name, data, mode); err != nil {
		h.t.Fatal(err)
	}
	if err := os.Chmod(h.dir+"/"+name, mode); err != nil {
		h.t.Fatal(err)
	}
}

func itoa(n int) string { return strconv.Itoa(n) }
