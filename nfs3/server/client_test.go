package server

import (
	"bufio"
	"io"
	"math/rand"
	"net"
	"os"
	"syscall"
	"testing"
	"time"

	"github.com/rdmafs/rdmafs/nfs3"
	"github.com/rdmafs/rdmafs/sunrpc"
	"github.com/rdmafs/rdmafs/sunrpc/xdr"
)

// This file is a tiny ONC RPC / NFSv3 client for the tests: just enough XDR
// to drive the server over a real TCP connection.

type sysCred struct {
	uid, gid uint32
	groups   []uint32
}

var (
	asRoot = &sysCred{}
	asNone *sysCred // AUTH_NONE
)

func asUser(uid uint32) *sysCred { return &sysCred{uid: uid, gid: uid} }

// trusted is the export of the tests that are not about its security: the
// test client connects from an unprivileged port and calls as root to act
// with root's rights. The security tests use the defaults.
var trusted = Export{Insecure: true, NoRootSquash: true}

// readRecord reads one record-marked message.
func readRecord(r io.Reader, buf []byte) ([]byte, error) {
	rr := sunrpc.RecordReader{R: r, MaxRecord: maxRecord}
	return rr.Read(buf)
}

type rpcReply struct {
	xid, replyStat, stat uint32 // stat: accept_stat or reject_stat
	body                 []byte // after stat
}

type testClient struct {
	t    testing.TB
	conn net.Conn
	r    *bufio.Reader
	xid  uint32
}

func dialServer(t testing.TB, addr string) *testClient {
	t.Helper()
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatalf("dial: %v", err)
	}
	t.Cleanup(func() { conn.Close() })
	return &testClient{t: t, conn: conn, r: bufio.NewReader(conn), xid: 0x1000}
}

// dialReserved connects from a reserved source port (below 1024), as a root
// client with resvport does.
func dialReserved(t testing.TB, addr string) *testClient {
	t.Helper()
	var lastErr error
	for try := 0; try < 50; try++ {
		port := 600 + rand.Intn(424)
		d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: port}}
		conn, err := d.Dial("tcp", addr)
		if err != nil {
			lastErr = err
			continue
		}
		t.Cleanup(func() { conn.Close() })
		return &testClient{t: t, conn: conn, r: bufio.NewReader(conn), xid: 0x1000}
	}
	t.Fatalf("dial from a reserved port: %v", lastErr)
	return nil
}

// startServer serves root on a fresh loopback listener.
func startServer(t testing.TB, opts Options) (*Server, string) {
	t.Helper()
	if opts.Logf == nil {
		opts.Logf = t.Logf
	}
	srv, err := New(opts)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	addr := serveOn(t, srv)
	t.Cleanup(func() { srv.Close() })
	return srv, addr
}

func serveOn(t testing.TB, srv *Server) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("listen: %v", err)
	}
	go srv.Serve(l)
	return l.Addr().String()
}

// exportDir makes a temporary export root anyone may write in, so calls
// made as unprivileged users can create files.
func exportDir(t testing.TB) string {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("the server needs root")
	}
	dir := t.TempDir()
	if err := os.Chmod(dir, 0o777); err != nil {
		t.Fatal(err)
	}
	return dir
}

func encodeCall(xid, prog, vers, proc uint32, cr *sysCred, args []byte) []byte {
	w := &xdr.Encoder{}
	w.Uint32(xid)
	w.Uint32(sunrpc.MsgCall)
	w.Uint32(sunrpc.RPCVersion)
	w.Uint32(prog)
	w.Uint32(vers)
	w.Uint32(proc)
	if cr == nil {
		w.Uint32(uint32(sunrpc.AuthNone))
		w.Uint32(0)
	} else {
		body := &xdr.Encoder{}
		body.Uint32(12345)
		body.Opaque([]byte("testhost"))
		body.Uint32(cr.uid)
		body.Uint32(cr.gid)
		body.Uint32(uint32(len(cr.groups)))
		for _, g := range cr.groups {
			body.Uint32(g)
		}
		w.Uint32(uint32(sunrpc.AuthSys))
		w.Opaque(body.Buf)
	}
	w.Uint32(uint32(sunrpc.AuthNone))
	w.Uint32(0)
	w.Buf = append(w.Buf, args...)
	return w.Buf
}

