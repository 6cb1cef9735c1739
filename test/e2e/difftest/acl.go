package difftest

import (
	"errors"
	"fmt"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/rdmafs/rdmafs/nfs3/acl"
)

// POSIX ACLs in scripts: SetACL writes a file's access or default ACL
// (Op.Default) as setfacl --set does, with the system.posix_acl_* extended
// attribute, from the short text form in Op.ACL ("u::rw-,u:2002:r--,g::---,
// m::r--,o::---"; an empty text removes the ACL); GetACL reads it back as
// that text, as getfacl would show it (ENODATA for none).

// aclXattr is the attribute of op's ACL.
func aclXattr(op Op) string {
	if op.Default {
		return acl.XattrDefault
	}
	return acl.XattrAccess
}

// setACL is the SetACL call.
func setACL(path string, op Op) Result {
	if op.ACL == "" {
		return result(0, unix.Removexattr(path, aclXattr(op)))
	}
	a, err := parseACL(op.ACL)
	if err != nil {
		return Result{Errno: err.Error()}
	}
	return result(0, unix.Setxattr(path, aclXattr(op), a.Xattr(), 0))
}

// getACL is the GetACL call.
func getACL(path string, op Op) Result {
	buf := make([]byte, 4+8*acl.MaxEntries)
	n, err := unix.Getxattr(path, aclXattr(op), buf)
	if err != nil {
		return result(0, err)
	}
	a, err := acl.FromXattr(buf[:n])
	if err != nil {
		return Result{Errno: err.Error()}
	}
	return Result{Ret: int64(len(a)), Data: formatACL(a)}
}

var aclTags = map[string][2]acl.Tag{ // named, unnamed
	"u": {acl.TagUser, acl.TagUserObj},
	"g": {acl.TagGroup, acl.TagGroupObj},
	"m": {0, acl.TagMask},
	"o": {0, acl.TagOther},
}

// parseACL reads the short text form of an ACL.
func parseACL(text string) (acl.ACL, error) {
	var a acl.ACL
	for _, ent := range strings.Split(text, ",") {
		f := strings.Split(ent, ":")
		if len(f) != 3 || len(f[2]) != 3 {
			return nil, fmt.Errorf("ACL entry %q", ent)
		}
		tags, ok := aclTags[f[0]]
		if !ok {
			return nil, fmt.Errorf("ACL entry %q", ent)
		}
		e := acl.Entry{Tag: tags[1], ID: acl.UndefinedID}
		if f[1] != "" {
			id, err := strconv.ParseUint(f[1], 10, 32)
			if err != nil || tags[0] == 0 {
				return nil, fmt.Errorf("ACL entry %q", ent)
			}
			e.Tag, e.ID = tags[0], uint32(id)
		}
		for i, bit := range []uint16{acl.PermRead, acl.PermWrite, acl.PermExec} {
			switch f[2][i] {
			case "rwx"[i]:
				e.Perm |= bit
			case '-':
			default:
				return nil, fmt.Errorf("ACL entry %q", ent)
			}
		}
		a = append(a, e)
	}
	a.Sort()
	if err := a.Valid(); err != nil {
		return nil, errors.New("invalid ACL " + text)
	}
	return a, nil
}

// formatACL writes the short text form of an ACL.
func formatACL(a acl.ACL) string {
	names := map[acl.Tag]string{acl.TagUserObj: "u", acl.TagUser: "u", acl.TagGroupObj: "g", acl.TagGroup: "g", acl.TagMask: "m", acl.TagOther: "o"}
	var b strings.Builder
	for i, e := range a {
		if i > 0 {
			b.WriteByte(',')
		}
		id := ""
		if e.Tag == acl.TagUser || e.Tag == acl.TagGroup {
			id = strconv.FormatUint(uint64(e.ID), 10)
		}
		perm := []byte("---")
		for j, bit := range []uint16{acl.PermRead, acl.PermWrite, acl.PermExec} {
			if e.Perm&bit != 0 {
				perm[j] = "rwx"[j]
			}
		}
		fmt.Fprintf(&b, "%s:%s:%s", names[e.Tag], id, perm)
	}
	return b.String()
}

// The script helpers of ACLs.

