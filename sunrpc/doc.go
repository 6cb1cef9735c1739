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
package sunrpc
