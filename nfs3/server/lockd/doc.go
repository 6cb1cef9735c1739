// Package lockd is the lock manager of rdmafs serve: NLM version 4 (the
// Network Lock Manager, program 100021) and a minimal NSM (program 100024)
// served on the server's sunrpc.Server, so that every client of an export
// sees the byte-range locks of every other, as with Linux's knfsd and its
// lockd (fs/lockd) and statd.
//
// # Map
//
//   - table.go: Table, the byte-range locks of every file with POSIX
//     semantics (posix_lock_file): per owner (client host, a caller_name
//     at an address, and svid, as Linux's lockd keys owners; the owner
//     handle only names a holder),
//     shared or exclusive, 64-bit ranges with length 0 meaning to the end
//     of the file, merged and split as locks and unlocks come, counted per
//     host and in all.
//   - server.go: Config, Server (New, Register, Close), the client hosts
//     it monitors and the grace period.
//   - nlmproc.go: the NLM4 procedures: NULL, TEST, LOCK and NM_LOCK,
//     CANCEL, UNLOCK, GRANTED_RES (taken and ignored), SHARE and UNSHARE
//     (share.go), FREE_ALL, a TEST, LOCK or SHARE after the export's
//     word that its caller may lock the file (Config.MayLock); async.go: the
//     asynchronous TEST_MSG, LOCK_MSG, CANCEL_MSG and UNLOCK_MSG, answered
//     as knfsd answers them, with a call of the client's _RES procedure,
//     and the calls to a client's lockd.
//   - block.go: blocked LOCKs: queued per file, granted in order when what
//     stood in their way goes, and announced with a GRANTED call to the
//     client's lockd, found as knfsd finds it, through the client host's
//     rpcbind (NLM v4 over TCP). A client that cannot be reached, or that
//     answers it no longer waits, gets the lock taken back.
//   - nsm.go: the NSM procedures and the SM_NOTIFY the server sends, at
//     start, to the clients that held locks before; udp.go: NSM, and the
//     host statd's callback, over UDP; hoststatd.go: monitoring through
//     the host's rpc.statd where one runs.
//   - statedir.go: the state directory.
//
// # Restarts and reboots
//
// The server runs its own minimal NSM for what only it can know (whom
// to tell of its restart, whether to keep a grace period), whether or not
// the host's rpc.statd runs. Its state directory (Config.StateDir)
// holds its NSM state number, made the next odd number at each start, and
// the client hosts that hold locks or took some within Config.HostExpiry
// (caller_name and address). When a new
// start finds clients there, the server keeps a grace period
// (Config.GraceTime, 90 s as knfsd's): TEST, UNLOCK, CANCEL and any LOCK
// or SHARE that is not a reclaim get NLM4_DENIED_GRACE_PERIOD, reclaims
// are granted; and it sends each recorded client's statd (found through
// the client's rpcbind) SM_NOTIFY with its name and new state, so that
// the client's lockd reclaims. When no client held locks, there is no
// grace period. After it, a reclaim is refused (NLM4_DENIED_NOLOCKS), as
// Linux's lockd refuses it.
//
// A client that reboots loses its locks when its statd's SM_NOTIFY
// reaches this NSM (over UDP, as sm-notify sends it, or TCP; matched by
// the name it gives or by the address it comes from), when its lockd
// sends FREE_ALL, or when the grant of a blocked request finds its lockd
// gone. On a host whose rpc.statd runs, NSM's registration with rpcbind
// is statd's and the notice goes there: with Config.HostStatd the server
// then asks that statd to monitor each client host (SM_MON, by address,
// as Linux's lockd does), and statd calls NLM version 3's SM_NOTIFY back
// (hoststatd.go), which ServeUDP answers.
//
// # Bounds
//
// A client host holds at most Config.MaxLocksPerHost locks (and as many
// shares) and Config.MaxBlockedPerHost blocked requests; the server keeps
// at most Config.MaxHosts hosts, Config.MaxLocks locks and a quarter as
// many blocked requests in all. Past a
// bound a request gets NLM4_DENIED_NOLOCKS, an unlock that would split a
// lock too (as posix_lock_file's ENOLCK). Every name and handle is bounded
// by the protocol (nfs3/nlm's decoders), so what a hostile client can make
// the server keep is bounded by these numbers times 2 KB (a lock) or 4 KB
// (a blocked request) or so.
package lockd
