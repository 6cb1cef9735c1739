// Package nlm holds the messages of the Network Lock Manager, version 4
// (program 100021; the Open Group's XNFS and RFC 1813's appendix II), and
// of the Network Status Monitor it relies on (NSM, statd: program 100024,
// version 1), with their XDR codecs in both directions: a client encodes
// arguments and decodes results, a server decodes arguments and encodes
// results. Its behaviour on the wire is that of Linux's lockd (fs/lockd)
// where the specifications leave room.
//
// # Map
//
//   - nlm4.go: the program, version, procedure numbers (with the _MSG and
//     _RES asynchronous forms and which messages each takes), the limits on
//     lengths, nlm4_stats (Stat) and the share modes.
//   - lock.go: the lock (nlm4_lock), the holder of a conflicting lock
//     (nlm4_holder) and the share reservation (nlm4_share).
//   - args.go: the arguments of the NLM4 requests (nlm4_testargs,
//     nlm4_lockargs, nlm4_cancargs, nlm4_unlockargs, nlm4_shareargs) and of
//     FREE_ALL (nlm4_notify).
//   - results.go: the results (nlm4_testres, nlm4_res, nlm4_shareres),
//     which are also the arguments of the _RES procedures.
//   - nsm.go: NSM's program, procedures and messages (sm_name, my_id,
//     mon_id, mon, sm_stat_res, sm_stat, stat_chge) and sm_status, the
//     arguments of the callback statd makes when a monitored host restarts.
//   - codec.go: the Message interface every type above satisfies, Unmarshal,
//     and the decoding rules they share.
//   - nsmclient.go: NSMClient, which calls a statd (SM_STAT, SM_MON,
//     SM_UNMON, SM_UNMON_ALL, SM_NOTIFY) over sunrpc. The NLM client is
//     fs/lockd, the lock manager of rdmafs serve nfs3/server/lockd.
//
// # Decoding
//
// Every length read from the wire is checked against the protocol's limit
// (MaxStrLen, MaxNetobjLen, SMMaxStrLen) before anything is copied, and
// against what remains of the message, so a hostile message costs at most
// its own size in memory and is an error, never a panic. An error names
// the field and, for lengths, wraps ErrTooLong. Enums are checked (Linux's
// lock client refuses an unknown nlm4_stats too); bools follow Linux: any
// value but zero is true.
//
// A decoded message owns its bytes: Decode copies every variable-length
// field into that field's own backing array, so nothing aliases the
// receive buffer, which the transport reuses once the call ends. Decoding
// into the same value again reuses those arrays, so a server that keeps one
// value per worker, and calls Decode on its concrete type, decodes without
// allocating.
package nlm
