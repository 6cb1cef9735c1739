package nfs3

import (
	"errors"
	"fmt"

	"github.com/rdmafs/rdmafs/sunrpc/xdr"
)

// ErrBadReply is wrapped by the error of a reply that does not decode.
var ErrBadReply = errors.New("nfs3: malformed reply")

func putFH(e *xdr.Encoder, fh *FH) { e.Opaque(fh.b[:fh.n]) }

func putDirOp(e *xdr.Encoder, dir *FH, name string) {
	putFH(e, dir)
	e.String(name)
}

func putTime(e *xdr.Encoder, t Time) {
	e.Uint32(t.Sec)
	e.Uint32(t.Nsec)
}

func putSattr(e *xdr.Encoder, a *Sattr) {
	e.Bool(a.SetMode)
	if a.SetMode {
		e.Uint32(a.Mode)
	}
	e.Bool(a.SetUID)
	if a.SetUID {
		e.Uint32(a.UID)
	}
	e.Bool(a.SetGID)
	if a.SetGID {
		e.Uint32(a.GID)
	}
	e.Bool(a.SetSize)
	if a.SetSize {
		e.Uint64(a.Size)
	}
	e.Uint32(uint32(a.Atime))
	if a.Atime == ClientTime {
		putTime(e, a.AtimeVal)
	}
	e.Uint32(uint32(a.Mtime))
	if a.Mtime == ClientTime {
		putTime(e, a.MtimeVal)
	}
}

func getTime(d *xdr.Decoder) Time {
	return Time{Sec: d.Uint32(), Nsec: d.Uint32()}
}

func getFattr(d *xdr.Decoder, a *Fattr) {
	a.Type = FileType(d.Uint32())
	a.Mode = d.Uint32()
	a.Nlink = d.Uint32()
	a.UID = d.Uint32()
	a.GID = d.Uint32()
	a.Size = d.Uint64()
	a.Used = d.Uint64()
	a.Rdev[0] = d.Uint32()
	a.Rdev[1] = d.Uint32()
	a.FSID = d.Uint64()
	a.FileID = d.Uint64()
	a.Atime = getTime(d)
	a.Mtime = getTime(d)
	a.Ctime = getTime(d)
	if d.Err() == nil && (a.Type < TypeReg || a.Type > TypeFifo) {
		d.Fail(fmt.Errorf("file type %d", a.Type))
	}
}

// getPostOpAttr decodes post_op_attr into a and reports whether it was present.
func getPostOpAttr(d *xdr.Decoder, a *Fattr) bool {
	if !d.Bool() {
		return false
	}
	getFattr(d, a)
	return d.Err() == nil
}

func getWcc(d *xdr.Decoder, w *Wcc) {
	w.HasBefore = d.Bool()
	if w.HasBefore {
		w.Before.Size = d.Uint64()
		w.Before.Mtime = getTime(d)
		w.Before.Ctime = getTime(d)
	}
	w.HasAfter = getPostOpAttr(d, &w.After)
}

func getFH(d *xdr.Decoder, fh *FH) {
	b := d.Opaque(FHSize)
	fh.n = uint8(copy(fh.b[:], b))
}

// getPostOpFH decodes post_op_fh3 and reports whether a handle was present.
func getPostOpFH(d *xdr.Decoder, fh *FH) bool {
	if !d.Bool() {
		return false
	}
	getFH(d, fh)
	return d.Err() == nil && fh.n > 0
}

func getVerf(d *xdr.Decoder, v *Verf) {
	copy(v[:], d.Fixed(8))
}

// getName decodes a filename3 and checks it can name an entry: not empty,
// no slash or NUL, at most MaxNameLen bytes.
func getName(d *xdr.Decoder) []byte {
	name := d.Opaque(MaxNameLen)
	if d.Err() != nil {
		return nil
	}
	if len(name) == 0 {
		d.Fail(errors.New("empty file name"))
		return nil
	}
	for _, c := range name {
		if c == '/' || c == 0 {
			d.Fail(fmt.Errorf("file name %q", name))
			return nil
		}
	}
	return name
}
