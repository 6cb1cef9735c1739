package sunrpc

import (
	"bytes"
	"testing"

	"github.com/rdmafs/rdmafs/sunrpc/xdr"
)

// FuzzCallHeader feeds arbitrary messages to the server's call header
// parser: it must never panic, and what it accepts must lie inside the
// message.
func FuzzCallHeader(f *testing.F) {
	call := func(xid, prog, vers, proc uint32, auth Auth, cred *Cred, args []byte) []byte {
		var e xdr.Encoder
		appendCallHeader(&e, xid, prog, vers, proc, &auth, cred)
		return append(e.Buf, args...)
	}
	sys := Auth{Flavor: AuthSys, Machine: "testhost"}
	f.Add(call(1, 100003, 3, 0, sys, &Cred{}, nil))
	f.Add(call(2, 100003, 3, 3, sys, &Cred{UID: 5, GID: 6, Groups: []uint32{7, 8}}, []byte("12345678")))
	f.Add(call(3, 100005, 3, 1, Auth{}, nil, []byte{0, 0, 0, 1, '/', 0, 0, 0}))
	f.Add(call(4, 100003, 3, 2, sys, &Cred{}, bytes.Repeat([]byte{0, 0, 0, 1}, 20)))
	f.Add([]byte{0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 2})
	f.Fuzz(func(t *testing.T, msg []byte) {
		var r Request
		refusal, err := parseCall(msg, &r)
		switch {
		case err != nil:
			if refusal != nil {
				t.Fatal("error with a refusal")
			}
			return
		case refusal != nil:
			if len(refusal) < 16 {
				t.Fatalf("bad refusal %x", refusal)
			}
			return
		}
		if len(r.Args) > len(msg) || len(msg) < minCallLen || len(r.Cred.Groups) > MaxGroups {
			t.Fatalf("call outside the message: %+v", r)
		}
		if !bytes.Equal(msg[len(msg)-len(r.Args):], r.Args) {
			t.Fatal("arguments are not the message's tail")
		}
		if r.Flavor != AuthSys && r.Flavor != AuthNone || r.Flavor == AuthNone && (r.Cred.UID != NoID || r.Cred.GID != NoID) {
			t.Fatalf("credential %v %+v", r.Flavor, r.Cred)
		}
	})
}
