package acl

import (
	"bytes"
	"encoding/binary"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/rdmafs/rdmafs/sunrpc/xdr"
)

// randomACL is a valid ACL of up to named named entries, sorted.
func randomACL(r *rand.Rand, named int) ACL {
	a := FromMode(r.Uint32N(0o1000))
	n := r.IntN(named + 1)
	seen := map[[2]uint32]bool{}
	for range n {
		tag := TagUser
		if r.IntN(2) == 0 {
			tag = TagGroup
		}
		id := r.Uint32N(70000)
		if seen[[2]uint32{uint32(tag), id}] {
			continue
		}
		seen[[2]uint32{uint32(tag), id}] = true
		a = append(a, Entry{Tag: tag, ID: id, Perm: uint16(r.IntN(8))})
	}
	if len(a) > 3 || r.IntN(2) == 0 {
		a = append(a, Entry{Tag: TagMask, ID: UndefinedID, Perm: uint16(r.IntN(8))})
	}
	a.Sort()
	return a
}

// canonical is what the wire makes of a: a four-entry ACL whose mask
// equals the owning group's loses the mask.
func canonical(a ACL) ACL {
	if len(a) == 4 && a[2].Tag == TagMask && a[2].Perm == a[1].Perm {
		return ACL{a[0], a[1], a[3]}
	}
	return a
}

func TestRoundTrip(t *testing.T) {
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	r := rand.New(rand.NewPCG(seed, seed))
	for i := range 2000 {
		access, dflt := randomACL(r, 20), randomACL(r, 20)
		if i%5 == 0 {
			dflt = nil
		}
		if err := access.Valid(); err != nil {
			t.Fatalf("generated %v: %v", access, err)
		}
		args := SetArgs{FH: []byte{1, 2, 3, 4, 5}, Mask: MaskACL | MaskDefault, Access: access, Default: dflt}
		var e xdr.Encoder
		if err := PutSetArgs(&e, &args, 1000, 100); err != nil {
			t.Fatal(err)
		}
		d := xdr.NewDecoder(e.Buf)
		var got SetArgs
		GetSetArgs(&d, &got)
		if d.Err() != nil || d.Len() != 0 {
			t.Fatalf("SETACL args of %v, %v: %v, %d bytes left", access, dflt, d.Err(), d.Len())
		}
		if !bytes.Equal(got.FH, args.FH) || got.Mask != args.Mask ||
			!slices.Equal(got.Access, canonical(access)) || !slices.Equal(got.Default, canonical(dflt)) {
			t.Fatalf("SETACL args: sent %v %v, got %v %v", access, dflt, got.Access, got.Default)
		}

		back, err := FromXattr(access.Xattr())
		if err != nil || !slices.Equal(back, access) {
			t.Fatalf("xattr of %v came back as %v, %v", access, back, err)
		}
	}
}

// TestLinuxWireForm checks the bytes of a minimal access ACL and an empty
// default ACL in a GETACL result against those knfsd sends: four entries
// with a mask like the owning group, the owner's ids in the owner entries,
// 0 in the others, NFS_ACL_DEFAULT on default entries.
func TestLinuxWireForm(t *testing.T) {
	var e xdr.Encoder
	r := Result{Mask: MaskACL | MaskDefault, Access: FromMode(0o754)}
	if err := PutResult(&e, &r, 1000, 100); err != nil {
		t.Fatal(err)
	}
	want := []uint32{
		MaskACL | MaskDefault,
		4, 4,
		0x01, 1000, 7,
		0x04, 100, 5,
		0x10, 0, 5,
		0x20, 0, 4,
		0, 0,
	}
	if got := words(e.Buf); !slices.Equal(got, want) {
		t.Fatalf("GETACL result\n got %v\nwant %v", got, want)
	}
	e = xdr.Encoder{}
	dflt := ACL{{TagUserObj, 0, 7}, {TagGroupObj, 0, 5}, {TagMask, 0, 7}, {TagOther, 0, 0}}
	_ = PutACL(&e, dflt, true, FlagDefault, 1, 2)
	want = []uint32{4, 4, 0x1001, 1, 7, 0x1004, 2, 5, 0x1010, 0, 7, 0x1020, 0, 0}
	if got := words(e.Buf); !slices.Equal(got, want) {
		t.Fatalf("default ACL\n got %v\nwant %v", got, want)
	}
	// Only the count asked for: the count, and no entries.
	e = xdr.Encoder{}
	_ = PutACL(&e, dflt, false, FlagDefault, 1, 2)
	if got := words(e.Buf); !slices.Equal(got, []uint32{4, 0}) {
		t.Fatalf("count only: %v", got)
	}
}

