package nfs3

import (
	"bytes"
	"context"
	"errors"
	"syscall"
	"testing"
	"time"

	"github.com/rdmafs/rdmafs/sunrpc"
	"github.com/rdmafs/rdmafs/sunrpc/xdr"
)

// cannedTransport answers every call with the same results, as a server
// whose replies the test writes byte by byte. It records the last call.
type cannedTransport struct {
	body, payload []byte
	head, pay     []byte // the last call's Head and Payload
	replyPayload  int
	msg           []byte
}

func (t *cannedTransport) RoundTrip(ctx context.Context, call *sunrpc.Call) error {
	t.head = append(t.head[:0], call.Head...)
	t.pay = append(t.pay[:0], call.Payload...)
	t.replyPayload = call.ReplyPayload
	e := xdr.Encoder{Buf: t.msg[:0]}
	e.Uint32(call.Xid)
	e.Uint32(1) // REPLY
	e.Uint32(0) // MSG_ACCEPTED
	e.Uint32(0) // verifier
	e.Uint32(0)
	e.Uint32(0) // SUCCESS
	e.Buf = append(e.Buf, t.body...)
	t.msg = e.Buf
	call.Reply = sunrpc.Reply{Msg: e.Buf, Payload: t.payload}
	return nil
}

func (t *cannedTransport) XprtStats() string { return "canned" }
func (t *cannedTransport) Close() error      { return nil }

func newCannedClient(body, payload []byte) (*Client, *cannedTransport) {
	return newCannedClientWith(ClientConfig{}, body, payload)
}

// newCannedClientWith is newCannedClient with a client configuration.
func newCannedClientWith(cfg ClientConfig, body, payload []byte) (*Client, *cannedTransport) {
	t := &cannedTransport{body: body, payload: payload}
	rpc := sunrpc.NewClient(t, sunrpc.Config{Prog: Program, Vers: Version, ProcNames: ProcNames,
		Auth: sunrpc.Auth{Flavor: sunrpc.AuthSys, Machine: "test"}})
	return NewClient(rpc, cfg), t
}

func fattrBytes(e *xdr.Encoder, typ FileType, fileid, size uint64) {
	e.Uint32(uint32(typ))
	e.Uint32(0o644)
	e.Uint32(1)
	e.Uint32(1000)
	e.Uint32(1000)
	e.Uint64(size)
	e.Uint64(size)
	e.Uint32(0)
	e.Uint32(0)
	e.Uint64(7)
	e.Uint64(fileid)
	for i := 0; i < 3; i++ {
		e.Uint32(1700000000)
		e.Uint32(5)
	}
}

var testFH = FH{n: 4, b: [64]byte{1, 2, 3, 4}}

// callArgs returns the arguments of the last call, after the RPC header.
func callArgs(t *testing.T, head []byte) xdr.Decoder {
	t.Helper()
	d := xdr.NewDecoder(head)
	d.Skip(24)
	d.Uint32()
	d.Opaque(400)
	d.Uint32()
	d.Opaque(400)
	if d.Err() != nil {
		t.Fatal(d.Err())
	}
	return d
}

func TestGetattr(t *testing.T) {
	var e xdr.Encoder
	e.Uint32(0)
	fattrBytes(&e, TypeReg, 42, 4096)
	c, tr := newCannedClient(e.Buf, nil)
	var a Fattr
	if err := c.Getattr(context.Background(), nil, &testFH, &a); err != nil {
		t.Fatal(err)
	}
	if a.FileID != 42 || a.Size != 4096 || a.Type != TypeReg || a.Mode != 0o644 || a.Mtime.Sec != 1700000000 {
		t.Fatalf("attrs %+v", a)
	}
	d := callArgs(t, tr.head)
	if fh := d.Opaque(64); !bytes.Equal(fh, testFH.Bytes()) {
		t.Fatalf("handle sent %x", fh)
	}
}

func TestStatusErrno(t *testing.T) {
	for st, want := range map[Status]syscall.Errno{
		ErrNoEnt: syscall.ENOENT, ErrStale: syscall.ESTALE, ErrNotEmpty: syscall.ENOTEMPTY,
		ErrDQuot: syscall.EDQUOT, ErrNoSpc: syscall.ENOSPC, ErrROFS: syscall.EROFS,
		ErrNameTooLong: syscall.ENAMETOOLONG, ErrAcces: syscall.EACCES, ErrPerm: syscall.EPERM,
		ErrExist: syscall.EEXIST, ErrNotDir: syscall.ENOTDIR, ErrIsDir: syscall.EISDIR,
		ErrXDev: syscall.EXDEV, ErrFBig: syscall.EFBIG, ErrMLink: syscall.EMLINK,
		ErrNotSupp: syscall.EOPNOTSUPP, ErrBadHandle: syscall.ESTALE, Status(12345): syscall.EIO,
	} {
		var e xdr.Encoder
		e.Uint32(uint32(st))
		e.Uint32(0) // post_op_attr absent
		c, _ := newCannedClient(e.Buf, nil)
		var a Fattr
		err := c.Getattr(context.Background(), nil, &testFH, &a)
		var got Status
		if !errors.As(err, &got) || got.Errno() != want {
			t.Errorf("status %d: err %v, want errno %v", st, err, want)
		}
	}
}

