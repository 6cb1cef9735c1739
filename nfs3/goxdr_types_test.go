package nfs3

// The NFSv3 structures of RFC 1813 as go-xdr (github.com/rasky/go-xdr)
// maps Go types to XDR: fields in the order of the RFC's declarations,
// discriminated unions as a discriminant tagged "union" and arms tagged
// "unioncase=N", optional data (post_op_attr, pre_op_attr, post_op_fh3,
// the entry lists) as pointers tagged "optional". They are written from
// the RFC, not from this package's codec, so that go-xdr decoding what
// the client encodes (and the client decoding what go-xdr encodes) checks
// the codec against the RFC through a second implementation.

import (
	"bytes"
	"fmt"
	"reflect"
)

type rfcTime struct{ Seconds, Nseconds uint32 } // nfstime3

type rfcSpecdata struct{ Specdata1, Specdata2 uint32 } // specdata3

type rfcFH struct{ Data []byte } // nfs_fh3

type rfcFattr struct { // fattr3
	Type   uint32
	Mode   uint32
	Nlink  uint32
	UID    uint32
	GID    uint32
	Size   uint64
	Used   uint64
	Rdev   rfcSpecdata
	FSID   uint64
	FileID uint64
	Atime  rfcTime
	Mtime  rfcTime
	Ctime  rfcTime
}

type rfcWccAttr struct { // wcc_attr
	Size  uint64
	Mtime rfcTime
	Ctime rfcTime
}

type rfcWcc struct { // wcc_data
	Before *rfcWccAttr `xdr:"optional"` // pre_op_attr
	After  *rfcFattr   `xdr:"optional"` // post_op_attr
}

type rfcSetUint32 struct { // set_mode3, set_uid3, set_gid3
	Set   bool   `xdr:"union"`
	Value uint32 `xdr:"unioncase=1"`
}

type rfcSetUint64 struct { // set_size3
	Set   bool   `xdr:"union"`
	Value uint64 `xdr:"unioncase=1"`
}

type rfcSetTime struct { // set_atime, set_mtime
	How  uint32  `xdr:"union"`       // time_how
	Time rfcTime `xdr:"unioncase=2"` // SET_TO_CLIENT_TIME
}

type rfcSattr struct { // sattr3
	Mode  rfcSetUint32
	UID   rfcSetUint32
	GID   rfcSetUint32
	Size  rfcSetUint64
	Atime rfcSetTime
	Mtime rfcSetTime
}

type rfcDirOp struct { // diropargs3
	Dir  rfcFH
	Name string
}

// The arguments.

type rfcSetattrArgs struct {
	Object        rfcFH
	NewAttributes rfcSattr
	Guard         struct { // sattrguard3
		Check    bool    `xdr:"union"`
		ObjCtime rfcTime `xdr:"unioncase=1"`
	}
}

type rfcLookupArgs struct{ What rfcDirOp }

type rfcAccessArgs struct {
	Object rfcFH
	Access uint32
}

type rfcReadArgs struct {
	File   rfcFH
	Offset uint64
	Count  uint32
}

type rfcWriteArgs struct {
	File   rfcFH
	Offset uint64
	Count  uint32
	Stable uint32
	Data   []byte
}

type rfcCreateArgs struct {
	Where rfcDirOp
	How   struct { // createhow3
		Mode      uint32   `xdr:"union"`
		Unchecked rfcSattr `xdr:"unioncase=0"`
		Guarded   rfcSattr `xdr:"unioncase=1"`
		Verf      [8]byte  `xdr:"unioncase=2"`
	}
}

type rfcMkdirArgs struct {
	Where      rfcDirOp
	Attributes rfcSattr
}

type rfcSymlinkArgs struct {
	Where      rfcDirOp
	Attributes rfcSattr // symlinkdata3
	Data       string
}

type rfcDeviceData struct { // devicedata3
	Attributes rfcSattr
	Spec       rfcSpecdata
}

type rfcMknodArgs struct {
	Where rfcDirOp
	What  struct { // mknoddata3
		Type uint32        `xdr:"union"`
		Blk  rfcDeviceData `xdr:"unioncase=3"`
		Chr  rfcDeviceData `xdr:"unioncase=4"`
		Sock rfcSattr      `xdr:"unioncase=6"`
		Fifo rfcSattr      `xdr:"unioncase=7"`
	}
}

type rfcRemoveArgs struct{ Object rfcDirOp }

type rfcRenameArgs struct{ From, To rfcDirOp }

type rfcLinkArgs struct {
	File rfcFH
	Link rfcDirOp
}

type rfcReaddirplusArgs struct {
	Dir        rfcFH
	Cookie     uint64
	Cookieverf [8]byte
	Dircount   uint32
	Maxcount   uint32
}

type rfcCommitArgs struct {
	File   rfcFH
	Offset uint64
	Count  uint32
}

// The results of a call that succeeded (status NFS3_OK).

type rfcGetattrRes struct {
	Status     uint32
	Attributes rfcFattr
}

type rfcSetattrRes struct {
	Status uint32
	ObjWcc rfcWcc
}

type rfcLookupRes struct {
	Status  uint32
	Object  rfcFH
	ObjAttr *rfcFattr `xdr:"optional"`
	DirAttr *rfcFattr `xdr:"optional"`
}

