package server

import (
	"errors"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/rdmafs/rdmafs/nfs3"
	"github.com/rdmafs/rdmafs/sunrpc"
	"github.com/rdmafs/rdmafs/sunrpc/xdr"
)

// The numbers of the protocols the front answers (programs, procedures,
// statuses) are package nfs3's, those of RPC messages themselves package
// sunrpc's.

// nobody is knfsd's default anonuid and anongid.
const nobody = 65534

// register serves NFS v3, MOUNT v3 and NFSACL v3 (nfsacl.go) on rpc: the RPC header, the
// program, version and procedure are sunrpc's to check, the rest of a
// call this package's front's (the procedures' Front) and workers' (their
// Serve).
func (s *Server) register(rpc *sunrpc.Server) {
	nfs := make([]sunrpc.Proc, nfs3.ProcCommit+1) // COMMIT is the last
	nfs[nfs3.ProcNull] = sunrpc.NullProc
	for proc := range nfs[1:] {
		nfs[1+proc] = sunrpc.Proc{Front: s.nfsFront, Serve: s.serveNFS}
	}
	rpc.Register(nfs3.Program, nfs3.Version, nfs)

	mount := make([]sunrpc.Proc, nfs3.MountProcExport+1) // EXPORT is the last
	mount[0] = sunrpc.NullProc
	mount[nfs3.MountProcMnt] = sunrpc.Proc{Front: s.mountFront}
	// The server keeps no mount list: DUMP is an empty mountlist, and
	// UMNT and UMNTALL have nothing to forget.
	mount[nfs3.MountProcDump] = sunrpc.Proc{Front: func(r *sunrpc.Request) []byte { return acceptedReply(r.Xid, sunrpc.Success, 0) }}
	mount[nfs3.MountProcUmnt] = sunrpc.NullProc
	mount[nfs3.MountProcUmntAll] = sunrpc.NullProc
	mount[nfs3.MountProcExport] = sunrpc.Proc{Front: s.exportFront}
	rpc.Register(nfs3.MountProgram, nfs3.MountVersion, mount)

	s.registerNFSACL(rpc)
}

// admit is the RPC server's Admit: whether the export lets a TCP
// connection's client in. One it does not is still served NULL and the
// MOUNT procedures that only describe the server.
func (s *Server) admit(p *sunrpc.Peer) bool {
	if p.Remote.IsValid() && p.Local.IsValid() && s.opts.Export.allows(p.Remote.Addr(), p.Local.Addr()) {
		return true
	}
	s.logf("server: connection from %v: not among the export's clients; refusing its calls", p.Remote)
	return false
}

// largeCalls is the RPC server's LargeCalls: whether an admitted TCP
// connection's client may send records of more than a few KiB. One calling
// from an unreserved port of a secure export may not: every call it could
// make large (a WRITE, a SYMLINK) it would get NFS3ERR_PERM for, so the
// server does not take its bodies in.
func (s *Server) largeCalls(p *sunrpc.Peer) bool { return p.Secure || s.opts.Export.Insecure }

// nfsFront is the front of every NFS procedure but NULL: it applies the
// export's rules (admission, squashing), decodes the arguments and answers
// what needs no filesystem (malformed arguments, bad handles and names);
// every other call it leaves to a worker (serveNFS).
func (s *Server) nfsFront(r *sunrpc.Request) []byte {
	if refusal := s.admission(r); refusal != nil {
		return refusal
	}
	cr := s.opts.Export.squash(r.Cred)
	args, ok := decodeArgs(r.Prog, r.Proc, r.Args)
	if !ok {
		return garbageArgs(r.Xid)
	}
	if st := args.frontStatus(r.Proc); st != nfs3.OK {
		return nfsErrorReply(r.Xid, r.Proc, st)
	}
	r.State = &call{xid: r.Xid, proc: r.Proc, cred: cr, args: args}
	return nil
}

// admission refuses what the export does not let this client do, as knfsd
// does: a client not in the export's list gets no NFS service (AUTH_ERROR,
// AUTH_TOOWEAK); a call from an unreserved port on a "secure" export gets
// NFS3ERR_PERM. It returns nil for a call the client may make.
func (s *Server) admission(r *sunrpc.Request) []byte {
	switch {
	case !r.Peer.Admitted:
		return deniedReply(r.Xid, sunrpc.RejectAuthError, sunrpc.AuthTooWeak)
	case !r.Peer.Secure && !s.opts.Export.Insecure:
		return nfsErrorReply(r.Xid, r.Proc, nfs3.ErrPerm)
	}
	return nil
}

