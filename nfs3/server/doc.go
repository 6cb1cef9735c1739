// Package server is the engine of "rdmafs serve": an NFSv3 and MOUNT v3
// server that exports an existing directory as "/", with knfsd's semantics
// and knfsd's export defaults (exports(5)).
//
// Linux only, and it must run as root: file handles come from
// name_to_handle_at and are opened with open_by_handle_at
// (CAP_DAC_READ_SEARCH), and each call is served with its caller's
// credentials (CAP_SETUID, CAP_SETGID).
//
// # Shape
//
// The RPC side is package sunrpc's: New registers NFS v3 and MOUNT v3 on a
// sunrpc.Server (RPC), which parses the RPC header, refuses what it must
// at the RPC level, and runs one session per connection (Serve for TCP;
// svcrdma's listener for RPC-over-RDMA). The front (front.go: each
// procedure's Front) applies the export's access rules (clients, secure
// ports, squashing: see Export), decodes the arguments (args.go) and
// answers what does not need the filesystem: NULL, MOUNT, malformed
// arguments, bad handles and names. Every other call goes to one of the
// session's workers (session.go: serveNFS), up to Options.Workers calls at
// once, whose replies may go out in any order.
//
// # Semantics
//
//   - File handles are the kernel's (type and bytes, versioned, at most 64
//     bytes): they survive renames and restarts of the server, like knfsd's.
//     A handle that does not decode, whose object is gone, or whose object
//     lies outside the export, is NFS3ERR_STALE.
//   - A call works on descriptors, never on paths: its handle is opened
//     with open_by_handle_at and every name is looked up in that directory's
//     descriptor, so objects at any depth (paths beyond PATH_MAX) are served
//     alike.
//   - Every filesystem system call of a call runs on a locked OS thread with
//     the call's identity as filesystem credentials: its AUTH_SYS uid, gid
//     and groups after the export's squashing (root_squash by default), or
//     the anonymous identity for AUTH_NONE. The kernel therefore enforces
//     permissions, new files belong to the caller, and a write by someone
//     without CAP_FSETID clears setuid and setgid (a SETATTR of the size
//     keeps them, as knfsd's does). As in knfsd, the owner of
//     a file may read and write it whatever its mode, and whoever may execute
//     a file may read it.
//   - Attributes are the file's own, from statx: atime, mtime and ctime with
//     nanoseconds. SETATTR sets times to the client's value or to the
//     server's time (UTIME_NOW, which needs only write permission).
//   - ACCESS is the kernel's answer (faccessat2) for the caller.
//   - The lock manager (package lockd) asks MayLock (lockcheck.go) before
//     a TEST, LOCK or SHARE: a handle of the export, a regular file, and
//     a caller who may read it or owns it, as knfsd's nlm_fopen.
//   - Symbolic links are never followed by the server and no lookup leaves
//     the export or crosses into another mount below it (openat2 with
//     RESOLVE_BENEATH, RESOLVE_NO_SYMLINKS and RESOLVE_NO_XDEV); mount points
//     are left out of listings.
//   - MOUNT mounts the export's root (as "/" or, as mountd takes it, the
//     empty path) or any directory below it; EXPORT lists "/" with its
//     clients (showmount -e).
//   - READDIR cookies are the filesystem's directory offsets, as knfsd's are:
//     a listing keeps no state on the server.
//   - The WRITE/COMMIT verifier is new at each New, so clients resend
//     uncommitted data after a restart. UNSTABLE writes are answered
//     UNSTABLE and synced by COMMIT; DATA_SYNC and FILE_SYNC are synced
//     before the reply.
//   - Files of callers served as the server itself stay open between calls
//     (see fileCache) and are closed when their name is removed or renamed
//     over, or after two idle seconds, as knfsd's file cache does.
//
// # Limits
//
//   - A TCP record longer than the largest valid call (a 1 MiB WRITE) ends
//     its connection before anything of it is read; the large parts of call
//     records held from all TCP connections together, being received or in
//     service, and RPC-over-RDMA buffers beyond each connection's first
//     stay within one budget (sunrpc's receive budget).
//   - At most Options.MaxConns connections are served, TCP and RDMA
//     together (the least recently active goes to make room), and a TCP
//     connection with nothing to do for Options.IdleTimeout (six minutes,
//     as knfsd) is closed.
//   - CREATE EXCLUSIVE answers NFS3ERR_NOTSUPP; clients fall back to
//     GUARDED, whose existence check and creation are not atomic.
package server
