package server

import (
	"bytes"
	"errors"
	"math/rand"
	"strings"
	"testing"
	"time"

	"github.com/rdmafs/rdmafs/nfs3"
	"github.com/rdmafs/rdmafs/sunrpc"
	"github.com/rdmafs/rdmafs/sunrpc/xdr"
)

// FuzzArgs feeds arbitrary arguments to the front's decoders: they must
// never panic, and what they accept must lie inside the arguments. (The
// RPC header's parser has its fuzz test in package sunrpc.)
func FuzzArgs(f *testing.F) {
	f.Add(uint32(nfs3.Program), uint32(nfs3.ProcLookup), dirop([]byte("12345678"), "name").Buf)
	f.Add(uint32(nfs3.MountProgram), uint32(nfs3.MountProcMnt), []byte{0, 0, 0, 1, '/', 0, 0, 0})
	f.Add(uint32(nfs3.Program), uint32(nfs3.ProcSetattr), bytes.Repeat([]byte{0, 0, 0, 1}, 20))
	f.Add(uint32(nfs3.Program), uint32(nfs3.ProcReaddirplus), bytes.Repeat([]byte{0xff}, 40))
	f.Add(uint32(nfs3.Program), uint32(nfs3.ProcWrite), []byte{0, 0, 0, 2})
	f.Fuzz(func(t *testing.T, prog, proc uint32, args []byte) {
		a, ok := decodeArgs(prog, proc, args)
		if !ok {
			return
		}
		if len(a.fh) > nfs3.FHSize || len(a.fh2) > nfs3.FHSize || len(a.name) > len(args) || len(a.dirpath) > nfs3.MountPathLen ||
			a.count > maxIO && proc == nfs3.ProcRead || len(a.data) > len(args) || proc == nfs3.ProcWrite && int(a.count) != min(len(a.data), maxIO) {
			t.Fatalf("decoded arguments out of bounds: %+v", a)
		}
		a.frontStatus(proc)
		if rel, ok := mountPath(a.dirpath); ok && (rel == "" || strings.HasPrefix(rel, "/") || strings.Contains(rel, "//")) {
			t.Fatalf("MOUNT path %q became %q", a.dirpath, rel)
		}
	})
}

// FuzzParseClients: the client list parser never panics, and what it
// accepts are valid, masked prefixes.
func FuzzParseClients(f *testing.F) {
	for _, s := range []string{"*", "127.0.0.1", "10.0.0.0/8+::1", "2001:db8::/32+1.2.3.4", "", "+", "1.2.3.4/40", "::ffff:1.2.3.4"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, list string) {
		ps, err := ParseClients(list)
		if err != nil {
			return
		}
		if len(ps) == 0 {
			t.Fatalf("%q: no clients and no error", list)
		}
		for _, p := range ps {
			if !p.IsValid() || p.Masked() != p {
				t.Fatalf("%q: prefix %v", list, p)
			}
		}
	})
}

func TestGarbageInput(t *testing.T) {
	_, addr := startServer(t, Options{Root: exportDir(t), Export: trusted})
	rng := rand.New(rand.NewSource(2))
	random := make([]byte, 4096)
	rng.Read(random)
	withMark := func(n uint32, body []byte) []byte {
		b := make([]byte, 4, 4+len(body))
		sunrpc.PutRecordMark(b, int(n))
		return append(b, body...)
	}
	call := encodeCall(1, nfs3.Program, nfs3.Version, nfs3.ProcNull, asRoot, nil)
	cases := map[string][]byte{
		"random bytes":       random,
		"huge record":        withMark(1<<31-1, []byte("abcd")),
		"truncated header":   withMark(12, call[:12]),
		"reply, not call":    withMark(8, []byte{0, 0, 0, 1, 0, 0, 0, 1}),
		"lying cred length":  withMark(36, append(append([]byte{}, call[:28]...), 0, 0, 1, 0, 0, 0, 0, 0)),
		"empty record":       withMark(0, nil),
		"too many fragments": bytes.Repeat([]byte{0, 0, 0, 0}, 1024+1), // sunrpc takes 1024
	}
	for name, input := range cases {
		t.Run(name, func(t *testing.T) {
			c := dialServer(t, addr)
			c.conn.Write(input)
			c.conn.SetReadDeadline(time.Now().Add(10 * time.Second))
			// The server may answer with error replies, but must end with
			// closing the connection.
			for {
				if _, err := readRecord(c.r, nil); err != nil {
					var ne interface{ Timeout() bool }
					if errors.As(err, &ne) && ne.Timeout() {
						t.Fatalf("connection still open after garbage")
					}
					break
				}
			}
			// The server survives: a fresh connection works.
			c2 := dialServer(t, addr)
			if rep := c2.call(nfs3.Program, nfs3.Version, nfs3.ProcNull, asRoot, nil); rep.stat != uint32(sunrpc.Success) {
				t.Fatalf("NULL after garbage: %+v", rep)
			}
		})
	}

	// Arguments that do not decode get GARBAGE_ARGS on a connection that
	// stays usable.
	c := dialServer(t, addr)
	rootFH := c.root()
	truncated := fhArg(rootFH).Buf
	for _, tc := range []struct {
		proc uint32
		args []byte
	}{
		{nfs3.ProcGetattr, []byte{0, 0, 0, 8, 1, 2}},
		{nfs3.ProcLookup, truncated},
		{nfs3.ProcRead, truncated},
		{nfs3.ProcWrite, append(append([]byte{}, truncated...), 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 5, 0, 0, 0, 0, 0x7f, 0xff, 0xff, 0xff)},
		{nfs3.ProcCreate, append(dirop(rootFH, "x").Buf, 0, 0, 0, 9)},
		{nfs3.ProcMknod, append(dirop(rootFH, "x").Buf, 0, 0, 0, 99)},
	} {
		rep := c.call(nfs3.Program, nfs3.Version, tc.proc, asRoot, tc.args)
		if rep.replyStat != sunrpc.MsgAccepted || rep.stat != uint32(sunrpc.GarbageArgs) {
			t.Errorf("proc %d with bad arguments: %+v", tc.proc, rep)
		}
	}
	if st, _ := c.getattr(asRoot, rootFH); st != nfs3.OK {
		t.Fatalf("GETATTR after bad arguments: %d", st)
	}
}

