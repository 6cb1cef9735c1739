// Package rpcrdma is what the two ends of RPC-over-RDMA Version One share:
// the transport header (RFC 8166 section 4, header.go), the connection
// private data (RFC 8797, privdata.go), registered memory cut into blocks
// (arena.go) and the encoding of work request ids (wrid.go). The client,
// xprtrdma, and the server, svcrdma, import it, as the Linux client and
// server share <linux/sunrpc/rpc_rdma.h>.
package rpcrdma