type rfcReadRes struct {
	Status   uint32
	FileAttr *rfcFattr `xdr:"optional"`
	Count    uint32
	EOF      bool
	Data     []byte
}

type rfcWriteRes struct {
	Status    uint32
	FileWcc   rfcWcc
	Count     uint32
	Committed uint32
	Verf      [8]byte
}

type rfcCreateRes struct {
	Status  uint32
	Obj     *rfcFH    `xdr:"optional"` // post_op_fh3
	ObjAttr *rfcFattr `xdr:"optional"`
	DirWcc  rfcWcc
}

type rfcEntryplus struct { // entryplus3
	FileID         uint64
	Name           string
	Cookie         uint64
	NameAttributes *rfcFattr     `xdr:"optional"`
	NameHandle     *rfcFH        `xdr:"optional"`
	NextEntry      *rfcEntryplus `xdr:"optional"`
}

type rfcReaddirplusRes struct {
	Status     uint32
	DirAttr    *rfcFattr `xdr:"optional"`
	Cookieverf [8]byte
	Entries    *rfcEntryplus `xdr:"optional"` // dirlistplus3
	EOF        bool
}

// Conversions from this package's types, for comparing what it decoded
// with what go-xdr encoded.

func rfcTimeOf(t Time) rfcTime { return rfcTime{t.Sec, t.Nsec} }

func rfcFattrOf(a *Fattr) rfcFattr {
	return rfcFattr{
		Type: uint32(a.Type), Mode: a.Mode, Nlink: a.Nlink, UID: a.UID, GID: a.GID,
		Size: a.Size, Used: a.Used, Rdev: rfcSpecdata{a.Rdev[0], a.Rdev[1]},
		FSID: a.FSID, FileID: a.FileID,
		Atime: rfcTimeOf(a.Atime), Mtime: rfcTimeOf(a.Mtime), Ctime: rfcTimeOf(a.Ctime),
	}
}

// rfcPostOpAttrOf is the post_op_attr of a (nil when it is absent).
func rfcPostOpAttrOf(a *Fattr, has bool) *rfcFattr {
	if !has {
		return nil
	}
	r := rfcFattrOf(a)
	return &r
}

func rfcWccOf(w *Wcc) rfcWcc {
	var r rfcWcc
	if w.HasBefore {
		r.Before = &rfcWccAttr{Size: w.Before.Size, Mtime: rfcTimeOf(w.Before.Mtime), Ctime: rfcTimeOf(w.Before.Ctime)}
	}
	r.After = rfcPostOpAttrOf(&w.After, w.HasAfter)
	return r
}

// rfcSattrOf is sattr3 as RFC 1813 lays out s: a value where its flag
// says it is set, nothing (a zero) where not.
func rfcSattrOf(s *Sattr) rfcSattr {
	var r rfcSattr
	set32 := func(set bool, v uint32) rfcSetUint32 {
		if !set {
			return rfcSetUint32{}
		}
		return rfcSetUint32{true, v}
	}
	setTime := func(how SetTime, t Time) rfcSetTime {
		if how != ClientTime {
			return rfcSetTime{How: uint32(how)}
		}
		return rfcSetTime{uint32(how), rfcTimeOf(t)}
	}
	r.Mode = set32(s.SetMode, s.Mode)
	r.UID = set32(s.SetUID, s.UID)
	r.GID = set32(s.SetGID, s.GID)
	if s.SetSize {
		r.Size = rfcSetUint64{true, s.Size}
	}
	r.Atime = setTime(s.Atime, s.AtimeVal)
	r.Mtime = setTime(s.Mtime, s.MtimeVal)
	return r
}

// fieldDiffs lists, field by field, where got differs from want (two
// values of one type), each with its path: "Where.Name: "a" != "b"". A nil
// and an empty slice are the same, as XDR cannot tell them apart.
func fieldDiffs(want, got any) []string {
	var diffs []string
	var walk func(path string, w, g reflect.Value)
	walk = func(path string, w, g reflect.Value) {
		switch w.Kind() {
		case reflect.Struct:
			for i := range w.NumField() {
				walk(path+"."+w.Type().Field(i).Name, w.Field(i), g.Field(i))
			}
		case reflect.Pointer:
			switch {
			case w.IsNil() != g.IsNil():
				diffs = append(diffs, fmt.Sprintf("%s: present %v != %v", path, !w.IsNil(), !g.IsNil()))
			case !w.IsNil():
				walk(path, w.Elem(), g.Elem())
			}
		case reflect.Slice:
			if w.Type().Elem().Kind() == reflect.Uint8 {
				if !bytes.Equal(w.Bytes(), g.Bytes()) {
					diffs = append(diffs, fmt.Sprintf("%s: %x != %x", path, w.Bytes(), g.Bytes()))
				}
				return
			}
			if w.Len() != g.Len() {
				diffs = append(diffs, fmt.Sprintf("%s: %d items != %d", path, w.Len(), g.Len()))
				return
			}
			for i := range w.Len() {
				walk(fmt.Sprintf("%s[%d]", path, i), w.Index(i), g.Index(i))
			}
		default:
			if !reflect.DeepEqual(w.Interface(), g.Interface()) {
				diffs = append(diffs, fmt.Sprintf("%s: %#v != %#v", path, w.Interface(), g.Interface()))
			}
		}
	}
	walk(reflect.TypeOf(want).Name(), reflect.ValueOf(want), reflect.ValueOf(got))
	return diffs
}
