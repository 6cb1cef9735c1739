package nfs3

import (
	"syscall"
	"testing"
)

// TestFileTypeModes: each ftype3 maps to its S_IFMT bits and back, whatever
// permission bits the mode carries, and what has no type reads as a
// regular file, as the client and the server have always treated it.
func TestFileTypeModes(t *testing.T) {
	for typ, mode := range map[FileType]uint32{
		TypeReg: syscall.S_IFREG, TypeDir: syscall.S_IFDIR, TypeBlk: syscall.S_IFBLK, TypeChr: syscall.S_IFCHR,
		TypeLnk: syscall.S_IFLNK, TypeSock: syscall.S_IFSOCK, TypeFifo: syscall.S_IFIFO,
	} {
		if got := typ.Mode(); got != mode {
			t.Errorf("type %d: mode %#o, want %#o", typ, got, mode)
		}
		if got := TypeOfMode(mode | 0o7755); got != typ {
			t.Errorf("mode %#o: type %d, want %d", mode|0o7755, got, typ)
		}
	}
	for _, typ := range []FileType{0, 8, 1 << 31} {
		if got := typ.Mode(); got != syscall.S_IFREG {
			t.Errorf("type %d: mode %#o, want S_IFREG", typ, got)
		}
	}
	for _, mode := range []uint32{0, 0o644, 0o110000, syscall.S_IFMT} {
		if got := TypeOfMode(mode); got != TypeReg {
			t.Errorf("mode %#o: type %d, want TypeReg", mode, got)
		}
	}
}
