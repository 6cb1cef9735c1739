package server

import (
	"bytes"
	"strings"
	"testing"
)

// FuzzCallHeader feeds arbitrary messages to the front's parsers: they must
// never panic, and what they accept must lie inside the message.
func FuzzCallHeader(f *testing.F) {
	f.Add(encodeCall(1, progNFS, versNFS, nfsNull, asRoot, nil))
	f.Add(encodeCall(2, progNFS, versNFS, nfsLookup, &sysCred{uid: 5, gid: 6, groups: []uint32{7, 8}}, dirop([]byte("12345678"), "name").Buf))
	f.Add(encodeCall(3, progMount, versMount, mountMnt, asNone, []byte{0, 0, 0, 1, '/', 0, 0, 0}))
	f.Add(encodeCall(4, progNFS, versNFS, nfsSetattr, asRoot, bytes.Repeat([]byte{0, 0, 0, 1}, 20)))
	f.Add(encodeCall(5, progNFS, versNFS, nfsReaddirplus, asRoot, bytes.Repeat([]byte{0xff}, 40)))
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
		if len(c.args) > len(msg) || len(msg) < minCallLen || len(c.cred.groups) > maxAuthGroups {
			t.Fatalf("call outside the message: %+v", c)
		}
		if !bytes.Equal(msg[len(msg)-len(c.args):], c.args) {
			t.Fatal("arguments are not the message's tail")
		}
		a, ok := decodeArgs(c.prog, c.proc, c.args)
		if !ok {
			return
		}
		if len(a.fh) > maxFH || len(a.fh2) > maxFH || len(a.name) > len(c.args) || len(a.dirpath) > maxMountPath ||
			a.count > maxIO && c.proc == nfsRead || len(a.data) > len(c.args) || int(a.count) > len(a.data) && c.proc == nfsWrite {
			t.Fatalf("decoded arguments out of bounds: %+v", a)
		}
		a.frontStatus(c.proc)
		if rel, ok := mountPath(a.dirpath); ok && (rel == "" || strings.HasPrefix(rel, "/") || strings.Contains(rel, "//")) {
			t.Fatalf("MOUNT path %q became %q", a.dirpath, rel)
		}
	})
}
