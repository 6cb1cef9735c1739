package nfs3

import "syscall"

// File types and the S_IFMT bits of a Unix file mode: the client (package
// fs) gives the kernel the mode of an ftype3, the server (nfs3/server) the
// ftype3 of a file's mode. One table, so the two directions agree.
var fileTypeModes = [...]struct {
	typ  FileType
	mode uint32
}{
	{TypeReg, syscall.S_IFREG},
	{TypeDir, syscall.S_IFDIR},
	{TypeBlk, syscall.S_IFBLK},
	{TypeChr, syscall.S_IFCHR},
	{TypeLnk, syscall.S_IFLNK},
	{TypeSock, syscall.S_IFSOCK},
	{TypeFifo, syscall.S_IFIFO},
}

// modeOfType and typeOfMode index fileTypeModes both ways: they are
// consulted per attribute and per directory entry. S_IFMT's bits are the
// top four of the sixteen.
var (
	modeOfType [TypeFifo + 1]uint32
	typeOfMode [16]FileType
)

func init() {
	for _, tm := range fileTypeModes {
		modeOfType[tm.typ] = tm.mode
		typeOfMode[tm.mode>>12] = tm.typ
	}
}

// Mode returns the S_IFMT bits of file type t: S_IFREG for a type RFC 1813
// does not define, as for a regular file (decoders reject those anyway).
func (t FileType) Mode() uint32 {
	if t < FileType(len(modeOfType)) && modeOfType[t] != 0 {
		return modeOfType[t]
	}
	return syscall.S_IFREG
}

// TypeOfMode returns the file type of a Unix mode's S_IFMT bits: TypeReg
// for bits no type has, as for a regular file.
func TypeOfMode(mode uint32) FileType {
	if t := typeOfMode[mode&syscall.S_IFMT>>12]; t != 0 {
		return t
	}
	return TypeReg
}
