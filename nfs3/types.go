package nfs3

import "fmt"

// Program numbers and versions.
const (
	Program      = 100003
	Version      = 3
	MountProgram = 100005
	MountVersion = 3
)

// The well-known ports of NFS: over TCP (IANA's nfs), and over
// RPC-over-RDMA (nfsrdma, RFC 8267).
const (
	Port     = 2049
	RDMAPort = 20049
)

// The NFSv3 procedures.
const (
	ProcNull        = 0
	ProcGetattr     = 1
	ProcSetattr     = 2
	ProcLookup      = 3
	ProcAccess      = 4
	ProcReadlink    = 5
	ProcRead        = 6
	ProcWrite       = 7
	ProcCreate      = 8
	ProcMkdir       = 9
	ProcSymlink     = 10
	ProcMknod       = 11
	ProcRemove      = 12
	ProcRmdir       = 13
	ProcRename      = 14
	ProcLink        = 15
	ProcReaddir     = 16
	ProcReaddirplus = 17
	ProcFsstat      = 18
	ProcFsinfo      = 19
	ProcPathconf    = 20
	ProcCommit      = 21
)

// ProcNames names the procedures as /proc/self/mountstats does.
var ProcNames = []string{"NULL", "GETATTR", "SETATTR", "LOOKUP", "ACCESS", "READLINK", "READ", "WRITE",
	"CREATE", "MKDIR", "SYMLINK", "MKNOD", "REMOVE", "RMDIR", "RENAME", "LINK", "READDIR", "READDIRPLUS",
	"FSSTAT", "FSINFO", "PATHCONF", "COMMIT"}

// Protocol limits.
const (
	FHSize         = 64   // largest file handle
	MaxNameLen     = 255  // longest file name rdmafs sends or accepts
	MaxPathLen     = 4096 // longest symlink target
	CookieVerfSize = 8
	WriteVerfSize  = 8
	CreateVerfSize = 8
)

// FH is a file handle. It is a comparable value, so it can key a map.
type FH struct {
	n uint8
	b [FHSize]byte
}

// Bytes returns the handle's bytes.
func (fh *FH) Bytes() []byte { return fh.b[:fh.n] }

// IsZero reports whether the handle is empty.
func (fh FH) IsZero() bool { return fh.n == 0 }

func (fh FH) String() string { return fmt.Sprintf("%x", fh.b[:fh.n]) }

// FileType is ftype3.
type FileType uint32

// The file types.
const (
	TypeReg  FileType = 1
	TypeDir  FileType = 2
	TypeBlk  FileType = 3
	TypeChr  FileType = 4
	TypeLnk  FileType = 5
	TypeSock FileType = 6
	TypeFifo FileType = 7
)

// Time is nfstime3.
type Time struct {
	Sec, Nsec uint32
}

// Fattr is fattr3, a file's attributes.
type Fattr struct {
	Type         FileType
	Mode         uint32 // permission bits, setuid, setgid and sticky
	Nlink        uint32
	UID, GID     uint32
	Size, Used   uint64
	Rdev         [2]uint32 // specdata3: major, minor
	FSID         uint64
	FileID       uint64
	Atime, Mtime Time
	Ctime        Time
}

// WccAttr is wcc_attr: what weak cache consistency says a file was before
// an operation.
type WccAttr struct {
	Size         uint64
	Mtime, Ctime Time
}

// Wcc is wcc_data: the attributes of a file before and after an operation,
// each present or not.
type Wcc struct {
	Before    WccAttr
	HasBefore bool
	After     Fattr
	HasAfter  bool
}

// SetTime says how SETATTR (and the create procedures) set a time.
type SetTime uint32

// The time_how values.
const (
	DontChange SetTime = 0
	ServerTime SetTime = 1 // the server's current time (UTIME_NOW)
	ClientTime SetTime = 2 // the time given
)

// Sattr is sattr3: the attributes to set. Fields whose Set flag is false
// are left alone.
type Sattr struct {
	SetMode  bool
	Mode     uint32
	SetUID   bool
	UID      uint32
	SetGID   bool
	GID      uint32
	SetSize  bool
	Size     uint64
	Atime    SetTime
	AtimeVal Time
	Mtime    SetTime
	MtimeVal Time
}

// StableHow is stable_how, the durability a WRITE asks for or got.
type StableHow uint32

// The stable_how values.
const (
	Unstable StableHow = 0
	DataSync StableHow = 1
	FileSync StableHow = 2
)

func (s StableHow) String() string {
	switch s {
	case Unstable:
		return "UNSTABLE"
	case DataSync:
		return "DATA_SYNC"
	case FileSync:
		return "FILE_SYNC"
	}
	return fmt.Sprintf("stable_how(%d)", uint32(s))
}

// CreateMode is createmode3.
type CreateMode uint32

// The create modes.
const (
	Unchecked CreateMode = 0
	Guarded   CreateMode = 1
	Exclusive CreateMode = 2
)

// The ACCESS bits.
const (
	AccessRead    = 0x01
	AccessLookup  = 0x02
	AccessModify  = 0x04
	AccessExtend  = 0x08
	AccessDelete  = 0x10
	AccessExecute = 0x20
)

// Verf is an 8-byte verifier: a write verifier, a cookie verifier or a
// create verifier.
type Verf [8]byte

// FSStat is FSSTAT3resok without the attributes.
type FSStat struct {
	TBytes, FBytes, ABytes uint64
	TFiles, FFiles, AFiles uint64
	Invarsec               uint32
}

// FSInfo is FSINFO3resok without the attributes.
type FSInfo struct {
	Rtmax, Rtpref, Rtmult uint32
	Wtmax, Wtpref, Wtmult uint32
	Dtpref                uint32
	MaxFileSize           uint64
	TimeDelta             Time
	Properties            uint32
}

// The FSINFO properties.
const (
	FSFLink        = 0x01
	FSFSymlink     = 0x02
	FSFHomogeneous = 0x08
	FSFCanSetTime  = 0x10
)

// PathConf is PATHCONF3resok without the attributes.
type PathConf struct {
	LinkMax         uint32
	NameMax         uint32
	NoTrunc         bool
	ChownRestricted bool
	CaseInsensitive bool
	CasePreserving  bool
}