func TestRPCRefusals(t *testing.T) {
	_, addr := startServer(t, Options{Root: exportDir(t), Export: trusted})
	c := dialServer(t, addr)

	msg := encodeCall(7, nfs3.Program, nfs3.Version, nfs3.ProcNull, asRoot, nil)
	msg[11] = 3 // rpcvers
	c.sendRecord(msg)
	rep, err := c.readReply()
	if err != nil || rep.xid != 7 || rep.replyStat != sunrpc.MsgDenied || rep.stat != sunrpc.RejectRPCMismatch || !bytes.Equal(rep.body, []byte{0, 0, 0, 2, 0, 0, 0, 2}) {
		t.Errorf("rpcvers 3: %+v %v", rep, err)
	}

	for _, tc := range []struct {
		name              string
		prog, vers, proc  uint32
		stat              uint32
		low, high         uint32
		checkVersionRange bool
	}{
		{"unknown program", 100004, 2, 0, uint32(sunrpc.ProgUnavail), 0, 0, false},
		{"NFS v4", nfs3.Program, 4, 0, uint32(sunrpc.ProgMismatch), 3, 3, true},
		{"NFS v2", nfs3.Program, 2, 0, uint32(sunrpc.ProgMismatch), 3, 3, true},
		{"MOUNT v1", nfs3.MountProgram, 1, 0, uint32(sunrpc.ProgMismatch), 3, 3, true},
		{"NFS proc 22", nfs3.Program, nfs3.Version, 22, uint32(sunrpc.ProcUnavail), 0, 0, false},
		{"MOUNT proc 6", nfs3.MountProgram, nfs3.MountVersion, 6, uint32(sunrpc.ProcUnavail), 0, 0, false},
	} {
		rep := c.call(tc.prog, tc.vers, tc.proc, asRoot, nil)
		if rep.replyStat != sunrpc.MsgAccepted || rep.stat != tc.stat {
			t.Errorf("%s: %+v", tc.name, rep)
		}
		if tc.checkVersionRange {
			r := decoder(rep.body)
			if lo, hi := r.Uint32(), r.Uint32(); lo != tc.low || hi != tc.high {
				t.Errorf("%s: versions %d..%d", tc.name, lo, hi)
			}
		}
	}

	// Unsupported flavors and malformed AUTH_SYS bodies: AUTH_BADCRED.
	authCall := func(flavor uint32, body []byte) []byte {
		w := &xdr.Encoder{}
		w.Uint32(9)
		w.Uint32(sunrpc.MsgCall)
		w.Uint32(sunrpc.RPCVersion)
		w.Uint32(nfs3.Program)
		w.Uint32(nfs3.Version)
		w.Uint32(nfs3.ProcNull)
		w.Uint32(flavor)
		w.Opaque(body)
		w.Uint32(uint32(sunrpc.AuthNone))
		w.Uint32(0)
		return w.Buf
	}
	goodSys := encodeCall(1, 0, 0, 0, &sysCred{uid: 1, gid: 1, groups: []uint32{2}}, nil)[28:]
	goodSys = goodSys[4 : len(goodSys)-8]
	tooMany := &xdr.Encoder{}
	tooMany.Uint32(0)
	tooMany.Opaque([]byte("h"))
	tooMany.Uint32(1)
	tooMany.Uint32(1)
	tooMany.Uint32(17)
	for i := 0; i < 17; i++ {
		tooMany.Uint32(5)
	}
	for name, m := range map[string][]byte{
		"AUTH_DH":            authCall(3, nil),
		"RPCSEC_GSS":         authCall(6, []byte{0, 0, 0, 1}),
		"AUTH_SYS truncated": authCall(uint32(sunrpc.AuthSys), goodSys[:len(goodSys)-4]),
		"AUTH_SYS trailing":  authCall(uint32(sunrpc.AuthSys), append(append([]byte{}, goodSys...), 0, 0, 0, 0)),
		"AUTH_SYS 17 groups": authCall(uint32(sunrpc.AuthSys), tooMany.Buf),
	} {
		c.sendRecord(m)
		rep, err := c.readReply()
		if err != nil || rep.replyStat != sunrpc.MsgDenied || rep.stat != sunrpc.RejectAuthError || !bytes.Equal(rep.body, []byte{0, 0, 0, sunrpc.AuthBadCred}) {
			t.Errorf("%s: %+v %v", name, rep, err)
		}
	}
	c.sendRecord(authCall(uint32(sunrpc.AuthSys), goodSys))
	if rep, err := c.readReply(); err != nil || rep.stat != uint32(sunrpc.Success) {
		t.Errorf("well-formed AUTH_SYS: %+v %v", rep, err)
	}
}
