package server

import (
	"bytes"
	"strings"
	"testing"

	"github.com/rdmafs/rdmafs/nfs3"
)

// FuzzArgs feeds arbitrary arguments to the front's decoders: they must
// never panic, and what they accept must lie inside the arguments. (The
// RPC header's parser has its fuzz test in package sunrpc.)
func FuzzArgs(f *testing.F) {
	f.Add(uint32(nfs3.Program), uint32(nfs3.ProcLookup), dirop([]byte("12345678"), "name").Buf)
	f.Add(uint32(nfs3.MountProgram), uint32(nfs3.MountProcMnt), []byte{0, 0, 0, 1, '/', 0, 0, 0})
	f.Add(uint32(nfs3.Program), uint32(nfs3.ProcSetattr), bytes.Repeat([]byte{0, 0, 0, 1}, 20))
	f.Add(uint32(nfs3.Program), uint32(nfs3.ProcReaddirplus), bytes.Repeat([]byte{0xff}, 40))
	f.Add(uint32(nfs3.Program), uint32(nfs3.ProcWrite), []byte{0, 0, 0, 2})
	f.Fuzz(func(t *testing.T, prog, proc uint32, args []byte) {
		a, ok := decodeArgs(prog, proc, args)
		if !ok {
			return
		}
		if len(a.fh) > nfs3.FHSize || len(a.fh2) > nfs3.FHSize || len(a.name) > len(args) || len(a.dirpath) > nfs3.MountPathLen ||
			a.count > maxIO && proc == nfs3.ProcRead || len(a.data) > len(args) || proc == nfs3.ProcWrite && int(a.count) != min(len(a.data), maxIO) {
			t.Fatalf("decoded arguments out of bounds: %+v", a)
		}
		a.frontStatus(proc)
		if rel, ok := mountPath(a.dirpath); ok && (rel == "" || strings.HasPrefix(rel, "/") || strings.Contains(rel, "//")) {
			t.Fatalf("MOUNT path %q became %q", a.dirpath, rel)
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
