package nfs3

// These fuzz targets hold the client's codec against go-xdr
// (github.com/rasky/go-xdr), an XDR implementation by reflection that
// rdmafs does not use at run time (it allocates on every call) but that,
// given the structures of RFC 1813 (goxdr_types_test.go), encodes and
// decodes NFSv3 independently of this package:
//
//   - FuzzCallsDecodeWithGoXDR: the client encodes a call's arguments from
//     fuzzed values; go-xdr must decode the bytes on the wire to exactly
//     those values, field by field, and encode those values to the same
//     bytes.
//   - FuzzRepliesFromGoXDR: go-xdr encodes a successful result from fuzzed
//     values; the client must decode it, without error, to exactly those
//     values, field by field.
//
// The fuzzed bytes are not a message: a fuzzSource turns them into the
// values of one procedure's arguments or results, all of them valid, so
// that every input exercises the codec rather than its error paths (which
// FuzzReplies covers).

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"testing"

	goxdr "github.com/rasky/go-xdr/xdr2"

	"github.com/rdmafs/rdmafs/sunrpc"
	"github.com/rdmafs/rdmafs/sunrpc/xdr"
)

// fuzzSource hands out values taken from fuzzed bytes, zeros once they
// run out.
type fuzzSource struct{ b []byte }

func (s *fuzzSource) take(n int) []byte {
	out := make([]byte, n)
	k := copy(out, s.b)
	s.b = s.b[k:]
	return out
}

func (s *fuzzSource) u8() uint8   { return s.take(1)[0] }
func (s *fuzzSource) u32() uint32 { return binary.BigEndian.Uint32(s.take(4)) }
func (s *fuzzSource) u64() uint64 { return binary.BigEndian.Uint64(s.take(8)) }
func (s *fuzzSource) flag() bool  { return s.u8()&1 == 1 }
func (s *fuzzSource) time() Time  { return Time{s.u32(), s.u32()} }

// data returns up to max bytes.
func (s *fuzzSource) data(max int) []byte {
	n := int(binary.BigEndian.Uint16(s.take(2))) % (max + 1)
	return s.take(n)
}

// fh returns a handle of 1 to FHSize bytes.
func (s *fuzzSource) fh() FH {
	var fh FH
	fh.n = uint8(1 + int(s.u8())%FHSize)
	copy(fh.b[:fh.n], s.take(int(fh.n)))
	return fh
}

// name returns a file name the client sends and accepts: 1 to MaxNameLen
// bytes, none of them a slash or NUL.
func (s *fuzzSource) name() string {
	b := s.take(1 + int(s.u8())%MaxNameLen)
	for i, c := range b {
		if c == 0 || c == '/' {
			b[i] = 'x'
		}
	}
	return string(b)
}

func (s *fuzzSource) verf() (v Verf) {
	copy(v[:], s.take(8))
	return v
}

func (s *fuzzSource) sattr() Sattr {
	return Sattr{
		SetMode: s.flag(), Mode: s.u32(),
		SetUID: s.flag(), UID: s.u32(),
		SetGID: s.flag(), GID: s.u32(),
		SetSize: s.flag(), Size: s.u64(),
		Atime: SetTime(s.u8() % 3), AtimeVal: s.time(),
		Mtime: SetTime(s.u8() % 3), MtimeVal: s.time(),
	}
}

func (s *fuzzSource) rfcTime() rfcTime { return rfcTimeOf(s.time()) }

// rfcFattr returns attributes of any of the seven file types.
func (s *fuzzSource) rfcFattr() rfcFattr {
	return rfcFattr{
		Type: 1 + uint32(s.u8())%7, Mode: s.u32(), Nlink: s.u32(), UID: s.u32(), GID: s.u32(),
		Size: s.u64(), Used: s.u64(), Rdev: rfcSpecdata{s.u32(), s.u32()},
		FSID: s.u64(), FileID: s.u64(),
		Atime: s.rfcTime(), Mtime: s.rfcTime(), Ctime: s.rfcTime(),
	}
}

// rfcPostOpAttr returns a post_op_attr, present or not.
func (s *fuzzSource) rfcPostOpAttr() *rfcFattr {
	if !s.flag() {
		return nil
	}
	a := s.rfcFattr()
	return &a
}

func (s *fuzzSource) rfcWcc() rfcWcc {
	var w rfcWcc
	if s.flag() {
		w.Before = &rfcWccAttr{Size: s.u64(), Mtime: s.rfcTime(), Ctime: s.rfcTime()}
	}
	w.After = s.rfcPostOpAttr()
	return w
}

