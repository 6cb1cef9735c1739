package server

import (
	"strings"

	"github.com/rdmafs/rdmafs/nfs3"
	"github.com/rdmafs/rdmafs/sunrpc/xdr"
)

// What the server takes and offers.
const (
	maxName = 255 // longest file name the front lets through (NAME_MAX)

	// maxIO is the largest READ and WRITE the server offers in FSINFO; READ
	// counts above it are lowered to it (a server may return less).
	maxIO = 1 << 20
	// maxDirReply bounds READDIR count and READDIRPLUS dircount/maxcount.
	maxDirReply = 1 << 20
)

// sattr is a decoded sattr3.
type sattr struct {
	setMode, setUID, setGID, setSize bool
	mode, uid, gid                   uint32
	size                             uint64
	atimeHow, mtimeHow               nfs3.SetTime
	atime, mtime                     [2]uint32 // seconds, nanoseconds
}

// nfsArgs holds the decoded arguments of one call.
type nfsArgs struct {
	fh       []byte
	name     string // diropargs name; LINK's new name
	fh2      []byte // RENAME target directory, LINK directory
	name2    string // RENAME target name
	hasSattr bool
	sattr    sattr
	guard    bool            // SETATTR: check ctime first
	guardTim [2]uint32       // SETATTR guard ctime
	mask     uint32          // ACCESS
	stable   nfs3.StableHow  // WRITE
	offset   uint64          // READ, WRITE
	count    uint32          // READ, WRITE; READDIR count, READDIRPLUS maxcount
	dircount uint32          // READDIRPLUS
	cookie   uint64          // READDIR, READDIRPLUS
	verf     [8]byte         // READDIR, READDIRPLUS cookie verifier
	data     []byte          // WRITE; aliases the message
	how      nfs3.CreateMode // CREATE mode
	ftype    nfs3.FileType   // MKNOD
	spec     [2]uint32       // MKNOD device numbers
	target   string          // SYMLINK
	dirpath  string          // MOUNT MNT
}

// decodeArgs decodes the arguments of an NFS or MOUNT call. Every item must
// be present and every variable-length item must fit in what is left of the
// message (and handles in 64 bytes); nothing is allocated for a length the
// message merely claims. It returns false for arguments that do not decode
// (GARBAGE_ARGS).
func decodeArgs(prog, proc uint32, b []byte) (*nfsArgs, bool) {
	r := xdr.NewDecoder(b)
	a := &nfsArgs{}
	rest := func() int { return len(b) - r.Offset() }
	name := func() string { return string(r.Opaque(rest())) }

	if prog == nfs3.MountProgram {
		if proc == nfs3.MountProcMnt || proc == nfs3.MountProcUmnt {
			a.dirpath = string(r.Opaque(nfs3.MountPathLen))
		}
		return a, r.Err() == nil
	}

	if proc == nfs3.ProcNull {
		return a, true
	}
	a.fh = r.Opaque(nfs3.FHSize)
	switch proc {
	case nfs3.ProcGetattr, nfs3.ProcReadlink, nfs3.ProcFsstat, nfs3.ProcFsinfo, nfs3.ProcPathconf:
	case nfs3.ProcSetattr:
		a.hasSattr = true
		a.sattr = decodeSattr(&r)
		if a.guard = r.Uint32() != 0; a.guard {
			a.guardTim = [2]uint32{r.Uint32(), r.Uint32()}
		}
	case nfs3.ProcLookup, nfs3.ProcRemove, nfs3.ProcRmdir:
		a.name = name()
	case nfs3.ProcAccess:
		a.mask = r.Uint32()
	case nfs3.ProcRead:
		a.offset = r.Uint64()
		a.count = min(r.Uint32(), maxIO)
	case nfs3.ProcWrite:
		a.offset = r.Uint64()
		a.count = r.Uint32()
		a.stable = nfs3.StableHow(r.Uint32())
		a.data = r.Opaque(rest())
		// The count must be the data's length, as knfsd demands
		// (nfs3svc_decode_writeargs): a call that disagrees with
		// itself is garbage, not a shorter write. Above maxIO (only
		// a chunk of RPC-over-RDMA holds that much) the first maxIO
		// bytes are written, as knfsd does above its max_blocksize.
		if a.stable > nfs3.FileSync || r.Err() != nil || int(a.count) != len(a.data) {
			return a, false
		}
		if a.count > maxIO {
			a.count = maxIO
		}
	case nfs3.ProcCreate:
		a.name = name()
		a.how = nfs3.CreateMode(r.Uint32())
		switch {
		case a.how < nfs3.Exclusive:
			a.hasSattr = true
			a.sattr = decodeSattr(&r)
		case a.how == nfs3.Exclusive:
			r.Fixed(8)
		default:
			return a, false
		}
	case nfs3.ProcMkdir:
		a.name = name()
		a.hasSattr = true
		a.sattr = decodeSattr(&r)
	case nfs3.ProcSymlink:
		a.name = name()
		a.hasSattr = true
		a.sattr = decodeSattr(&r)
		a.target = string(r.Opaque(rest()))
	case nfs3.ProcMknod:
		a.name = name()
		a.ftype = nfs3.FileType(r.Uint32())
		switch a.ftype {
		case nfs3.TypeChr, nfs3.TypeBlk:
			a.hasSattr = true
			a.sattr = decodeSattr(&r)
			a.spec = [2]uint32{r.Uint32(), r.Uint32()}
		case nfs3.TypeSock, nfs3.TypeFifo:
			a.hasSattr = true
			a.sattr = decodeSattr(&r)
		case nfs3.TypeReg, nfs3.TypeDir, nfs3.TypeLnk:
		default:
			return a, false
		}
	case nfs3.ProcRename:
		a.name = name()
		a.fh2 = r.Opaque(nfs3.FHSize)
		a.name2 = name()
	case nfs3.ProcLink:
		a.fh2 = r.Opaque(nfs3.FHSize)
		a.name = name()
	case nfs3.ProcReaddir, nfs3.ProcReaddirplus:
		a.cookie = r.Uint64()
		copy(a.verf[:], r.Fixed(8))
		if proc == nfs3.ProcReaddirplus {
			a.dircount = r.Uint32()
		}
		a.count = r.Uint32()
	case nfs3.ProcCommit:
		r.Uint64()
		r.Uint32()
	}
	return a, r.Err() == nil
}

