// Package nfs3 is a client for NFS version 3 (RFC 1813), its MOUNT
// protocol and the portmapper's GETPORT, over any sunrpc Transport.
//
// It owns the numbers of these protocols (programs, procedures, statuses)
// and the file types' Unix modes (filetype.go): the server, nfs3/server,
// and the FUSE filesystem, fs, take them from here.
//
// Every procedure encodes its arguments straight into the call's buffer and
// decodes its results straight out of the reply's, without reflection. The
// hot procedures (READ, WRITE, GETATTR, LOOKUP, ACCESS, COMMIT, READDIRPLUS)
// do not allocate. Each decoder checks every length against what remains of
// the reply, so a malformed or hostile reply is an error, never a panic or
// an allocation the reply asked for.
//
// The package marks the arguments and results that RPC-over-RDMA may move
// by direct data placement (RFC 8267): WRITE data and a SYMLINK path go in
// the call's Payload; READ data and a READLINK path may come back in the
// reply's Payload. It knows nothing else of RDMA.
package nfs3
