package server

import (
	"golang.org/x/sys/unix"

	"github.com/rdmafs/rdmafs/nfs3/nlm"
	"github.com/rdmafs/rdmafs/sunrpc"
)

// MayLock is the export's word on an NLM call about the file fh names, for
// the lock manager (lockd.Config.MayLock), as knfsd's nlm_fopen gives it:
// the call must be one the export would serve over NFS (admission, a
// reserved port unless insecure), fh one of the export's handles (else
// StatStaleFH), the file a regular one, and its caller, with the identity
// the export maps the call's credential to, must be able to read it or
// own it (nfsd_permission with NFSD_MAY_LOCK). Otherwise a client could
// lock what it may not open, and hold up every program that locks it;
// and the lock manager would keep locks on handles that name nothing.
// The kernel's client sends the credential of the process that opened
// the file, as rdmafs's does.
func (s *Server) MayLock(r *sunrpc.Request, fh []byte) nlm.Stat {
	if s.admission(r) != nil { // front.go
		return nlm.StatFailed
	}
	n, err := s.open(fh)
	if err != nil {
		return nlm.StatStaleFH
	}
	defer n.close()
	if !n.isReg() {
		return nlm.StatFailed
	}
	cr := s.opts.Export.squash(r.Cred)
	if n.st.Uid == cr.uid {
		return nlm.StatGranted
	}
	err = s.self.runAs(cr, func() error {
		return unix.Faccessat2(n.fd, "", unix.R_OK, unix.AT_EMPTY_PATH|unix.AT_EACCESS)
	})
	if err != nil {
		return nlm.StatFailed
	}
	return nlm.StatGranted
}