// argsTransport answers every call with NFS3ERR_IO and keeps the call's
// arguments as a stream transport puts them on the wire: the head after
// the RPC call header, the payload, its pad and the tail.
type argsTransport struct {
	args []byte
	msg  []byte
}

func (t *argsTransport) RoundTrip(ctx context.Context, call *sunrpc.Call) error {
	d := xdr.NewDecoder(call.Head)
	d.Skip(24) // xid, CALL, RPC version, program, version, procedure
	d.Uint32()
	d.Opaque(400) // credential
	d.Uint32()
	d.Opaque(400) // verifier
	if d.Err() != nil {
		return fmt.Errorf("call header: %w", d.Err())
	}
	t.args = append(t.args[:0], d.Rest()...)
	t.args = append(t.args, call.Payload...)
	t.args = append(t.args, make([]byte, xdr.Pad(len(call.Payload)))...)
	t.args = append(t.args, call.Tail...)

	e := xdr.Encoder{Buf: t.msg[:0]}
	e.Uint32(call.Xid)
	e.Uint32(1) // REPLY
	e.Uint32(0) // MSG_ACCEPTED
	e.Uint32(0) // verifier
	e.Uint32(0)
	e.Uint32(0)                 // SUCCESS
	e.Uint32(uint32(ErrIO))     // the procedure's status
	e.Buf = append(e.Buf, 0, 0) // and a short rest, which a failed call does not need
	t.msg = e.Buf
	call.Reply = sunrpc.Reply{Msg: e.Buf}
	return nil
}

func (t *argsTransport) XprtStats() string { return "args" }
func (t *argsTransport) Close() error      { return nil }

var _ sunrpc.Transport = (*argsTransport)(nil)

// checkArgs decodes wire, the arguments the client sent, with go-xdr as
// what RFC 1813 says the arguments of proc are (T) and compares them field
// by field with want; go-xdr's encoding of want must be wire.
func checkArgs[T any](t *testing.T, proc string, wire []byte, want T) {
	t.Helper()
	if wire == nil {
		t.Fatalf("%s: the client sent no call", proc)
	}
	var got T
	n, err := goxdr.UnmarshalLimited(bytes.NewReader(wire), &got, 1<<20)
	if err != nil {
		t.Fatalf("%s: go-xdr cannot decode the client's arguments %x: %v", proc, wire, err)
	}
	if n != len(wire) {
		t.Fatalf("%s: go-xdr decoded %d of the arguments' %d bytes: the client sent more than RFC 1813 says", proc, n, len(wire))
	}
	if diffs := fieldDiffs(want, got); diffs != nil {
		t.Fatalf("%s: go-xdr decodes the client's arguments to other values (want != got):\n%v", proc, diffs)
	}
	var ref bytes.Buffer
	if _, err := goxdr.Marshal(&ref, &want); err != nil {
		t.Fatalf("%s: go-xdr Marshal: %v", proc, err)
	}
	if !bytes.Equal(ref.Bytes(), wire) {
		t.Fatalf("%s: the client sent %x, go-xdr encodes %x", proc, wire, ref.Bytes())
	}
}

// callProcs are the procedures FuzzCallsDecodeWithGoXDR calls.
var callProcs = []uint32{ProcGetattr, ProcSetattr, ProcLookup, ProcAccess, ProcReadlink, ProcRead, ProcWrite,
	ProcCreate, ProcMkdir, ProcSymlink, ProcMknod, ProcRemove, ProcRmdir, ProcRename, ProcLink,
	ProcReaddirplus, ProcCommit}

// fuzzSeed is seed bytes for the sources: no zeros, so that every flag
// and length in a seed is set.
func fuzzSeed(n int, salt byte) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(i*37) + salt | 1
	}
	return b
}

