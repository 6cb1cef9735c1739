package sunrpc

import (
	"encoding/binary"
	"testing"
)

// TestSiblingSharesXids: a sibling client calls its own program on the
// same transport with xids from the same sequence, so calls of the two in
// flight at once never share an xid.
func TestSiblingSharesXids(t *testing.T) {
	nfs := NewClient(nil, Config{Prog: 100003, Vers: 3})
	acl := nfs.Sibling(Config{Prog: 100227, Vers: 3})
	a := nfs.NewCall(1, nil)
	b := acl.NewCall(1, nil)
	c := nfs.NewCall(1, nil)
	defer a.Release()
	defer b.Release()
	defer c.Release()
	if b.Xid != a.Xid+1 || c.Xid != b.Xid+1 {
		t.Fatalf("xids %#x, %#x, %#x: want one sequence", a.Xid, b.Xid, c.Xid)
	}
	if acl.Transport() != nfs.Transport() {
		t.Fatal("the sibling has another transport")
	}
	// xid, CALL, RPC version, program, version.
	if prog := binary.BigEndian.Uint32(b.Head[12:]); prog != 100227 {
		t.Fatalf("the sibling's call is of program %d", prog)
	}
}
