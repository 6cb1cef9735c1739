package host

import (
	"bufio"
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
)

// endlessDirServer is a hostile NFSv3 server, in the test process on
// loopback TCP: its export's root is a directory that never ends. Every
// READDIRPLUS and READDIR returns a page of entries with cookies that keep
// rising, and never says EOF: names never seen before, each with a file
// of its own, or (its kind) each the same file, or one name for every
// new file. It answers just what a
// mount and a listing need (NULL, MOUNT MNT and UMNT, GETATTR, LOOKUP,
// ACCESS, FSSTAT, FSINFO, PATHCONF), MOUNT and NFS on one port, with its
// own minimal RPC and record marking, so nothing of rdmafs's server is
// involved.
type endlessDirServer struct {
	ln      net.Listener
	kind    endlessKind
	entries atomic.Int64 // directory entries sent
	wg      sync.WaitGroup
}

// endlessKind is what the entries of the endless directory name.
type endlessKind int

const (
	newFiles endlessKind = iota // a new name of a new file each
	oneFile                     // a new name each, all of one file (one handle, one file id)
	oneName                     // one name, of a new file each
)

func (k endlessKind) String() string { return [...]string{"new files", "one file", "one name"}[k] }

const (
	progNFS   = 100003
	progMount = 100005

	endlessRootID = 1
	// endlessOneFileID is the file id of every entry of a oneFile
	// directory.
	endlessOneFileID = 99
	// endlessNameLen makes each entry cost the client memory: the
	// longest name, as a hostile server would send.
	endlessNameLen = 255
)

func startEndlessDirServer(t *testing.T, kind endlessKind) *endlessDirServer {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := &endlessDirServer{ln: ln, kind: kind}
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			s.wg.Add(1)
			go func() {
				defer s.wg.Done()
				s.serve(c)
			}()
		}
	}()
	t.Cleanup(func() {
		ln.Close()
	})
	return s
}

func (s *endlessDirServer) port() int { return s.ln.Addr().(*net.TCPAddr).Port }

// serve answers the calls of one connection until it closes.
func (s *endlessDirServer) serve(c net.Conn) {
	defer c.Close()
	r := bufio.NewReader(c)
	for {
		call, err := readRecord(r)
		if err != nil {
			return
		}
		reply := s.answer(call)
		if reply == nil {
			continue
		}
		var mark [4]byte
		binary.BigEndian.PutUint32(mark[:], 1<<31|uint32(len(reply)))
		if _, err := c.Write(append(mark[:], reply...)); err != nil {
			return
		}
	}
}

// readRecord reads one RPC record: fragments up to the last one.
func readRecord(r io.Reader) ([]byte, error) {
	var rec []byte
	for {
		var mark [4]byte
		if _, err := io.ReadFull(r, mark[:]); err != nil {
			return nil, err
		}
		m := binary.BigEndian.Uint32(mark[:])
		n := m &^ (1 << 31)
		if n > 1<<20 {
			return nil, fmt.Errorf("fragment of %d bytes", n)
		}
		frag := make([]byte, n)
		if _, err := io.ReadFull(r, frag); err != nil {
			return nil, err
		}
		rec = append(rec, frag...)
		if m&(1<<31) != 0 {
			return rec, nil
		}
	}
}

// xdrIn decodes a call; a short call reads as zeros.
type xdrIn struct{ b []byte }

func (d *xdrIn) u32() uint32 {
	if len(d.b) < 4 {
		d.b = nil
		return 0
	}
	v := binary.BigEndian.Uint32(d.b)
	d.b = d.b[4:]
	return v
}

func (d *xdrIn) u64() uint64 { return uint64(d.u32())<<32 | uint64(d.u32()) }

func (d *xdrIn) opaque() []byte {
	n := int(d.u32())
	p := (n + 3) &^ 3
	if p > len(d.b) {
		d.b = nil
		return nil
	}
	v := d.b[:n]
	d.b = d.b[p:]
	return v
}

// xdrOut encodes a reply.
type xdrOut struct{ b []byte }

func (e *xdrOut) u32(v uint32) { e.b = binary.BigEndian.AppendUint32(e.b, v) }
func (e *xdrOut) u64(v uint64) { e.b = binary.BigEndian.AppendUint64(e.b, v) }
func (e *xdrOut) opaque(v []byte) {
	e.u32(uint32(len(v)))
	e.b = append(e.b, v...)
	for len(e.b)%4 != 0 {
		e.b = append(e.b, 0)
	}
}

// fattr appends the attributes of file id: the root is a directory, every
// other file an empty regular file.
func (e *xdrOut) fattr(id uint64) {
	typ, mode, nlink := uint32(1), uint32(0o644), uint32(1)
	if id == endlessRootID {
		typ, mode, nlink = 2, 0o755, 2
	}
	e.u32(typ)
	e.u32(mode)
	e.u32(nlink)
	e.u32(0)      // uid
	e.u32(0)      // gid
	e.u64(4096)   // size
	e.u64(4096)   // used
	e.u64(0)      // rdev
	e.u64(7)      // fsid
	e.u64(id)     // fileid
	for range 3 { // atime, mtime, ctime
		e.u32(1700000000)
		e.u32(0)
	}
}