func TestWriteSendsDataAsPayload(t *testing.T) {
	var e xdr.Encoder
	e.Uint32(0)
	e.Uint32(0) // no pre-op attrs
	e.Uint32(1)
	fattrBytes(&e, TypeReg, 9, 5)
	e.Uint32(5)
	e.Uint32(uint32(Unstable))
	e.Fixed([]byte("verifier"))
	c, tr := newCannedClient(e.Buf, nil)
	var res WriteResult
	if err := c.Write(context.Background(), nil, &testFH, 1<<33, []byte("hello"), Unstable, &res); err != nil {
		t.Fatal(err)
	}
	if res.Count != 5 || res.Committed != Unstable || string(res.Verf[:]) != "verifier" || !res.Wcc.HasAfter || res.Wcc.After.Size != 5 {
		t.Fatalf("result %+v", res)
	}
	if string(tr.pay) != "hello" {
		t.Fatalf("payload %q", tr.pay)
	}
	d := callArgs(t, tr.head)
	d.Opaque(64)
	if off, count, stable, n := d.Uint64(), d.Uint32(), d.Uint32(), d.Uint32(); off != 1<<33 || count != 5 || stable != 0 || n != 5 {
		t.Fatalf("args off %d count %d stable %d len %d", off, count, stable, n)
	}
	if d.Len() != 0 {
		t.Fatalf("%d bytes after the data length: the data must be the payload, not in the head", d.Len())
	}
}

func TestWriteRejectsOvercount(t *testing.T) {
	var e xdr.Encoder
	e.Uint32(0)
	e.Uint32(0)
	e.Uint32(0)
	e.Uint32(6) // more than was sent
	e.Uint32(uint32(FileSync))
	e.Fixed(make([]byte, 8))
	c, _ := newCannedClient(e.Buf, nil)
	var res WriteResult
	if err := c.Write(context.Background(), nil, &testFH, 0, []byte("hello"), Unstable, &res); !errors.Is(err, ErrBadReply) {
		t.Fatalf("err = %v, want ErrBadReply", err)
	}
}

func readReply(count uint32, eof bool, data []byte) []byte {
	var e xdr.Encoder
	e.Uint32(0)
	e.Uint32(1)
	fattrBytes(&e, TypeReg, 3, 100)
	e.Uint32(count)
	e.Bool(eof)
	e.Opaque(data)
	return e.Buf
}

func TestReadInline(t *testing.T) {
	c, tr := newCannedClient(readReply(5, true, []byte("abcde")), nil)
	var res ReadResult
	defer res.Release()
	if err := c.Read(context.Background(), nil, &testFH, 0, 8, &res); err != nil {
		t.Fatal(err)
	}
	if string(res.Data) != "abcde" || !res.EOF || res.Attr.Size != 100 {
		t.Fatalf("data %q eof %v", res.Data, res.EOF)
	}
	if tr.replyPayload != 8 {
		t.Fatalf("ReplyPayload %d, want 8: READ data is DDP-eligible", tr.replyPayload)
	}
}

func TestReadPlacedPayload(t *testing.T) {
	// As RPC-over-RDMA returns it: the length stays in the body, the
	// bytes are in the payload (a write chunk).
	var e xdr.Encoder
	e.Uint32(0)
	e.Uint32(0)
	e.Uint32(4)
	e.Bool(false)
	e.Uint32(4)
	c, _ := newCannedClient(e.Buf, []byte("wxyz"))
	var res ReadResult
	defer res.Release()
	if err := c.Read(context.Background(), nil, &testFH, 0, 4, &res); err != nil {
		t.Fatal(err)
	}
	if string(res.Data) != "wxyz" {
		t.Fatalf("data %q", res.Data)
	}
}

func TestReadRejectsHostileReplies(t *testing.T) {
	for name, body := range map[string][]byte{
		"more than asked":   readReply(9, false, []byte("123456789")),
		"count mismatch":    readReply(3, false, []byte("12345")),
		"truncated":         readReply(5, false, []byte("12345"))[:50],
		"length past end":   append(readReply(0, false, nil)[:len(readReply(0, false, nil))-4], 0x7f, 0, 0, 0),
		"bad type in attrs": func() []byte { b := readReply(1, true, []byte("x")); b[11] = 99; return b }(),
	} {
		c, _ := newCannedClient(body, nil)
		var res ReadResult
		err := c.Read(context.Background(), nil, &testFH, 0, 8, &res)
		res.Release()
		if !errors.Is(err, ErrBadReply) {
			t.Errorf("%s: err = %v, want ErrBadReply", name, err)
		}
	}
}

