// Package sunrpc is both ends of ONC RPC version 2 (RFC 5531), as the
// kernel's net/sunrpc holds both clnt and svc: the client of rdmafs's
// mounts and the server of `rdmafs serve`.
//
// # Client
//
// A Client sends calls of one program and version through a Transport and
// gives each call the policy of an NFS mount: a per-call timeout that grows
// with each try, retransmission on a new connection after a timeout, and hard
// or soft failure after the last try. A Transport carries whole call
// messages to one server and matches replies to calls by xid; TCP is the
// record-marking transport in this package, RPC-over-RDMA lives in xprtrdma.
//
// A call message is a head (the RPC header and the arguments), an optional
// payload (the one argument a transport may move by direct data placement,
// such as WRITE data) and a tail (whatever follows the payload), as the
// Linux client's xdr_buf is. A reply likewise has a body and, when the
// transport placed it apart, a payload (READ data).
//
// A call's way through the files:
//
//	client.go     Client.NewCall and Do: the xid, the call header
//	              (msg.go, auth.go), the tries and their timeouts, hard or
//	              soft, the reply header checked (msg.go)
//	transport.go  the Transport contract; Call and Reply
//	redial.go     a transport's one connection, dialled on demand, with
//	              the reconnect backoff
//	pending.go    a connection's table of calls in flight, which matches
//	              replies to calls by xid and wakes their callers
//	tcp.go        the TCP transport: slots, record marking, its reader
//	multi.go      nconnect: calls spread over several transports
//
// buffer.go has the pooled buffers replies and payloads live in;
// stats.go counts each procedure's calls, latency.go keeps their round
// trip and execute times as histograms, xprtstats.go the counters of
// every transport's "xprt:" line.
//
// # Server
//
// A Server serves the programs registered on it (Register: a program, a
// version and its table of procedures), over TCP (Serve) and over any
// transport that hands it whole call messages (NewSession; svcrdma for
// RPC-over-RDMA). Each connection is a Session: its calls are parsed,
// refused at the RPC level where they must be (RPC_MISMATCH, AUTH_BADCRED
// and AUTH_BADVERF, PROG_UNAVAIL, PROG_MISMATCH, PROC_UNAVAIL), then go to
// their procedure's Front, in the transport's goroutine, which answers
// what needs no worker (refusals of the program's own, GARBAGE_ARGS,
// cheap procedures) or leaves the call to Serve in one of the session's
// workers; a panic there is SYSTEM_ERR. Replies go out in any order.
//
//	svc.go        Server, Register and the dispatch by program, version
//	              and procedure; Request, Peer, Placement
//	svcmsg.go     the call header parsed, AUTH_SYS credentials; the
//	              reply and refusal encoders
//	svcsession.go Session: one connection's calls, its workers, replies
//	svctcp.go     the TCP serving loop: accept, records in and out, the
//	              idle and record body timeouts, the record size a
//	              client may send (small unless admitted), MaxConns
//	svcbudget.go  the memory budget: the bytes of large call records held
//	              from all TCP connections together and the buffers
//	              other transports reserve, shared fairly among hosts;
//	              HeapBound
//
// record.go has the record marking of TCP (RFC 5531 section 11), the
// client's and the server's; msg.go and auth.go the numbers of RPC
// messages and authentication, both ends'.
package sunrpc