func FuzzCallsDecodeWithGoXDR(f *testing.F) {
	for i := range callProcs {
		f.Add(uint8(i), []byte(nil))
		f.Add(uint8(i), fuzzSeed(600, byte(i)))
	}
	f.Fuzz(func(t *testing.T, which uint8, src []byte) {
		s := &fuzzSource{b: src}
		tr := &argsTransport{}
		c := NewClient(sunrpc.NewClient(tr, sunrpc.Config{Prog: Program, Vers: Version, ProcNames: ProcNames,
			Auth: sunrpc.Auth{Flavor: sunrpc.AuthSys, Machine: "fuzz"}}), ClientConfig{})
		ctx := context.Background()
		proc := callProcs[int(which)%len(callProcs)]
		name := ProcNames[proc]
		fh := s.fh()
		rfh := rfcFH{bytes.Clone(fh.Bytes())}
		var wcc Wcc
		var cr CreateResult
		switch proc {
		case ProcGetattr:
			_ = c.Getattr(ctx, nil, &fh, &Fattr{})
			checkArgs(t, name, tr.args, rfh)
		case ProcSetattr:
			attr := s.sattr()
			var guard *Time
			if s.flag() {
				g := s.time()
				guard = &g
			}
			_ = c.Setattr(ctx, nil, &fh, &attr, guard, &wcc)
			want := rfcSetattrArgs{Object: rfh, NewAttributes: rfcSattrOf(&attr)}
			if guard != nil {
				want.Guard.Check = true
				want.Guard.ObjCtime = rfcTimeOf(*guard)
			}
			checkArgs(t, name, tr.args, want)
		case ProcLookup:
			n := s.name()
			_ = c.Lookup(ctx, nil, &fh, n, &LookupResult{})
			checkArgs(t, name, tr.args, rfcLookupArgs{rfcDirOp{rfh, n}})
		case ProcAccess:
			mask := s.u32()
			_, _, _ = c.Access(ctx, nil, &fh, mask, &Fattr{})
			checkArgs(t, name, tr.args, rfcAccessArgs{rfh, mask})
		case ProcReadlink:
			_, _ = c.Readlink(ctx, nil, &fh)
			checkArgs(t, name, tr.args, rfh)
		case ProcRead:
			off, count := s.u64(), s.u32()
			var res ReadResult
			_ = c.Read(ctx, nil, &fh, off, count, &res)
			res.Release()
			checkArgs(t, name, tr.args, rfcReadArgs{rfh, off, count})
		case ProcWrite:
			off, stable, data := s.u64(), StableHow(s.u8()%3), s.data(3000)
			_ = c.Write(ctx, nil, &fh, off, data, stable, &WriteResult{})
			checkArgs(t, name, tr.args, rfcWriteArgs{rfh, off, uint32(len(data)), uint32(stable), data})
		case ProcCreate:
			n, how, attr, verf := s.name(), CreateMode(s.u8()%3), s.sattr(), s.verf()
			_ = c.Create(ctx, nil, &fh, n, how, &attr, verf, &cr)
			want := rfcCreateArgs{Where: rfcDirOp{rfh, n}}
			want.How.Mode = uint32(how)
			switch how {
			case Unchecked:
				want.How.Unchecked = rfcSattrOf(&attr)
			case Guarded:
				want.How.Guarded = rfcSattrOf(&attr)
			case Exclusive:
				want.How.Verf = verf
			}
			checkArgs(t, name, tr.args, want)
		case ProcMkdir:
			n, attr := s.name(), s.sattr()
			_ = c.Mkdir(ctx, nil, &fh, n, &attr, &cr)
			checkArgs(t, name, tr.args, rfcMkdirArgs{rfcDirOp{rfh, n}, rfcSattrOf(&attr)})
		case ProcSymlink:
			n, attr, target := s.name(), s.sattr(), string(s.data(MaxPathLen))
			_ = c.Symlink(ctx, nil, &fh, n, target, &attr, &cr)
			checkArgs(t, name, tr.args, rfcSymlinkArgs{rfcDirOp{rfh, n}, rfcSattrOf(&attr), target})
		case ProcMknod:
			n, attr, rdev := s.name(), s.sattr(), [2]uint32{s.u32(), s.u32()}
			typ := []FileType{TypeBlk, TypeChr, TypeSock, TypeFifo}[s.u8()%4]
			_ = c.Mknod(ctx, nil, &fh, n, typ, &attr, rdev, &cr)
			want := rfcMknodArgs{Where: rfcDirOp{rfh, n}}
			want.What.Type = uint32(typ)
			dev := rfcDeviceData{rfcSattrOf(&attr), rfcSpecdata{rdev[0], rdev[1]}}
			switch typ {
			case TypeBlk:
				want.What.Blk = dev
			case TypeChr:
				want.What.Chr = dev
			case TypeSock:
				want.What.Sock = rfcSattrOf(&attr)
			case TypeFifo:
				want.What.Fifo = rfcSattrOf(&attr)
			}
			checkArgs(t, name, tr.args, want)
		case ProcRemove, ProcRmdir:
			n := s.name()
			if proc == ProcRemove {
				_ = c.Remove(ctx, nil, &fh, n, &wcc)
			} else {
				_ = c.Rmdir(ctx, nil, &fh, n, &wcc)
			}
			checkArgs(t, name, tr.args, rfcRemoveArgs{rfcDirOp{rfh, n}})
		case ProcRename:
			from, to, toName := s.name(), s.fh(), s.name()
			var toWcc Wcc
			_ = c.Rename(ctx, nil, &fh, from, &to, toName, &wcc, &toWcc)
			checkArgs(t, name, tr.args, rfcRenameArgs{rfcDirOp{rfh, from}, rfcDirOp{rfcFH{to.Bytes()}, toName}})
		case ProcLink:
			dir, n := s.fh(), s.name()
			_, _ = c.Link(ctx, nil, &fh, &dir, n, &Fattr{}, &wcc)
			checkArgs(t, name, tr.args, rfcLinkArgs{rfh, rfcDirOp{rfcFH{dir.Bytes()}, n}})
		case ProcReaddirplus:
			cookie, verf, dircount, maxcount := s.u64(), s.verf(), s.u32(), s.u32()
			_, _ = c.Readdirplus(ctx, nil, &fh, cookie, verf, dircount, maxcount, func(*DirEntry) {})
			checkArgs(t, name, tr.args, rfcReaddirplusArgs{rfh, cookie, verf, dircount, maxcount})
		case ProcCommit:
			off, count := s.u64(), s.u32()
			_, _ = c.Commit(ctx, nil, &fh, off, count, &wcc)
			checkArgs(t, name, tr.args, rfcCommitArgs{rfh, off, count})
		default:
			t.Fatalf("no case for %s", name)
		}
	})
}

