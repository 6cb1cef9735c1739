package server

import (
	"bufio"
	"net"
	"os"
	"syscall"
	"testing"
	"time"
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
	w := &xdrWriter{}
	w.u32(xid)
	w.u32(msgCall)
	w.u32(rpcVersion)
	w.u32(prog)
	w.u32(vers)
	w.u32(proc)
	if cr == nil {
		w.u32(authNone)
		w.u32(0)
	} else {
		body := &xdrWriter{}
		body.u32(12345)
		body.opaque([]byte("testhost"))
		body.u32(cr.uid)
		body.u32(cr.gid)
		body.u32(uint32(len(cr.groups)))
		for _, g := range cr.groups {
			body.u32(g)
		}
		w.u32(authSys)
		w.opaque(body.b)
	}
	w.u32(authNone)
	w.u32(0)
	w.b = append(w.b, args...)
	return w.b
}

// sendRecord writes one record-marked message.
func (c *testClient) sendRecord(msg []byte) {
	c.t.Helper()
	rec := make([]byte, 4+len(msg))
	putMark(rec, len(msg))
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
	r := xdrReader{b: rec}
	var rep rpcReply
	rep.xid = r.u32()
	if r.u32() != msgReply {
		c.t.Fatalf("not a reply")
	}
	rep.replyStat = r.u32()
	if rep.replyStat == msgAccepted {
		r.u32()
		r.opaque(maxAuthBytes)
	}
	rep.stat = r.u32()
	if r.err != nil {
		c.t.Fatalf("short reply: %x", rec)
	}
	rep.body = rec[r.off:]
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
func (c *testClient) nfs(proc uint32, cr *sysCred, args *xdrWriter) *xdrReader {
	c.t.Helper()
	rep := c.call(progNFS, versNFS, proc, cr, args.b)
	if rep.replyStat != msgAccepted || rep.stat != acceptSuccess {
		c.t.Fatalf("NFS proc %d: reply_stat %d stat %d", proc, rep.replyStat, rep.stat)
	}
	return &xdrReader{b: rep.body}
}

func args() *xdrWriter { return &xdrWriter{} }

type fattr struct {
	typ, mode, nlink, uid, gid uint32
	size, fileid               uint64
	atime, mtime, ctime        [2]uint32
}

func readFattr(r *xdrReader) fattr {
	var a fattr
	a.typ = r.u32()
	a.mode = r.u32()
	a.nlink = r.u32()
	a.uid = r.u32()
	a.gid = r.u32()
	a.size = r.u64()
	r.u64() // used
	r.u64() // rdev
	r.u64() // fsid
	a.fileid = r.u64()
	a.atime = [2]uint32{r.u32(), r.u32()}
	a.mtime = [2]uint32{r.u32(), r.u32()}
	a.ctime = [2]uint32{r.u32(), r.u32()}
	return a
}

func readPostOpAttr(r *xdrReader) *fattr {
	if r.u32() == 0 {
		return nil
	}
	a := readFattr(r)
	return &a
}

func skipWcc(r *xdrReader) {
	if r.u32() != 0 {
		r.fixed(24)
	}
	readPostOpAttr(r)
}

func (c *testClient) mount(path string) (uint32, []byte) {
	c.t.Helper()
	a := args()
	a.opaque([]byte(path))
	rep := c.call(progMount, versMount, mountMnt, asRoot, a.b)
	r := &xdrReader{b: rep.body}
	st := r.u32()
	if st != 0 {
		return st, nil
	}
	fh := r.opaque(maxFH)
	n := r.u32()
	if n != 1 || r.u32() != authSys {
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

func dirop(fh []byte, name string) *xdrWriter {
	a := args()
	a.opaque(fh)
	a.opaque([]byte(name))
	return a
}

func (c *testClient) lookup(cr *sysCred, dir []byte, name string) (uint32, []byte) {
	c.t.Helper()
	r := c.nfs(nfsLookup, cr, dirop(dir, name))
	if st := r.u32(); st != nfs3OK {
		return st, nil
	}
	return nfs3OK, r.opaque(maxFH)
}

func (c *testClient) getattr(cr *sysCred, fh []byte) (uint32, fattr) {
	c.t.Helper()
	a := args()
	a.opaque(fh)
	r := c.nfs(nfsGetattr, cr, a)
	if st := r.u32(); st != nfs3OK {
		return st, fattr{}
	}
	return nfs3OK, readFattr(r)
}

func writeSattr(a *xdrWriter, mode int64) {
	if mode >= 0 {
		a.u32(1)
		a.u32(uint32(mode))
	} else {
		a.u32(0)
	}
	a.u32(0) // uid
	a.u32(0) // gid
	a.u32(0) // size
	a.u32(0) // atime
	a.u32(0) // mtime
}

func (c *testClient) create(cr *sysCred, dir []byte, name string, how uint32, mode int64) (uint32, []byte) {
	c.t.Helper()
	a := dirop(dir, name)
	a.u32(how)
	if how == createExclusive {
		a.u64(42)
	} else {
		writeSattr(a, mode)
	}
	r := c.nfs(nfsCreate, cr, a)
	if st := r.u32(); st != nfs3OK {
		return st, nil
	}
	if r.u32() == 0 {
		c.t.Fatalf("CREATE: no handle")
	}
	return nfs3OK, r.opaque(maxFH)
}

func (c *testClient) mkdir(cr *sysCred, dir []byte, name string, mode int64) (uint32, []byte) {
	c.t.Helper()
	a := dirop(dir, name)
	writeSattr(a, mode)
	r := c.nfs(nfsMkdir, cr, a)
	if st := r.u32(); st != nfs3OK {
		return st, nil
	}
	r.u32()
	return nfs3OK, r.opaque(maxFH)
}

type writeRes struct {
	status, count, committed uint32
	verf                     []byte
}

func (c *testClient) write(cr *sysCred, fh []byte, off uint64, data []byte, stable uint32) writeRes {
	c.t.Helper()
	a := args()
	a.opaque(fh)
	a.u64(off)
	a.u32(uint32(len(data)))
	a.u32(stable)
	a.opaque(data)
	r := c.nfs(nfsWrite, cr, a)
	res := writeRes{status: r.u32()}
	skipWcc(r)
	if res.status == nfs3OK {
		res.count = r.u32()
		res.committed = r.u32()
		res.verf = r.fixed(8)
	}
	return res
}

func (c *testClient) read(cr *sysCred, fh []byte, off uint64, count uint32) (uint32, []byte, bool) {
	c.t.Helper()
	a := args()
	a.opaque(fh)
	a.u64(off)
	a.u32(count)
	r := c.nfs(nfsRead, cr, a)
	st := r.u32()
	readPostOpAttr(r)
	if st != nfs3OK {
		return st, nil, false
	}
	r.u32() // count
	eof := r.u32() != 0
	return st, r.opaque(1 << 30), eof
}

func (c *testClient) commit(cr *sysCred, fh []byte) (uint32, []byte) {
	c.t.Helper()
	a := args()
	a.opaque(fh)
	a.u64(0)
	a.u32(0)
	r := c.nfs(nfsCommit, cr, a)
	st := r.u32()
	skipWcc(r)
	if st != nfs3OK {
		return st, nil
	}
	return st, r.fixed(8)
}

func (c *testClient) access(cr *sysCred, fh []byte, mask uint32) (uint32, uint32) {
	c.t.Helper()
	a := args()
	a.opaque(fh)
	a.u32(mask)
	r := c.nfs(nfsAccess, cr, a)
	st := r.u32()
	readPostOpAttr(r)
	if st != nfs3OK {
		return st, 0
	}
	return st, r.u32()
}

// status makes a call whose result starts with an nfsstat3 and returns it.
func (c *testClient) status(proc uint32, cr *sysCred, a *xdrWriter) uint32 {
	c.t.Helper()
	return c.nfs(proc, cr, a).u32()
}

func fhArg(fh []byte) *xdrWriter {
	a := args()
	a.opaque(fh)
	return a
}

type dirEntry struct {
	fileid uint64
	name   string
	cookie uint64
	attr   *fattr
	fh     []byte
}

func (c *testClient) readdirplus(cr *sysCred, dir []byte, cookie uint64, verf []byte, dircount, maxcount uint32) (uint32, []dirEntry, []byte, bool) {
	c.t.Helper()
	a := args()
	a.opaque(dir)
	a.u64(cookie)
	a.b = append(a.b, verf...)
	a.u32(dircount)
	a.u32(maxcount)
	r := c.nfs(nfsReaddirplus, cr, a)
	st := r.u32()
	readPostOpAttr(r)
	if st != nfs3OK {
		return st, nil, nil, false
	}
	newVerf := r.fixed(8)
	var ents []dirEntry
	for r.u32() != 0 {
		var e dirEntry
		e.fileid = r.u64()
		e.name = string(r.opaque(maxName))
		e.cookie = r.u64()
		e.attr = readPostOpAttr(r)
		if r.u32() != 0 {
			e.fh = r.opaque(maxFH)
		}
		ents = append(ents, e)
	}
	eof := r.u32() != 0
	if r.err != nil {
		c.t.Fatalf("READDIRPLUS reply: %v", r.err)
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
