package server

import (
	"github.com/rdmafs/rdmafs/sunrpc"
)

// ErrClosed is returned by Serve after Close and by Session.Call after the
// session (or its server) closed.
var ErrClosed = sunrpc.ErrServerClosed

// call is an NFS call the front (nfsFront) hands to a worker: what the
// worker needs of it.
type call struct {
	xid, proc uint32
	cred      cred     // the caller, after the export's squashing
	args      *nfsArgs // decoded
	// w serves the call: it lives here so that serving allocates none.
	w worker
}

// worker serves one NFS call in one of the RPC session's workers: the
// procedures are its methods.
type worker struct {
	srv *Server
	req *sunrpc.Request // for the reply's placement and what runs after it
	cur *call           // the call being served
}

// serveNFS answers an NFS call the front let through (sunrpc.Proc.Serve).
func (s *Server) serveNFS(r *sunrpc.Request) []byte {
	c := r.State.(*call)
	w := &c.w
	*w = worker{srv: s, req: r, cur: c}
	if s.testHook != nil {
		s.testHook(w, c)
	}
	return w.answer(c)
}

// NewSession starts an RPC session (see sunrpc.Session) whose replies go
// to send. The caller vouches for the client: it must have checked
// AllowsClient for the client's address, and the calls count as coming
// from a secure port (as RPC-over-RDMA calls do; see Export.Insecure).
func (s *Server) NewSession(send func(reply []byte) error) *sunrpc.Session {
	return s.rpc.NewSession(func(reply []byte, _ sunrpc.Placement) error { return send(reply) },
		sunrpc.Peer{Admitted: true, Secure: true})
}