// sendRecord writes one record-marked message.
func (c *testClient) sendRecord(msg []byte) {
	c.t.Helper()
	rec := make([]byte, 4+len(msg))
	sunrpc.PutRecordMark(rec, len(msg))
	copy(rec[4:], msg)
	if _, err := c.conn.Write(rec); err != nil {
		c.t.Fatalf("write: %v", err)
	}
}

func (c *testClient) send(prog, vers, proc uint32, cr *sysCred, args []byte) uint32 {
	c.xid++
	c.sendRecord(encodeCall(c.xid, prog, vers, proc, cr, args))
	return c.xid
}

func (c *testClient) readReply() (rpcReply, error) {
	c.conn.SetReadDeadline(time.Now().Add(30 * time.Second))
	rec, err := readRecord(c.r, nil)
	if err != nil {
		return rpcReply{}, err
	}
	r := xdr.NewDecoder(rec)
	var rep rpcReply
	rep.xid = r.Uint32()
	if r.Uint32() != sunrpc.MsgReply {
		c.t.Fatalf("not a reply")
	}
	rep.replyStat = r.Uint32()
	if rep.replyStat == sunrpc.MsgAccepted {
		r.Uint32()
		r.Opaque(sunrpc.MaxAuthBody)
	}
	rep.stat = r.Uint32()
	if r.Err() != nil {
		c.t.Fatalf("short reply: %x", rec)
	}
	rep.body = rec[r.Offset():]
	return rep, nil
}

func (c *testClient) call(prog, vers, proc uint32, cr *sysCred, args []byte) rpcReply {
	c.t.Helper()
	xid := c.send(prog, vers, proc, cr, args)
	rep, err := c.readReply()
	if err != nil {
		c.t.Fatalf("reply to proc %d: %v", proc, err)
	}
	if rep.xid != xid {
		c.t.Fatalf("reply xid %#x, want %#x", rep.xid, xid)
	}
	return rep
}

// nfs makes an NFSv3 call that must be accepted and returns its result
// positioned at the nfsstat3.
func (c *testClient) nfs(proc uint32, cr *sysCred, args *xdr.Encoder) *xdr.Decoder {
	c.t.Helper()
	rep := c.call(nfs3.Program, nfs3.Version, proc, cr, args.Buf)
	if rep.replyStat != sunrpc.MsgAccepted || rep.stat != uint32(sunrpc.Success) {
		c.t.Fatalf("NFS proc %d: reply_stat %d stat %d", proc, rep.replyStat, rep.stat)
	}
	return decoder(rep.body)
}

func args() *xdr.Encoder { return &xdr.Encoder{} }

type fattr struct {
	typ                   nfs3.FileType
	mode, nlink, uid, gid uint32
	size, fileid          uint64
	atime, mtime, ctime   [2]uint32
}

func readFattr(r *xdr.Decoder) fattr {
	var a fattr
	a.typ = nfs3.FileType(r.Uint32())
	a.mode = r.Uint32()
	a.nlink = r.Uint32()
	a.uid = r.Uint32()
	a.gid = r.Uint32()
	a.size = r.Uint64()
	r.Uint64() // used
	r.Uint64() // rdev
	r.Uint64() // fsid
	a.fileid = r.Uint64()
	a.atime = [2]uint32{r.Uint32(), r.Uint32()}
	a.mtime = [2]uint32{r.Uint32(), r.Uint32()}
	a.ctime = [2]uint32{r.Uint32(), r.Uint32()}
	return a
}

func readPostOpAttr(r *xdr.Decoder) *fattr {
	if r.Uint32() == 0 {
		return nil
	}
	a := readFattr(r)
	return &a
}

func skipWcc(r *xdr.Decoder) {
	if r.Uint32() != 0 {
		r.Fixed(24)
	}
	readPostOpAttr(r)
}