// mountFront answers MOUNTPROC3_MNT, as mountd does: a client not in the
// export's list, or calling from an unreserved port when the export is
// "secure", gets MNT3ERR_ACCES.
func (s *Server) mountFront(r *sunrpc.Request) []byte {
	if !r.Peer.Admitted || !r.Peer.Secure && !s.opts.Export.Insecure {
		s.logf("server: refused MOUNT from %s: %s", r.Peer, refusal(r.Peer))
		return mountStatusReply(r.Xid, nfs3.MountErrAcces)
	}
	args, ok := decodeArgs(r.Prog, r.Proc, r.Args)
	if !ok {
		return garbageArgs(r.Xid)
	}
	return s.mountReply(r.Xid, args.dirpath)
}

func refusal(p *sunrpc.Peer) string {
	if !p.Admitted {
		return "not in the export's clients"
	}
	return "unreserved source port (the export is secure; the client needs resvport, or serve -o insecure)"
}

// exportFront answers MOUNTPROC3_EXPORT: one export, "/", with the clients
// it allows as its groups, as mountd lists them (showmount -e).
func (s *Server) exportFront(r *sunrpc.Request) []byte {
	w := successHeader(r.Xid)
	w.Bool(true)
	w.Opaque([]byte("/"))
	for _, name := range s.opts.Export.clientNames(r.Peer.Local.Addr()) {
		w.Bool(true)
		w.Opaque([]byte(name))
	}
	w.Bool(false) // end of groups
	w.Bool(false) // no further export
	return w.Buf
}

// The reply encoders are sunrpc's; these short names keep the procedures
// readable.

func acceptedReply(xid uint32, stat sunrpc.AcceptStat, words ...uint32) []byte {
	return sunrpc.AcceptedReply(xid, stat, words...)
}

func deniedReply(xid, stat uint32, words ...uint32) []byte {
	return sunrpc.DeniedReply(xid, stat, words...)
}

func successHeader(xid uint32) *xdr.Encoder { return sunrpc.SuccessHeader(xid) }

// mountStatusReply is a MNT reply without a handle.
func mountStatusReply(xid uint32, status nfs3.MountStatus) []byte {
	w := successHeader(xid)
	w.Uint32(uint32(status))
	return w.Buf
}

// mountReply answers MOUNTPROC3_MNT: the handle of the export's root, or of a
// directory below it (knfsd's mountd mounts subdirectories of an export too),
// and AUTH_SYS. The path is looked up as the server, confined like every
// lookup (no symlinks, no other mounts, nothing outside the export).
func (s *Server) mountReply(xid uint32, dirpath string) []byte {
	rel, ok := mountPath(dirpath)
	if !ok {
		return mountStatusReply(xid, nfs3.MountErrNoEnt)
	}
	fh := s.rootHandle
	if rel != "." {
		fd, err := openat2(s.rootfd, rel, unix.O_PATH|unix.O_DIRECTORY, 0)
		if err != nil {
			return mountStatusReply(xid, mountStatus(err))
		}
		fh, err = s.handleAt(fd, "")
		unix.Close(fd)
		if err != nil {
			return mountStatusReply(xid, mountStatus(err))
		}
	}
	w := successHeader(xid)
	w.Uint32(uint32(nfs3.MountOK))
	w.Opaque(fh)
	w.Uint32(1) // auth_flavors: [AUTH_SYS]
	w.Uint32(uint32(sunrpc.AuthSys))
	return w.Buf
}

// mountPath turns a MOUNT dirpath (absolute, within the export, which is
// "/") into a path relative to the export's root: "." for the root itself.
// Empty components and "." are dropped; ".." is resolved by the confined
// lookup, which refuses to climb out. A relative path is not an export,
// but the empty path is the root, as nfs-utils' mountd takes it (libnfs
// sends it for nfs://host/file).
func mountPath(dirpath string) (string, bool) {
	if dirpath == "" {
		return ".", true
	}
	if !strings.HasPrefix(dirpath, "/") || strings.IndexByte(dirpath, 0) >= 0 {
		return "", false
	}
	var parts []string
	for p := range strings.SplitSeq(dirpath, "/") {
		if p != "" && p != "." {
			parts = append(parts, p)
		}
	}
	if len(parts) == 0 {
		return ".", true
	}
	return strings.Join(parts, "/"), true
}

// mountStatus maps a lookup error to a mountstat3.
func mountStatus(err error) nfs3.MountStatus {
	switch {
	case errors.Is(err, unix.ENOENT):
		return nfs3.MountErrNoEnt
	case errors.Is(err, unix.ENOTDIR):
		return nfs3.MountErrNotDir
	case errors.Is(err, unix.ENAMETOOLONG):
		return nfs3.MountErrNameTooLong
	case errors.Is(err, unix.EACCES), errors.Is(err, unix.EXDEV), errors.Is(err, unix.ELOOP), errors.Is(err, errOtherMount):
		return nfs3.MountErrAcces
	}
	return nfs3.MountErrIO
}

// garbageArgs is the reply to a call whose arguments do not decode.
func garbageArgs(xid uint32) []byte { return acceptedReply(xid, sunrpc.GarbageArgs) }