func words(b []byte) []uint32 {
	w := make([]uint32, len(b)/4)
	for i := range w {
		w[i] = binary.BigEndian.Uint32(b[4*i:])
	}
	return w
}

// TestXattrForm checks the xattr bytes of an ACL against the kernel's
// layout: version 2, then {tag, perm, id} little-endian.
func TestXattrForm(t *testing.T) {
	a := ACL{{TagUserObj, 5, 6}, {TagUser, 1001, 4}, {TagGroupObj, 0, 4}, {TagMask, 0, 6}, {TagOther, 0, 0}}
	want := []byte{
		2, 0, 0, 0,
		1, 0, 6, 0, 0xff, 0xff, 0xff, 0xff,
		2, 0, 4, 0, 0xe9, 0x03, 0, 0,
		4, 0, 4, 0, 0xff, 0xff, 0xff, 0xff,
		0x10, 0, 6, 0, 0xff, 0xff, 0xff, 0xff,
		0x20, 0, 0, 0, 0xff, 0xff, 0xff, 0xff,
	}
	if got := a.Xattr(); !bytes.Equal(got, want) {
		t.Fatalf("xattr\n got %x\nwant %x", got, want)
	}
}

func TestRejects(t *testing.T) {
	bad := map[string]ACL{
		"no mask with a named user": {{TagUserObj, 0, 7}, {TagUser, 5, 7}, {TagGroupObj, 0, 7}, {TagOther, 0, 0}},
		"two owners":                {{TagUserObj, 0, 7}, {TagUserObj, 0, 7}, {TagGroupObj, 0, 7}, {TagOther, 0, 0}},
		"same user twice":           {{TagUserObj, 0, 7}, {TagUser, 5, 7}, {TagUser, 5, 1}, {TagGroupObj, 0, 7}, {TagMask, 0, 7}, {TagOther, 0, 0}},
		"no other":                  {{TagUserObj, 0, 7}, {TagGroupObj, 0, 7}},
		"perm beyond rwx":           {{TagUserObj, 0, 8}, {TagGroupObj, 0, 7}, {TagOther, 0, 0}},
	}
	for name, a := range bad {
		if _, err := FromXattr(a.Xattr()); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
	// A count beyond the limit fails before anything is allocated.
	d := xdr.NewDecoder(words2bytes(MaxEntries+1, MaxEntries+1))
	if _, _ = GetACL(&d, true); d.Err() == nil {
		t.Error("accepted more than MaxEntries entries")
	}
	d = xdr.NewDecoder(words2bytes(1000, 1000, 1, 0, 7))
	if _, _ = GetACL(&d, true); d.Err() == nil {
		t.Error("accepted a count the message does not hold")
	}
	d = xdr.NewDecoder(words2bytes(4, 2, 1, 0, 7, 4, 0, 7))
	if _, _ = GetACL(&d, true); d.Err() == nil {
		t.Error("accepted fewer entries than the count when they were wanted")
	}
}

func words2bytes(w ...uint32) []byte {
	var e xdr.Encoder
	for _, x := range w {
		e.Uint32(x)
	}
	return e.Buf
}
