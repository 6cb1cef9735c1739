package acl

import (
	"fmt"
	"slices"
)

// The NFSACL program.
const (
	Program = 100227
	Version = 3

	ProcNull   = 0
	ProcGetACL = 1
	ProcSetACL = 2
)

// ProcNames names the procedures in statistics; index = procedure.
var ProcNames = []string{"NULL", "GETACL", "SETACL"}

// The mask of GETACL and SETACL: which ACLs, and which entry counts, the
// call is about.
const (
	MaskACL          = 0x0001 // NFS_ACL: the access ACL's entries
	MaskACLCount     = 0x0002 // NFS_ACLCNT: its entry count
	MaskDefault      = 0x0004 // NFS_DFACL: the default ACL's entries
	MaskDefaultCount = 0x0008 // NFS_DFACLCNT: its entry count
	MaskAll          = 0x000f // NFS_ACL_MASK: every bit a call may set
)

// MaxEntries bounds the entries of one ACL (NFS_ACL_MAX_ENTRIES).
const MaxEntries = 1024

// Tag is the type of an ACL entry: the Linux ACL_* values, which NFSACL
// and the xattr format share.
type Tag uint16

const (
	TagUserObj  Tag = 0x01 // ACL_USER_OBJ: the owner
	TagUser     Tag = 0x02 // ACL_USER: a named user
	TagGroupObj Tag = 0x04 // ACL_GROUP_OBJ: the owning group
	TagGroup    Tag = 0x08 // ACL_GROUP: a named group
	TagMask     Tag = 0x10 // ACL_MASK: the most a group-class entry grants
	TagOther    Tag = 0x20 // ACL_OTHER: everyone else
)

// FlagDefault marks on the wire an entry of a default ACL
// (NFS_ACL_DEFAULT); it is not part of the tag.
const FlagDefault = 0x1000

// UndefinedID is the id of an entry that names no one (ACL_UNDEFINED_ID).
const UndefinedID = 0xffffffff

// The permission bits of an entry.
const (
	PermRead  = 4
	PermWrite = 2
	PermExec  = 1
	permAll   = PermRead | PermWrite | PermExec
)

// Entry is one entry of an ACL. ID is the uid or gid of a TagUser or
// TagGroup entry and means nothing for the others.
type Entry struct {
	Tag  Tag
	ID   uint32
	Perm uint16
}

// ACL is a POSIX ACL. A nil or empty ACL is none.
type ACL []Entry

// Sort puts the entries in the order Linux keeps them: by tag, then named
// users and groups by id.
func (a ACL) Sort() {
	slices.SortStableFunc(a, func(x, y Entry) int {
		if x.Tag != y.Tag {
			return int(x.Tag) - int(y.Tag)
		}
		if x.Tag == TagUser || x.Tag == TagGroup {
			switch {
			case x.ID < y.ID:
				return -1
			case x.ID > y.ID:
				return 1
			}
		}
		return 0
	})
}

// Valid reports why a sorted ACL is not one Linux accepts
// (posix_acl_valid): exactly one owner, owning-group and other entry, no
// id twice, a mask when there is a named entry, no permission beyond rwx.
// An empty ACL is valid.
func (a ACL) Valid() error {
	if len(a) == 0 {
		return nil
	}
	var count [0x21]int
	for i, e := range a {
		switch e.Tag {
		case TagUserObj, TagUser, TagGroupObj, TagGroup, TagMask, TagOther:
		default:
			return fmt.Errorf("acl: entry %d: tag %#x", i, uint16(e.Tag))
		}
		if e.Perm&^permAll != 0 {
			return fmt.Errorf("acl: entry %d: permissions %#o", i, e.Perm)
		}
		if i > 0 {
			p := a[i-1]
			if p.Tag > e.Tag || p.Tag == e.Tag && (e.Tag != TagUser && e.Tag != TagGroup || p.ID >= e.ID) {
				return fmt.Errorf("acl: entry %d out of order or repeated", i)
			}
		}
		count[e.Tag]++
	}
	if count[TagUserObj] != 1 || count[TagGroupObj] != 1 || count[TagOther] != 1 {
		return fmt.Errorf("acl: needs one owner, owning group and other entry")
	}
	if (count[TagUser] > 0 || count[TagGroup] > 0) && count[TagMask] == 0 {
		return fmt.Errorf("acl: named entries without a mask")
	}
	return nil
}

// Minimal reports whether the ACL says no more than a file's mode bits:
// owner, owning group and other only (and a mask equal to the group's,
// which the wire form adds).
func (a ACL) Minimal() bool {
	for _, e := range a {
		if e.Tag == TagUser || e.Tag == TagGroup {
			return false
		}
	}
	return len(a) <= 3 || len(a) == 4 && a.perm(TagMask) == a.perm(TagGroupObj)
}

// perm is the permissions of the first entry with tag t, 0 if none.
func (a ACL) perm(t Tag) uint16 {
	for _, e := range a {
		if e.Tag == t {
			return e.Perm
		}
	}
	return 0
}

// FromMode is the minimal ACL of the mode bits: what a file without an
// access ACL has (posix_acl_from_mode).
func FromMode(mode uint32) ACL {
	return ACL{
		{Tag: TagUserObj, ID: UndefinedID, Perm: uint16(mode>>6) & permAll},
		{Tag: TagGroupObj, ID: UndefinedID, Perm: uint16(mode>>3) & permAll},
		{Tag: TagOther, ID: UndefinedID, Perm: uint16(mode) & permAll},
	}
}

// Mode is the mode bits an access ACL stands for: the owner's, the mask's
// (or the owning group's if there is no mask) and other's permissions.
func (a ACL) Mode() uint32 {
	group := a.perm(TagGroupObj)
	for _, e := range a {
		if e.Tag == TagMask {
			group = e.Perm
		}
	}
	return uint32(a.perm(TagUserObj))<<6 | uint32(group)<<3 | uint32(a.perm(TagOther))
}