func (c *testClient) mount(path string) (nfs3.MountStatus, []byte) {
	c.t.Helper()
	a := args()
	a.Opaque([]byte(path))
	rep := c.call(nfs3.MountProgram, nfs3.MountVersion, nfs3.MountProcMnt, asRoot, a.Buf)
	r := decoder(rep.body)
	st := nfs3.MountStatus(r.Uint32())
	if st != nfs3.MountOK {
		return st, nil
	}
	fh := r.Opaque(nfs3.FHSize)
	n := r.Uint32()
	if n != 1 || r.Uint32() != uint32(sunrpc.AuthSys) {
		c.t.Fatalf("MNT flavors: want [AUTH_SYS]")
	}
	return st, fh
}

func (c *testClient) root() []byte {
	c.t.Helper()
	st, fh := c.mount("/")
	if st != 0 {
		c.t.Fatalf("MNT /: %d", st)
	}
	return fh
}

func dirop(fh []byte, name string) *xdr.Encoder {
	a := args()
	a.Opaque(fh)
	a.Opaque([]byte(name))
	return a
}

func (c *testClient) lookup(cr *sysCred, dir []byte, name string) (nfs3.Status, []byte) {
	c.t.Helper()
	r := c.nfs(nfs3.ProcLookup, cr, dirop(dir, name))
	if st := getStatus(r); st != nfs3.OK {
		return st, nil
	}
	return nfs3.OK, r.Opaque(nfs3.FHSize)
}

func (c *testClient) getattr(cr *sysCred, fh []byte) (nfs3.Status, fattr) {
	c.t.Helper()
	a := args()
	a.Opaque(fh)
	r := c.nfs(nfs3.ProcGetattr, cr, a)
	if st := getStatus(r); st != nfs3.OK {
		return st, fattr{}
	}
	return nfs3.OK, readFattr(r)
}

func writeSattr(a *xdr.Encoder, mode int64) {
	if mode >= 0 {
		a.Uint32(1)
		a.Uint32(uint32(mode))
	} else {
		a.Uint32(0)
	}
	a.Uint32(0) // uid
	a.Uint32(0) // gid
	a.Uint32(0) // size
	a.Uint32(0) // atime
	a.Uint32(0) // mtime
}

func (c *testClient) create(cr *sysCred, dir []byte, name string, how nfs3.CreateMode, mode int64) (nfs3.Status, []byte) {
	c.t.Helper()
	a := dirop(dir, name)
	a.Uint32(uint32(how))
	if how == nfs3.Exclusive {
		a.Uint64(42)
	} else {
		writeSattr(a, mode)
	}
	r := c.nfs(nfs3.ProcCreate, cr, a)
	if st := getStatus(r); st != nfs3.OK {
		return st, nil
	}
	if r.Uint32() == 0 {
		c.t.Fatalf("CREATE: no handle")
	}
	return nfs3.OK, r.Opaque(nfs3.FHSize)
}

func (c *testClient) mkdir(cr *sysCred, dir []byte, name string, mode int64) (nfs3.Status, []byte) {
	c.t.Helper()
	a := dirop(dir, name)
	writeSattr(a, mode)
	r := c.nfs(nfs3.ProcMkdir, cr, a)
	if st := getStatus(r); st != nfs3.OK {
		return st, nil
	}
	r.Uint32()
	return nfs3.OK, r.Opaque(nfs3.FHSize)
}

type writeRes struct {
	status    nfs3.Status
	count     uint32
	committed nfs3.StableHow
	verf      []byte
}

func (c *testClient) write(cr *sysCred, fh []byte, off uint64, data []byte, stable nfs3.StableHow) writeRes {
	c.t.Helper()
	a := args()
	a.Opaque(fh)
	a.Uint64(off)
	a.Uint32(uint32(len(data)))
	a.Uint32(uint32(stable))
	a.Opaque(data)
	r := c.nfs(nfs3.ProcWrite, cr, a)
	res := writeRes{status: getStatus(r)}
	skipWcc(r)
	if res.status == nfs3.OK {
		res.count = r.Uint32()
		res.committed = nfs3.StableHow(r.Uint32())
		res.verf = r.Fixed(8)
	}
	return res
}

