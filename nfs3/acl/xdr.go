package acl

import (
	"errors"
	"fmt"

	"github.com/rdmafs/rdmafs/sunrpc/xdr"
)

// fhSize is the largest NFSv3 file handle (NFS3_FHSIZE).
const fhSize = 64

// entryWords is the size in XDR words of one entry on the wire: type, id,
// permissions.
const entryWords = 3

// ErrTooMany is the error of an ACL with more than MaxEntries entries.
var ErrTooMany = errors.New("acl: too many entries")

// PutACL encodes one ACL as Linux's nfsacl_encode does: the entry count,
// then the entries themselves if entries is set (an empty array if not).
// flag is FlagDefault for a default ACL, 0 for an access ACL. A three-entry
// (minimal) ACL goes out with a mask equal to the owning group's
// permissions, as other servers expect four entries at least; uid and gid
// are the owner's, sent as the ids of the owner and owning-group entries.
func PutACL(e *xdr.Encoder, a ACL, entries bool, flag uint32, uid, gid uint32) error {
	n := len(a)
	if n > 0 {
		n = max(n, 4)
	}
	if n > MaxEntries {
		return fmt.Errorf("%w: %d", ErrTooMany, len(a))
	}
	e.Uint32(uint32(n))
	if !entries {
		e.Uint32(0)
		return nil
	}
	e.Uint32(uint32(n))
	put := func(x Entry) {
		e.Uint32(uint32(x.Tag) | flag)
		switch x.Tag {
		case TagUserObj:
			e.Uint32(uid)
		case TagGroupObj:
			e.Uint32(gid)
		case TagUser, TagGroup:
			e.Uint32(x.ID)
		default:
			e.Uint32(0)
		}
		e.Uint32(uint32(x.Perm & permAll))
	}
	if len(a) == 3 {
		// Owner, owning group, a mask like it, other: the canonical
		// order, which Linux sends too.
		var mask Entry
		for _, x := range a {
			if x.Tag == TagGroupObj {
				mask = Entry{Tag: TagMask, Perm: x.Perm}
			}
		}
		for _, x := range a {
			if x.Tag == TagOther {
				put(mask)
			}
			put(x)
		}
		return nil
	}
	for _, x := range a {
		put(x)
	}
	return nil
}

// GetACL decodes one ACL and returns it with the entry count the sender
// gave. With want the entries must all be there; without, they may be
// left out (a count-only answer). The entries come back sorted, and a mask
// equal to the owning group's permissions in a four-entry ACL is dropped,
// as Linux's nfsacl_decode drops it: the ACL is then minimal again. The
// ACL is not checked for validity (see Valid).
func GetACL(d *xdr.Decoder, want bool) (ACL, uint32) {
	count := d.Uint32()
	n := d.Uint32()
	if d.Err() != nil {
		return nil, 0
	}
	switch {
	case count > MaxEntries || n > MaxEntries:
		d.Fail(fmt.Errorf("%w: %d", ErrTooMany, max(count, n)))
		return nil, 0
	case n > count || want && n != count:
		d.Fail(fmt.Errorf("acl: %d entries sent of a count of %d", n, count))
		return nil, 0
	case int(n)*entryWords*4 > d.Len():
		d.Fail(xdr.ErrShort)
		return nil, 0
	}
	if n == 0 {
		return nil, count
	}
	a := make(ACL, n)
	for i := range a {
		tag := Tag(d.Uint32() &^ FlagDefault)
		id := d.Uint32()
		perm := d.Uint32()
		switch tag {
		case TagMask:
			// Solaris sets further bits in the mask; Linux drops them.
			perm &= permAll
		case TagUserObj, TagUser, TagGroupObj, TagGroup, TagOther:
		default:
			d.Fail(fmt.Errorf("acl: entry %d: tag %#x", i, uint32(tag)))
			return nil, 0
		}
		if perm&^permAll != 0 {
			d.Fail(fmt.Errorf("acl: entry %d: permissions %#o", i, perm))
			return nil, 0
		}
		if tag != TagUser && tag != TagGroup {
			id = UndefinedID
		}
		a[i] = Entry{Tag: tag, ID: id, Perm: uint16(perm)}
	}
	a.Sort()
	if len(a) == 4 && a[2].Tag == TagMask && a[1].Tag == TagGroupObj && a[2].Perm == a[1].Perm {
		a = append(a[:2], a[3])
	}
	return a, count
}

// PutGetArgs encodes GETACL's arguments.
func PutGetArgs(e *xdr.Encoder, fh []byte, mask uint32) {
	e.Opaque(fh)
	e.Uint32(mask)
}

// GetGetArgs decodes GETACL's arguments.
func GetGetArgs(d *xdr.Decoder) (fh []byte, mask uint32) {
	fh = d.Opaque(fhSize)
	mask = d.Uint32()
	return fh, mask
}

// Result is what a successful GETACL returns after the file's attributes.
type Result struct {
	// Mask says what the result holds: the call's mask, as Linux echoes it.
	Mask                      uint32
	Access, Default           ACL
	AccessCount, DefaultCount uint32 // as sent (decoded results only)
}

// PutResult encodes r as Linux's knfsd does: both ACLs, each with its
// entries if the mask asks for them. uid and gid are the file's owner's.
func PutResult(e *xdr.Encoder, r *Result, uid, gid uint32) error {
	e.Uint32(r.Mask)
	if err := PutACL(e, r.Access, r.Mask&MaskACL != 0, 0, uid, gid); err != nil {
		return err
	}
	return PutACL(e, r.Default, r.Mask&MaskDefault != 0, FlagDefault, uid, gid)
}

// GetResult decodes a GETACL result after the file's attributes.
func GetResult(d *xdr.Decoder, r *Result) {
	r.Mask = d.Uint32()
	r.Access, r.AccessCount = GetACL(d, r.Mask&MaskACL != 0)
	r.Default, r.DefaultCount = GetACL(d, r.Mask&MaskDefault != 0)
}

// SetArgs is SETACL's arguments. An ACL the mask leaves out is sent empty;
// an empty default ACL removes the directory's default ACL.
type SetArgs struct {
	FH              []byte
	Mask            uint32
	Access, Default ACL
}

// PutSetArgs encodes SETACL's arguments as the Linux client does: the
// handle, the mask and both ACLs, each with its entries. uid and gid are
// the file's owner's.
func PutSetArgs(e *xdr.Encoder, a *SetArgs, uid, gid uint32) error {
	e.Opaque(a.FH)
	e.Uint32(a.Mask)
	var access, dflt ACL
	if a.Mask&MaskACL != 0 {
		access = a.Access
	}
	if a.Mask&MaskDefault != 0 {
		dflt = a.Default
	}
	if err := PutACL(e, access, true, 0, uid, gid); err != nil {
		return err
	}
	return PutACL(e, dflt, true, FlagDefault, uid, gid)
}

// GetSetArgs decodes SETACL's arguments. An ACL the mask leaves out is
// decoded and dropped, as knfsd drops it.
func GetSetArgs(d *xdr.Decoder, a *SetArgs) {
	a.FH = d.Opaque(fhSize)
	a.Mask = d.Uint32()
	a.Access, _ = GetACL(d, true)
	a.Default, _ = GetACL(d, true)
	if a.Mask&MaskACL == 0 {
		a.Access = nil
	}
	if a.Mask&MaskDefault == 0 {
		a.Default = nil
	}
}