// replyProcs are the procedures FuzzRepliesFromGoXDR answers.
var replyProcs = []uint32{ProcGetattr, ProcSetattr, ProcLookup, ProcRead, ProcWrite, ProcCreate, ProcReaddirplus}

// goxdrBody encodes v, a procedure's results, with go-xdr.
func goxdrBody(t *testing.T, v any) []byte {
	t.Helper()
	var b bytes.Buffer
	if _, err := goxdr.Marshal(&b, v); err != nil {
		t.Fatalf("go-xdr Marshal %T: %v", v, err)
	}
	return b.Bytes()
}

// sameResults fails t if the client decoded go-xdr's results of proc
// (want) to other values (got, converted to the RFC's types).
func sameResults(t *testing.T, proc string, body []byte, want, got any) {
	t.Helper()
	if diffs := fieldDiffs(want, got); diffs != nil {
		t.Fatalf("%s: the client decodes go-xdr's results %x to other values (want != got):\n%v", proc, body, diffs)
	}
}

func FuzzRepliesFromGoXDR(f *testing.F) {
	for i := range replyProcs {
		f.Add(uint8(i), []byte(nil))
		f.Add(uint8(i), fuzzSeed(2000, byte(i)))
	}
	f.Fuzz(func(t *testing.T, which uint8, src []byte) {
		s := &fuzzSource{b: src}
		ctx := context.Background()
		proc := replyProcs[int(which)%len(replyProcs)]
		name := ProcNames[proc]
		fh := testFH
		switch proc {
		case ProcGetattr:
			want := rfcGetattrRes{Attributes: s.rfcFattr()}
			body := goxdrBody(t, &want)
			c, _ := newCannedClient(body, nil)
			var a Fattr
			if err := c.Getattr(ctx, nil, &fh, &a); err != nil {
				t.Fatalf("%s: %x: %v", name, body, err)
			}
			sameResults(t, name, body, want, rfcGetattrRes{Attributes: rfcFattrOf(&a)})
		case ProcSetattr:
			want := rfcSetattrRes{ObjWcc: s.rfcWcc()}
			body := goxdrBody(t, &want)
			c, _ := newCannedClient(body, nil)
			var w Wcc
			if err := c.Setattr(ctx, nil, &fh, &Sattr{}, nil, &w); err != nil {
				t.Fatalf("%s: %x: %v", name, body, err)
			}
			sameResults(t, name, body, want, rfcSetattrRes{ObjWcc: rfcWccOf(&w)})
		case ProcLookup:
			obj := s.fh()
			want := rfcLookupRes{Object: rfcFH{obj.Bytes()}, ObjAttr: s.rfcPostOpAttr(), DirAttr: s.rfcPostOpAttr()}
			body := goxdrBody(t, &want)
			c, _ := newCannedClient(body, nil)
			var res LookupResult
			if err := c.Lookup(ctx, nil, &fh, "x", &res); err != nil {
				t.Fatalf("%s: %x: %v", name, body, err)
			}
			sameResults(t, name, body, want, rfcLookupRes{Object: rfcFH{res.FH.Bytes()},
				ObjAttr: rfcPostOpAttrOf(&res.Attr, res.HasAttr), DirAttr: rfcPostOpAttrOf(&res.DirAttr, res.HasDirAttr)})
		case ProcRead:
			want := rfcReadRes{FileAttr: s.rfcPostOpAttr(), EOF: s.flag(), Data: s.data(3000)}
			want.Count = uint32(len(want.Data))
			count := want.Count + uint32(s.u8()) // what the client asked for
			body := goxdrBody(t, &want)
			c, _ := newCannedClient(body, nil)
			var res ReadResult
			defer res.Release()
			if err := c.Read(ctx, nil, &fh, 0, count, &res); err != nil {
				t.Fatalf("%s: %x: %v", name, body, err)
			}
			sameResults(t, name, body, want, rfcReadRes{FileAttr: rfcPostOpAttrOf(&res.Attr, res.HasAttr),
				Count: uint32(len(res.Data)), EOF: res.EOF, Data: res.Data})
		case ProcWrite:
			sent := s.data(3000)
			want := rfcWriteRes{FileWcc: s.rfcWcc(), Count: s.u32() % uint32(len(sent)+1), Committed: uint32(s.u8() % 3), Verf: s.verf()}
			body := goxdrBody(t, &want)
			c, _ := newCannedClient(body, nil)
			var res WriteResult
			if err := c.Write(ctx, nil, &fh, 0, sent, Unstable, &res); err != nil {
				t.Fatalf("%s: %x: %v", name, body, err)
			}
			sameResults(t, name, body, want, rfcWriteRes{FileWcc: rfcWccOf(&res.Wcc), Count: res.Count,
				Committed: uint32(res.Committed), Verf: res.Verf})
		case ProcCreate:
			var want rfcCreateRes
			if s.flag() {
				obj := s.fh()
				want.Obj = &rfcFH{obj.Bytes()}
			}
			want.ObjAttr = s.rfcPostOpAttr()
			want.DirWcc = s.rfcWcc()
			body := goxdrBody(t, &want)
			c, _ := newCannedClient(body, nil)
			var res CreateResult
			if err := c.Create(ctx, nil, &fh, "x", Unchecked, &Sattr{}, Verf{}, &res); err != nil {
				t.Fatalf("%s: %x: %v", name, body, err)
			}
			got := rfcCreateRes{ObjAttr: rfcPostOpAttrOf(&res.Attr, res.HasAttr), DirWcc: rfcWccOf(&res.DirWcc)}
			if res.HasFH {
				got.Obj = &rfcFH{res.FH.Bytes()}
			}
			sameResults(t, name, body, want, got)
		case ProcReaddirplus:
			want := rfcReaddirplusRes{DirAttr: s.rfcPostOpAttr(), Cookieverf: s.verf()}
			next := &want.Entries
			for range s.u8() % 9 {
				e := &rfcEntryplus{FileID: s.u64(), Name: s.name(), Cookie: s.u64(), NameAttributes: s.rfcPostOpAttr()}
				if s.flag() {
					h := s.fh()
					e.NameHandle = &rfcFH{h.Bytes()}
				}
				*next = e
				next = &e.NextEntry
			}
			want.EOF = s.flag()
			body := goxdrBody(t, &want)
			c, _ := newCannedClient(body, nil)
			got := rfcReaddirplusRes{}
			next = &got.Entries
			page, err := c.Readdirplus(ctx, nil, &fh, 0, Verf{}, 1<<20, 1<<20, func(d *DirEntry) {
				e := &rfcEntryplus{FileID: d.FileID, Name: string(d.Name), Cookie: d.Cookie,
					NameAttributes: rfcPostOpAttrOf(&d.Attr, d.HasAttr)}
				if d.HasFH {
					e.NameHandle = &rfcFH{bytes.Clone(d.FH.Bytes())}
				}
				*next = e
				next = &e.NextEntry
			})
			if err != nil {
				t.Fatalf("%s: %x: %v", name, body, err)
			}
			got.DirAttr = rfcPostOpAttrOf(&page.DirAttr, page.HasDirAttr)
			got.Cookieverf = page.Verf
			got.EOF = page.EOF
			sameResults(t, name, body, want, got)
		default:
			t.Fatalf("no case for %s", name)
		}
	})
}