// endlessName is the name of the entry with cookie c, and endlessID the
// file id of a name (2 for names not of the directory's); entryID is the
// file id of the entry with cookie c.
func (s *endlessDirServer) endlessName(c uint64) string {
	if s.kind == oneName {
		c = 0
	}
	return strings.Repeat("n", endlessNameLen-20) + fmt.Sprintf("%020d", c)
}

func (s *endlessDirServer) endlessID(name string) uint64 {
	if len(name) != endlessNameLen {
		return 2
	}
	c, err := strconv.ParseUint(name[endlessNameLen-20:], 10, 64)
	if err != nil {
		return 2
	}
	return s.entryID(c)
}

func (s *endlessDirServer) entryID(c uint64) uint64 {
	if s.kind == oneFile {
		return endlessOneFileID
	}
	return c + 100
}

// handle and handleID map file ids to file handles and back.
func handle(id uint64) []byte { return binary.BigEndian.AppendUint64([]byte("endless:"), id) }

func handleID(fh []byte) uint64 {
	if len(fh) != 16 {
		return 0
	}
	return binary.BigEndian.Uint64(fh[8:])
}

// answer returns the reply record of one call, nil to send none.
func (s *endlessDirServer) answer(call []byte) []byte {
	d := &xdrIn{b: call}
	xid := d.u32()
	if d.u32() != 0 { // not a CALL
		return nil
	}
	d.u32() // rpcvers
	prog, _, proc := d.u32(), d.u32(), d.u32()
	d.u32() // credential flavor
	d.opaque()
	d.u32() // verifier flavor
	d.opaque()

	e := &xdrOut{}
	e.u32(xid)
	e.u32(1) // REPLY
	e.u32(0) // MSG_ACCEPTED
	e.u32(0) // AUTH_NONE verifier
	e.u32(0)
	if proc == 0 { // NULL of either program
		e.u32(0)
		return e.b
	}
	switch {
	case prog == progMount && proc == 1: // MNT
		e.u32(0)
		e.u32(0) // MNT3_OK
		e.opaque(handle(endlessRootID))
		e.u32(1) // one flavor: AUTH_SYS
		e.u32(1)
	case prog == progMount && proc == 3: // UMNT
		e.u32(0)
	case prog == progNFS:
		e.u32(0) // SUCCESS
		s.nfs(proc, d, e)
	default:
		e.u32(3) // PROC_UNAVAIL
	}
	return e.b
}

// nfs appends the results of NFSv3 procedure proc.
func (s *endlessDirServer) nfs(proc uint32, d *xdrIn, e *xdrOut) {
	fh := d.opaque()
	id := handleID(fh)
	if id == 0 {
		e.u32(10001) // NFS3ERR_BADHANDLE
		e.u32(0)
		return
	}
	switch proc {
	case 1: // GETATTR
		e.u32(0)
		e.fattr(id)
	case 3: // LOOKUP: every name is a file
		child := s.endlessID(string(d.opaque()))
		e.u32(0)
		e.opaque(handle(child))
		e.u32(1)
		e.fattr(child)
		e.u32(0) // no directory attributes
	case 4: // ACCESS: everything asked
		mask := d.u32()
		e.u32(0)
		e.u32(0)
		e.u32(mask)
	case 16, 17: // READDIR, READDIRPLUS: a new page, never the end
		cookie := d.u64()
		d.u64() // verifier
		count := d.u32()
		if proc == 17 {
			count = d.u32() // maxcount
		}
		e.u32(0)
		e.u32(0)                     // no directory attributes
		e.u64(0x656e646c657373)      // cookie verifier
		budget := int(count) - 200   // header, end of list, eof
		for c := cookie + 1; ; c++ { // rising cookies from where the client is
			before := len(e.b)
			name, id := s.endlessName(c), s.entryID(c)
			e.u32(1) // value follows
			e.u64(id)
			e.opaque([]byte(name))
			e.u64(c)
			if proc == 17 {
				e.u32(1)
				e.fattr(id)
				e.u32(1)
				e.opaque(handle(id))
			}
			if len(e.b)-before > budget {
				e.b = e.b[:before]
				break
			}
			budget -= len(e.b) - before
			s.entries.Add(1)
		}
		e.u32(0) // no more entries in this reply
		e.u32(0) // not the end of the directory
	case 18: // FSSTAT
		e.u32(0)
		e.u32(0)
		for range 6 {
			e.u64(1 << 30)
		}
		e.u32(0)
	case 19: // FSINFO
		e.u32(0)
		e.u32(0)
		for range 2 { // read, then write: max, pref, mult
			e.u32(1 << 20)
			e.u32(1 << 20)
			e.u32(4096)
		}
		e.u32(64 << 10) // dtpref
		e.u64(1 << 62)  // maxfilesize
		e.u32(0)        // time_delta
		e.u32(1)
		e.u32(0x1b) // LINK, SYMLINK, HOMOGENEOUS, CANSETTIME
	case 20: // PATHCONF
		e.u32(0)
		e.u32(0)
		e.u32(32000)
		e.u32(255)
		e.u32(1)
		e.u32(1)
		e.u32(0)
		e.u32(1)
	default:
		e.u32(10004) // NFS3ERR_NOTSUPP
		e.u32(0)     // post_op_attr or the first wcc_data part: none
		e.u32(0)
	}
}
