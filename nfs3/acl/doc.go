// Package acl is the NFSACL side protocol of NFSv3 (program 100227,
// version 3: GETACL and SETACL), as Linux speaks it (fs/nfs_common/nfsacl.c,
// fs/nfsd/nfs3acl.c), and the Linux extended-attribute form of a POSIX ACL
// (system.posix_acl_access, system.posix_acl_default).
//
// acl.go holds the protocol's numbers and the ACL type; xdr.go encodes and
// decodes the procedures' arguments and the ACLs of their results; xattr.go
// converts an ACL to and from the xattr format. Every decoder is bounded:
// no ACL has more than MaxEntries entries, and a count is checked against
// what remains of the message before anything is allocated for it.
//
// The package knows nothing of file handles' or attributes' insides: the
// NFS client (package nfs3) and server (nfs3/server) encode those around it.
package acl