func (u as) setfacl(path, text string) Op { o := u.op(SetACL, path); o.ACL = text; return o }
func (u as) setdefacl(path, text string) Op {
	o := u.setfacl(path, text)
	o.Default = true
	return o
}
func (u as) getfacl(path string) Op   { return u.op(GetACL, path) }
func (u as) getdefacl(path string) Op { o := u.op(GetACL, path); o.Default = true; return o }

// aclCases are the scripts of POSIX ACLs: access a named-user or
// named-group entry grants beyond the mode bits, the mask that limits it,
// who may change an ACL, and default ACLs inherited by files and
// directories created in a directory.
func aclCases() []Case {
	return []Case{
		{"ACL named user and mask", []Op{
			alice.create("f", 0o600, "w"),
			alice.pwrite("w", 0, 100, 3),
			alice.close("w"),
			bob.readfile("f"),
			alice.getfacl("f"),
			alice.setfacl("f", "u::rw-,u:2002:rw-,g::---,m::rw-,o::---"),
			alice.stat("f"),
			bob.getfacl("f"),
			bob.readfile("f"),
			bob.open("f", unix.O_WRONLY, 0, "b"),
			bob.close("b"),
			bob.access("f", unix.R_OK|unix.W_OK),
			alice.setfacl("f", "u::rw-,u:2002:rw-,g::---,m::r--,o::---"),
			alice.stat("f"),
			bob.open("f", unix.O_WRONLY, 0, "b"),
			bob.access("f", unix.W_OK),
			bob.readfile("f"),
			bob.setfacl("f", "u::rw-,g::---,o::rw-"),
			alice.chmod("f", 0o660),
			alice.getfacl("f"),
			bob.open("f", unix.O_WRONLY, 0, "b"),
			bob.close("b"),
			alice.setfacl("f", "u::rw-,g::---,o::---"),
			alice.getfacl("f"),
			alice.stat("f"),
			bob.readfile("f"),
			root.setfacl("f", "u::rw-,u:2002:r--,g::---,m::r--,o::---"),
			bob.readfile("f"),
			alice.setfacl("f", ""),
			alice.getfacl("f"),
		}},
		{"ACL named group", []Op{
			alice.create("f", 0o600, "w"),
			alice.close("w"),
			alice.setfacl("f", "u::rw-,g::---,g:2002:r--,m::r--,o::---"),
			bob.readfile("f"),
			bob.access("f", unix.W_OK),
			root.readfile("f"),
			alice.mkdir("d", 0o700),
			alice.setfacl("d", "u::rwx,g::---,g:2002:-wx,m::rwx,o::---"),
			bob.create("d/g", 0o644, "b"),
			bob.close("b"),
			bob.readdir("d"),
			alice.readdir("d"),
			bob.unlink("d/g"),
		}},
		{"ACL default inherited", []Op{
			alice.mkdir("d", 0o755),
			alice.getdefacl("d"),
			alice.setdefacl("d", "u::rwx,u:2002:rwx,g::r-x,m::rwx,o::r-x"),
			alice.getdefacl("d"),
			alice.getfacl("d"),
			alice.stat("d"),
			alice.create("d/f", 0o666, "w"),
			alice.close("w"),
			alice.stat("d/f"),
			alice.getfacl("d/f"),
			alice.getdefacl("d/f"),
			alice.mkdir("d/s", 0o777),
			alice.stat("d/s"),
			alice.getfacl("d/s"),
			alice.getdefacl("d/s"),
			alice.create("d/p", 0o600, "w"),
			alice.close("w"),
			alice.getfacl("d/p"),
			bob.create("d/b", 0o644, "b"),
			bob.create("d/s/b", 0o644, "b"),
			bob.close("b"),
			bob.stat("d/s/b"),
			bob.getfacl("d/s/b"),
			bob.readfile("d/f"),
			bob.open("d/f", unix.O_WRONLY, 0, "b"),
			bob.close("b"),
			bob.setdefacl("d", ""),
			alice.setdefacl("d", ""),
			alice.getdefacl("d"),
			alice.create("d/g", 0o666, "w"),
			alice.close("w"),
			alice.stat("d/g"),
			alice.getfacl("d/g"),
			alice.setdefacl("d/f", "u::rwx,g::r-x,o::r-x"),
		}},
	}
}
