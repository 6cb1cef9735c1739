package server

import (
	"bytes"
	"encoding/binary"
	"strings"
	"testing"

	"github.com/rdmafs/rdmafs/nfs3"
	"github.com/rdmafs/rdmafs/sunrpc"
)

// FuzzCallHeader feeds arbitrary messages to the front's parsers: they must
// never panic, and what they accept must lie inside the message.
func FuzzCallHeader(f *testing.F) {
	f.Add(encodeCall(1, nfs3.Program, nfs3.Version, nfs3.ProcNull, asRoot, nil))
	f.Add(encodeCall(2, nfs3.Program, nfs3.Version, nfs3.ProcLookup, &sysCred{uid: 5, gid: 6, groups: []uint32{7, 8}}, dirop([]byte("12345678"), "name").Buf))
	f.Add(encodeCall(3, nfs3.MountProgram, nfs3.MountVersion, nfs3.MountProcMnt, asNone, []byte{0, 0, 0, 1, '/', 0, 0, 0}))
	f.Add(encodeCall(4, nfs3.Program, nfs3.Version, nfs3.ProcSetattr, asRoot, bytes.Repeat([]byte{0, 0, 0, 1}, 20)))
	f.Add(encodeCall(5, nfs3.Program, nfs3.Version, nfs3.ProcReaddirplus, asRoot, bytes.Repeat([]byte{0xff}, 40)))
	f.Add([]byte{0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 2})
	f.Fuzz(func(t *testing.T, msg []byte) {
		c, refusal, err := parseCall(msg)
		switch {
		case err != nil:
			if c != nil || refusal != nil {
				t.Fatal("error with a result")
			}
			return
		case refusal != nil:
			if c != nil || len(refusal) < 16 {
				t.Fatalf("bad refusal %x", refusal)
			}
			return
		}
		if len(c.args) > len(msg) || len(msg) < minCallLen || len(c.cred.groups) > sunrpc.MaxGroups {
			t.Fatalf("call outside the message: %+v", c)
		}
		if !bytes.Equal(msg[len(msg)-len(c.args):], c.args) {
			t.Fatal("arguments are not the message's tail")
		}
		a, ok := decodeArgs(c.prog, c.proc, c.args)
		if !ok {
			return
		}
		if len(a.fh) > nfs3.FHSize || len(a.fh2) > nfs3.FHSize || len(a.name) > len(c.args) || len(a.dirpath) > nfs3.MountPathLen ||
			a.count > maxIO && c.proc == nfs3.ProcRead || len(a.data) > len(c.args) || c.proc == nfs3.ProcWrite && int(a.count) != min(len(a.data), maxIO) {
			t.Fatalf("decoded arguments out of bounds: %+v", a)
		}
		a.frontStatus(c.proc)
		if rel, ok := mountPath(a.dirpath); ok && (rel == "" || strings.HasPrefix(rel, "/") || strings.Contains(rel, "//")) {
			t.Fatalf("MOUNT path %q became %q", a.dirpath, rel)
		}
	})
}

// FuzzRecordReader feeds arbitrary streams to the record reader: it must
// never panic, never return a record longer than the largest call, and
// hold (reserve) no more than the part of the record beyond the free bytes.
func FuzzRecordReader(f *testing.F) {
	mark := func(n uint32, last bool, body []byte) []byte {
		b := binary.BigEndian.AppendUint32(nil, n)
		if last {
			b[0] |= 0x80
		}
		return append(b, body...)
	}
	f.Add(mark(4, true, []byte("abcd")))
	f.Add(append(mark(2, false, []byte("ab")), mark(2, true, []byte("cd"))...))
	f.Add(mark(maxRecord+1, true, nil))
	f.Add(mark(0, true, nil))
	f.Add(mark(1<<31-1, false, []byte("x")))
	f.Add(bytes.Repeat([]byte{0, 0, 0, 0}, 10))
	f.Fuzz(func(t *testing.T, stream []byte) {
		var b byteBudget
		b.init(recordBudget)
		rr := recordReader{r: bytes.NewReader(stream), budget: &b}
		for range 8 {
			rec, err := rr.read(nil)
			held := rr.take()
			if err != nil {
				b.release(held)
				return
			}
			if len(rec) > maxRecord || held > max(0, len(rec)-freeRecordBytes) {
				t.Fatalf("record of %d bytes holding %d", len(rec), held)
			}
			b.release(held)
			if b.free != recordBudget {
				t.Fatalf("budget %d after release", b.free)
			}
		}
	})
}

// FuzzParseClients: the client list parser never panics, and what it
// accepts are valid, masked prefixes.
func FuzzParseClients(f *testing.F) {
	for _, s := range []string{"*", "127.0.0.1", "10.0.0.0/8+::1", "2001:db8::/32+1.2.3.4", "", "+", "1.2.3.4/40", "::ffff:1.2.3.4"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, list string) {
		ps, err := ParseClients(list)
		if err != nil {
			return
		}
		if len(ps) == 0 {
			t.Fatalf("%q: no clients and no error", list)
		}
		for _, p := range ps {
			if !p.IsValid() || p.Masked() != p {
				t.Fatalf("%q: prefix %v", list, p)
			}
		}
	})
}
