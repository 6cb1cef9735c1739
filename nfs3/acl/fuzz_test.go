package acl

import (
	"slices"
	"testing"

	"github.com/rdmafs/rdmafs/sunrpc/xdr"
)

// fuzzSeeds are wire forms of real arguments and results.
func fuzzSeeds(f *testing.F) {
	named := ACL{{TagUserObj, 0, 6}, {TagUser, 1001, 4}, {TagGroupObj, 0, 4}, {TagGroup, 50, 5}, {TagMask, 0, 6}, {TagOther, 0, 0}}
	var e xdr.Encoder
	_ = PutResult(&e, &Result{Mask: MaskACL | MaskDefault, Access: FromMode(0o644), Default: named}, 1, 2)
	f.Add(e.Buf)
	e = xdr.Encoder{}
	_ = PutSetArgs(&e, &SetArgs{FH: []byte{1, 2, 3, 4}, Mask: MaskACL | MaskDefault, Access: named}, 1, 2)
	f.Add(e.Buf)
	f.Add(named.Xattr())
	f.Add([]byte{2, 0, 0, 0})
}

// FuzzDecoders feeds arbitrary bytes to every decoder: none may panic,
// none may return more than MaxEntries entries, and what they accept must
// encode and decode again to the same thing.
func FuzzDecoders(f *testing.F) {
	fuzzSeeds(f)
	f.Fuzz(func(t *testing.T, b []byte) {
		d := xdr.NewDecoder(b)
		var r Result
		GetResult(&d, &r)
		if d.Err() == nil && (len(r.Access) > MaxEntries || len(r.Default) > MaxEntries) {
			t.Fatalf("GETACL result of %d and %d entries", len(r.Access), len(r.Default))
		}
		// A valid ACL the result says it holds survives encoding again.
		if d.Err() == nil && r.Mask&MaskACL != 0 && r.Mask&MaskDefault != 0 && r.Access.Valid() == nil && r.Default.Valid() == nil {
			var e xdr.Encoder
			if err := PutResult(&e, &r, 0, 0); err != nil {
				t.Fatal(err)
			}
			d2 := xdr.NewDecoder(e.Buf)
			var r2 Result
			GetResult(&d2, &r2)
			if d2.Err() != nil || !slices.Equal(r2.Access, r.Access) || !slices.Equal(r2.Default, r.Default) {
				t.Fatalf("GETACL result %+v came back as %+v (%v)", r, r2, d2.Err())
			}
		}

		d = xdr.NewDecoder(b)
		var a SetArgs
		GetSetArgs(&d, &a)
		if d.Err() == nil && (len(a.FH) > fhSize || len(a.Access) > MaxEntries || len(a.Default) > MaxEntries) {
			t.Fatalf("SETACL args beyond the limits: %d-byte handle, %d and %d entries", len(a.FH), len(a.Access), len(a.Default))
		}

		if x, err := FromXattr(b); err == nil {
			if err := x.Valid(); err != nil {
				t.Fatalf("FromXattr accepted an invalid ACL %v: %v", x, err)
			}
			y, err := FromXattr(x.Xattr())
			if err != nil || !slices.Equal(x, y) {
				t.Fatalf("xattr %v came back as %v, %v", x, y, err)
			}
		}
	})
}