func decodeSattr(r *xdr.Decoder) sattr {
	var s sattr
	if s.setMode = r.Uint32() != 0; s.setMode {
		s.mode = r.Uint32()
	}
	if s.setUID = r.Uint32() != 0; s.setUID {
		s.uid = r.Uint32()
	}
	if s.setGID = r.Uint32() != 0; s.setGID {
		s.gid = r.Uint32()
	}
	if s.setSize = r.Uint32() != 0; s.setSize {
		s.size = r.Uint64()
	}
	if s.atimeHow = nfs3.SetTime(r.Uint32()); s.atimeHow == nfs3.ClientTime {
		s.atime = [2]uint32{r.Uint32(), r.Uint32()}
	}
	if s.mtimeHow = nfs3.SetTime(r.Uint32()); s.mtimeHow == nfs3.ClientTime {
		s.mtime = [2]uint32{r.Uint32(), r.Uint32()}
	}
	if s.atimeHow > nfs3.ClientTime || s.mtimeHow > nfs3.ClientTime {
		r.Fail(xdr.ErrShort)
	}
	return s
}

// frontStatus is the NFS status the front answers a call with without
// serving it, or nfs3.OK.
//
// A handle that is not of our shape is STALE right away, as knfsd answers a
// handle it cannot decode.
//
// A name is one component: knfsd refuses one with a slash with ACCES (as does
// the kernel's lookup_one_len), and longer names than NAME_MAX with
// NAMETOOLONG. "." and ".." name no new object: knfsd answers EXIST to make,
// ACCES to remove and PERM to rename them (LOOKUP resolves them).
func (a *nfsArgs) frontStatus(proc uint32) nfs3.Status {
	if proc == nfs3.ProcNull {
		return nfs3.OK
	}
	if !wellFormedHandle(a.fh) || (proc == nfs3.ProcRename || proc == nfs3.ProcLink) && !wellFormedHandle(a.fh2) {
		return nfs3.ErrStale
	}
	var names []string
	switch proc {
	case nfs3.ProcLookup, nfs3.ProcCreate, nfs3.ProcMkdir, nfs3.ProcSymlink, nfs3.ProcMknod, nfs3.ProcRemove, nfs3.ProcRmdir, nfs3.ProcLink:
		names = []string{a.name}
	case nfs3.ProcRename:
		names = []string{a.name, a.name2}
	}
	for _, n := range names {
		switch {
		case n == "" || strings.ContainsAny(n, "/\x00"):
			return nfs3.ErrAcces
		case len(n) > maxName:
			return nfs3.ErrNameTooLong
		case n != "." && n != "..":
		case proc == nfs3.ProcLookup:
		case proc == nfs3.ProcRemove || proc == nfs3.ProcRmdir:
			return nfs3.ErrAcces
		case proc == nfs3.ProcRename:
			return nfs3.ErrPerm
		default:
			return nfs3.ErrExist
		}
	}
	return nfs3.OK
}
