// Package lockd is the client side of the Network Lock Manager (NLM
// version 4, as Linux's fs/lockd/clntproc.c): it takes, tests and releases
// byte-range locks on the server's lock manager, so that they are shared
// with every client of the export.
//
// # Map
//
//   - client.go: Client, Dial (the server's lockd through its portmapper,
//     over TCP whatever carries NFS), and TEST, LOCK, CANCEL, UNLOCK with
//     the errno each NLM status means.
//   - owner.go: the svid each lock owner (a FUSE lock owner) goes by.
//   - held.go: the ranges each owner holds on each file, kept to reclaim
//     them after the server restarts.
//   - wait.go: blocked LOCKs waiting for the server's GRANTED callback, or
//     re-sent when it cannot reach this host (polling).
//   - callback.go: the callback service (GRANTED, GRANTED_MSG) on a TCP
//     port of its own, registered with this host's portmapper as NLM
//     version 4 only when no other lock manager is registered there.
//   - reclaim.go: the server's restarts, seen as its statd's state number
//     changing or as NLM4_DENIED_GRACE_PERIOD answers, and the reclaim of
//     every held lock.
//   - journal.go: the journal of what a client holds, by which the locks
//     of an rdmafs that died are dropped at the next mount.
//   - portmap.go: SET, UNSET and GETPORT on this host's portmapper.
//
// # Owners
//
// A server tells lock owners apart by the client host and the svid (Linux's
// lockd ignores the owner handle). The kernel's NLM client on the same
// host numbers its owners from 1, so rdmafs numbers its own from a random
// base above 2^30: neither the kernel's nor another rdmafs's owners on the
// same host are taken for its own.
package lockd