func TestReaddirplus(t *testing.T) {
	var e xdr.Encoder
	e.Uint32(0)
	e.Uint32(0) // no dir attrs
	e.Fixed([]byte("cookieve"))
	for i, name := range []string{"a", "bb", "ccc"} {
		e.Bool(true)
		e.Uint64(uint64(100 + i))
		e.String(name)
		e.Uint64(uint64(i + 1))
		e.Bool(true)
		fattrBytes(&e, TypeReg, uint64(100+i), 0)
		e.Bool(true)
		e.Opaque([]byte{byte(i), 9})
	}
	e.Bool(false)
	e.Bool(true)
	c, _ := newCannedClient(e.Buf, nil)
	var names []string
	page, err := c.Readdirplus(context.Background(), nil, &testFH, 0, Verf{}, 4096, 32768, func(ent *DirEntry) {
		if !ent.HasAttr || !ent.HasFH || ent.Attr.FileID != ent.FileID {
			t.Errorf("entry %q: attrs %v fh %v", ent.Name, ent.HasAttr, ent.HasFH)
		}
		names = append(names, string(ent.Name))
	})
	if err != nil {
		t.Fatal(err)
	}
	if !page.EOF || page.Entries != 3 || string(page.Verf[:]) != "cookieve" || len(names) != 3 || names[2] != "ccc" {
		t.Fatalf("page %+v names %v", page, names)
	}
}

func TestReaddirRejectsBadNames(t *testing.T) {
	for _, name := range []string{"", "a/b", "nul\x00"} {
		var e xdr.Encoder
		e.Uint32(0)
		e.Uint32(0)
		e.Fixed(make([]byte, 8))
		e.Bool(true)
		e.Uint64(1)
		e.String(name)
		e.Uint64(1)
		e.Bool(false)
		e.Bool(true)
		c, _ := newCannedClient(e.Buf, nil)
		_, err := c.Readdir(context.Background(), nil, &testFH, 0, Verf{}, 4096, func(*DirEntry) {
			t.Errorf("entry %q delivered", name)
		})
		if !errors.Is(err, ErrBadReply) {
			t.Errorf("name %q: err = %v", name, err)
		}
	}
}

func TestSymlinkTargetIsPayload(t *testing.T) {
	var e xdr.Encoder
	e.Uint32(0)
	e.Bool(true)
	e.Opaque([]byte{5, 5})
	e.Bool(false)
	e.Bool(false)
	e.Bool(false)
	c, tr := newCannedClient(e.Buf, nil)
	var res CreateResult
	if err := c.Symlink(context.Background(), nil, &testFH, "link", "../target", &Sattr{}, &res); err != nil {
		t.Fatal(err)
	}
	if !res.HasFH || res.FH.String() != "0505" || string(tr.pay) != "../target" {
		t.Fatalf("fh %v payload %q", res.FH, tr.pay)
	}
}

func TestHotPathsDoNotAllocate(t *testing.T) {
	if raceEnabled {
		t.Skip("allocation counts mean nothing under the race detector; make test runs this test without it")
	}
	ctx := context.Background()
	var e xdr.Encoder
	e.Uint32(0)
	fattrBytes(&e, TypeReg, 42, 4096)
	c, _ := newCannedClient(e.Buf, nil)
	var a Fattr
	c.Getattr(ctx, nil, &testFH, &a) // warm the pools
	if n := testing.AllocsPerRun(100, func() { c.Getattr(ctx, nil, &testFH, &a) }); n > 0 {
		t.Errorf("GETATTR: %v allocations per call", n)
	}
	rc, _ := newCannedClient(readReply(5, true, []byte("abcde")), nil)
	read := func() {
		var res ReadResult
		rc.Read(ctx, nil, &testFH, 0, 8, &res)
		res.Release()
	}
	read()
	if n := testing.AllocsPerRun(100, read); n > 0 {
		t.Errorf("READ: %v allocations per call", n)
	}
}

// jukeboxTransport answers NFS3ERR_JUKEBOX to the first call and
// GETATTR results to the next, and records the xids it saw.
type jukeboxTransport struct {
	cannedTransport
	xids []uint32
}

func (t *jukeboxTransport) RoundTrip(ctx context.Context, call *sunrpc.Call) error {
	t.xids = append(t.xids, call.Xid)
	if len(t.xids) == 1 {
		t.body = []byte{0, 0, 0x27, 0x18, 0, 0, 0, 0}
	} else {
		var e xdr.Encoder
		e.Uint32(0)
		fattrBytes(&e, TypeDir, 1, 0)
		t.body = e.Buf
	}
	return t.cannedTransport.RoundTrip(ctx, call)
}

func TestJukeboxIsAskedAgainAsANewCall(t *testing.T) {
	const delay = 50 * time.Millisecond
	tr := &jukeboxTransport{}
	c := NewClient(sunrpc.NewClient(tr, sunrpc.Config{Prog: Program, Vers: Version}), ClientConfig{JukeboxDelay: delay})
	var a Fattr
	start := time.Now()
	if err := c.Getattr(context.Background(), nil, &testFH, &a); err != nil {
		t.Fatal(err)
	}
	took := time.Since(start)
	if len(tr.xids) != 2 || tr.xids[0] == tr.xids[1] || a.Type != TypeDir {
		t.Fatalf("xids %v attrs %+v", tr.xids, a)
	}
	if took < delay || took > DefaultJukeboxDelay {
		t.Errorf("GETATTR answered NFS3ERR_JUKEBOX once took %v; want the configured %v wait", took, delay)
	}
}
