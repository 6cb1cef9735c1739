// Package xprtrdma is the RPC-over-RDMA Version One client transport of
// rdmafs (RFC 8166, with the NFS binding of RFC 8267 and the connection
// private data of RFC 8797), over the verbs package. The server is
// package svcrdma; both take the wire format and the registered buffers
// from package rpcrdma.
//
// The client (Transport) implements sunrpc.Transport. Each call goes out
// in one Send: inline when it fits, else with its payload (WRITE data) in a
// read chunk the server pulls with RDMA Read, else whole in a position-zero
// read chunk (RDMA_NOMSG). A reply that may not fit inline comes back by
// RDMA Write: READ data into a write chunk, any other large reply into a
// reply chunk. Chunks point into registered buffers; READ data lands where
// the caller reads it, and a payload already in one of the transport's
// buffers (PayloadBuffer) is not copied. Memory registration follows the
// memreg strategy: per-call memory windows (the default: no rkey stays
// valid after its call), per-call registration, or one persistent
// registration for trusted fabrics.
//
// The transport follows the Linux client: credits start at 1 per
// connection and never exceed the server's grant (nor what the device's
// queues hold), a Receive is posted before every Send, a call is never
// retransmitted on the connection that lost it, and failed connection
// attempts back off from 5 s doubling to 30 s. A lost connection that
// carried replies is redialled at once, and a caller waiting out a
// backoff dials as soon as the server answers again (with a provider that
// can probe).
//
// The files follow the kernel's split (transport.c, rpc_rdma.c, verbs.c,
// frwr_ops.c). A call's way through them:
//
//	transport.go   RoundTrip: the connection (dialled by a sunrpc.Redialer),
//	               then a credit, the send, the wait for the reply
//	credits.go     a credit per call, returned by its reply; the credits
//	               asked for, fitted to what the device's queues hold
//	marshal.go     how the call goes (inline, read chunk, RDMA_NOMSG) and
//	               how its reply may come (inline, write chunk, reply
//	               chunk); the transport header and the Send
//	memreg.go      exposing chunk buffers to the server for one call, and
//	               revoking them, per memreg strategy
//	send.go        the call's buffers, its entry in the table of calls in
//	               flight (sunrpc.Pending), its Receive and Send posted
//	reaper.go      the turn at the completion queue: the caller waiting
//	               for its reply polls it while nobody else does
//	completion.go  every work completion
//	sendqueue.go   Sends signaled one in a batch, retired in order
//	reply.go       a Receive: its transport header, the call it answers,
//	               the chunks the server used, the exposures revoked, the
//	               reply delivered
//	teardown.go    the end of a connection: what its calls held given back
//
// endpoint.go is one connection's verbs resources (device, protection
// domain, registrations, queue pair), request.go a call's buffers and
// state on its connection, stats.go the counters of the "xprt: rdma" line.
package xprtrdma