func (c *testClient) read(cr *sysCred, fh []byte, off uint64, count uint32) (nfs3.Status, []byte, bool) {
	c.t.Helper()
	a := args()
	a.Opaque(fh)
	a.Uint64(off)
	a.Uint32(count)
	r := c.nfs(nfs3.ProcRead, cr, a)
	st := getStatus(r)
	readPostOpAttr(r)
	if st != nfs3.OK {
		return st, nil, false
	}
	r.Uint32() // count
	eof := r.Uint32() != 0
	return st, r.Opaque(1 << 30), eof
}

func (c *testClient) commit(cr *sysCred, fh []byte) (nfs3.Status, []byte) {
	c.t.Helper()
	a := args()
	a.Opaque(fh)
	a.Uint64(0)
	a.Uint32(0)
	r := c.nfs(nfs3.ProcCommit, cr, a)
	st := getStatus(r)
	skipWcc(r)
	if st != nfs3.OK {
		return st, nil
	}
	return st, r.Fixed(8)
}

func (c *testClient) access(cr *sysCred, fh []byte, mask uint32) (nfs3.Status, uint32) {
	c.t.Helper()
	a := args()
	a.Opaque(fh)
	a.Uint32(mask)
	r := c.nfs(nfs3.ProcAccess, cr, a)
	st := getStatus(r)
	readPostOpAttr(r)
	if st != nfs3.OK {
		return st, 0
	}
	return st, r.Uint32()
}

// status makes a call whose result starts with an nfsstat3 and returns it.
func (c *testClient) status(proc uint32, cr *sysCred, a *xdr.Encoder) nfs3.Status {
	c.t.Helper()
	return getStatus(c.nfs(proc, cr, a))
}

// getStatus decodes an nfsstat3.
func getStatus(r *xdr.Decoder) nfs3.Status { return nfs3.Status(r.Uint32()) }

func fhArg(fh []byte) *xdr.Encoder {
	a := args()
	a.Opaque(fh)
	return a
}

type dirEntry struct {
	fileid uint64
	name   string
	cookie uint64
	attr   *fattr
	fh     []byte
}

func (c *testClient) readdirplus(cr *sysCred, dir []byte, cookie uint64, verf []byte, dircount, maxcount uint32) (nfs3.Status, []dirEntry, []byte, bool) {
	c.t.Helper()
	a := args()
	a.Opaque(dir)
	a.Uint64(cookie)
	a.Buf = append(a.Buf, verf...)
	a.Uint32(dircount)
	a.Uint32(maxcount)
	r := c.nfs(nfs3.ProcReaddirplus, cr, a)
	st := getStatus(r)
	readPostOpAttr(r)
	if st != nfs3.OK {
		return st, nil, nil, false
	}
	newVerf := r.Fixed(8)
	var ents []dirEntry
	for r.Uint32() != 0 {
		var e dirEntry
		e.fileid = r.Uint64()
		e.name = string(r.Opaque(maxName))
		e.cookie = r.Uint64()
		e.attr = readPostOpAttr(r)
		if r.Uint32() != 0 {
			e.fh = r.Opaque(nfs3.FHSize)
		}
		ents = append(ents, e)
	}
	eof := r.Uint32() != 0
	if r.Err() != nil {
		c.t.Fatalf("READDIRPLUS reply: %v", r.Err())
	}
	return st, ents, newVerf, eof
}

// ownerOf is the on-disk owner of a path.
func ownerOf(t testing.TB, path string) (uint32, uint32) {
	t.Helper()
	fi, err := os.Lstat(path)
	if err != nil {
		t.Fatal(err)
	}
	st := fi.Sys().(*syscall.Stat_t)
	return st.Uid, st.Gid
}

// decoder returns a decoder of b that callers share by pointer.
func decoder(b []byte) *xdr.Decoder {
	d := xdr.NewDecoder(b)
	return &d
}

func (c *testClient) mustLookup(dir []byte, name string) []byte {
	c.t.Helper()
	st, fh := c.lookup(asRoot, dir, name)
	if st != nfs3.OK {
		c.t.Fatalf("LOOKUP %s: %d", name, st)
	}
	return fh
}
