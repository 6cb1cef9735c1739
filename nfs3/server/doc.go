// Package server is the engine of "rdmafs serve": a small NFSv3 server that
// exports an existing directory as "/", built on github.com/willscott/go-nfs.
//
// Linux only, and it must run as root: file handles come from
// name_to_handle_at and are opened with open_by_handle_at
// (CAP_DAC_READ_SEARCH), and each call is served with its caller's
// credentials (CAP_SETUID, CAP_SETGID).
//
// # Shape
//
// A transport hands a Session whole RPC call messages (Session.Call) and
// gets replies back through a send function; Serve runs one Session per TCP
// connection, and an RPC-over-RDMA listener can do the same per RDMA
// connection. In a Session, the front parses the RPC header and walks the
// arguments itself, and answers what does not need the filesystem: RPC
// refusals, NULL, all of MOUNT, malformed arguments, bad handles and names.
// Every other call goes to one of the session's workers; a worker is one
// go-nfs server and connection over an in-memory pipe, so a session serves
// up to Options.Workers calls at once although go-nfs serves one call at a
// time per connection. The NFS procedures go-nfs gets wrong are answered by
// the worker itself (see frontAnswers); replies go-nfs produces are
// corrected where its error mapping loses the cause (see fixReply).
//
// # Semantics
//
//   - File handles are the kernel's (type and bytes, versioned, at most 64
//     bytes): they survive renames and restarts of the server, like knfsd's.
//     A handle that does not decode, or whose file is gone, is NFS3ERR_STALE.
//   - Every filesystem system call of a call runs on a locked OS thread with
//     the call's AUTH_SYS uid, gid and groups as filesystem credentials
//     (AUTH_NONE is nobody, 65534), so the kernel enforces permissions and
//     new files belong to the caller. There is no root squashing: uid 0 keeps
//     root's rights (within the export). As in knfsd, the owner of a file
//     may read and write it whatever its mode, and whoever may execute a file
//     may read it.
//   - ACCESS is the kernel's answer (faccessat2) for the caller.
//   - Symbolic links are never followed by the server and no path leaves the
//     export or crosses into another mount below it (openat2 with
//     RESOLVE_BENEATH, RESOLVE_NO_SYMLINKS and RESOLVE_NO_XDEV).
//   - The WRITE/COMMIT verifier is new at each New, so clients resend
//     uncommitted data after a restart. UNSTABLE writes are answered
//     UNSTABLE and synced by COMMIT; DATA_SYNC and FILE_SYNC are synced
//     before the reply.
//
// # Limitations (from go-nfs)
//
//   - Attributes carry mtime as atime and ctime too (go-nfs builds fattr3
//     from os.FileInfo). fattr3.mode also carries go-nfs's os.FileMode type
//     bits above bit 15; clients must mask it with 07777 (Linux does).
//   - CREATE EXCLUSIVE answers NFS3ERR_NOTSUPP; clients fall back to GUARDED,
//     whose existence check and creation are not atomic.
//   - go-nfs works on paths, so a handle is turned into the file's current
//     path for each call. A file (not a directory) whose dentry the kernel
//     has evicted comes back without a path; the server then tries the path
//     it last gave the handle out for and a bounded search of the tree, and
//     answers STALE if both fail.
//   - READDIR(PLUS) listings are snapshots taken at cookie 0 and kept for
//     the following pages (bounded cache; an evicted listing is rebuilt and
//     stays valid if the directory did not change).
package server
