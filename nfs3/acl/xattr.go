package acl

import (
	"encoding/binary"
	"fmt"
)

// The extended attributes that hold a file's POSIX ACLs on Linux.
const (
	XattrAccess  = "system.posix_acl_access"
	XattrDefault = "system.posix_acl_default"
)

// xattrVersion is POSIX_ACL_XATTR_VERSION, the header of the xattr form.
const xattrVersion = 2

// xattrEntrySize is the size of one entry of the xattr form:
// {tag u16, perm u16, id u32}, little-endian (posix_acl_xattr_entry).
const (
	xattrHeaderSize = 4
	xattrEntrySize  = 8
)

// Xattr returns the ACL in the Linux xattr form (posix_acl_xattr_header
// and entries); the ids of entries other than named users and groups are
// UndefinedID, as the kernel writes them.
func (a ACL) Xattr() []byte {
	b := make([]byte, 0, xattrHeaderSize+xattrEntrySize*len(a))
	b = binary.LittleEndian.AppendUint32(b, xattrVersion)
	for _, e := range a {
		id := e.ID
		if e.Tag != TagUser && e.Tag != TagGroup {
			id = UndefinedID
		}
		b = binary.LittleEndian.AppendUint16(b, uint16(e.Tag))
		b = binary.LittleEndian.AppendUint16(b, e.Perm)
		b = binary.LittleEndian.AppendUint32(b, id)
	}
	return b
}

// FromXattr decodes the Linux xattr form of an ACL, sorts it and checks
// that it is valid (see Valid). A header with no entries is an empty ACL.
func FromXattr(b []byte) (ACL, error) {
	if len(b) < xattrHeaderSize || (len(b)-xattrHeaderSize)%xattrEntrySize != 0 {
		return nil, fmt.Errorf("acl: xattr of %d bytes", len(b))
	}
	if v := binary.LittleEndian.Uint32(b); v != xattrVersion {
		return nil, fmt.Errorf("acl: xattr version %d", v)
	}
	n := (len(b) - xattrHeaderSize) / xattrEntrySize
	if n > MaxEntries {
		return nil, fmt.Errorf("%w: %d", ErrTooMany, n)
	}
	a := make(ACL, n)
	for i := range a {
		p := b[xattrHeaderSize+i*xattrEntrySize:]
		a[i] = Entry{
			Tag:  Tag(binary.LittleEndian.Uint16(p)),
			Perm: binary.LittleEndian.Uint16(p[2:]),
			ID:   binary.LittleEndian.Uint32(p[4:]),
		}
		if a[i].Tag != TagUser && a[i].Tag != TagGroup {
			a[i].ID = UndefinedID
		}
	}
	a.Sort()
	if err := a.Valid(); err != nil {
		return nil, err
	}
	return a, nil
}
