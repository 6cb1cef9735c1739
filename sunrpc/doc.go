// Package sunrpc is an ONC RPC version 2 client (RFC 5531).
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
// stats.go counts each procedure's calls, xprtstats.go the counters of
// every transport's "xprt:" line.
package sunrpc
