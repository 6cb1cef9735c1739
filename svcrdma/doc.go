// Package svcrdma is the server side of RPC-over-RDMA Version One (RFC
// 8166, RFC 8267, RFC 8797) over the verbs package: the listener of
// `rdmafs serve -o proto=rdma`, in front of a sunrpc.Server: each
// connection runs one of its sessions, which take whole call messages.
//
// It accepts connections with RFC 8797 private data, grants credits, pulls
// read chunks, pushes READ data into write chunks and large replies into
// reply chunks, and answers calls it cannot take with RDMA_ERROR: ERR_VERS
// for another version, ERR_CHUNK for chunks it cannot process. The wire
// format and the registered buffers are package rpcrdma's, which the
// client, xprtrdma, shares.
//
// The files follow the kernel's svcrdma: server.go listens and accepts
// (svc_rdma_transport.c), conn.go is one connection's call table and
// completion loop, buffers.go its buffers, which grow by slabs as calls
// need them, within the server's memory budget, and shrink when idle,
// recvfrom.go takes calls and pulls their read chunks
// (svc_rdma_recvfrom.c) and sendto.go sends replies (svc_rdma_sendto.c).
package svcrdma
