package svcrdma

import (
	"context"
	"errors"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rdmafs/rdmafs/nfs3"
	"github.com/rdmafs/rdmafs/nfs3/server"
	"github.com/rdmafs/rdmafs/rpcrdma"
	"github.com/rdmafs/rdmafs/sunrpc/xdr"
	"github.com/rdmafs/rdmafs/verbs"
	"github.com/rdmafs/rdmafs/verbs/soft"
)

// These tests run the server over the soft verbs provider in front of
// rdmafs's NFS server (nfs3/server) on a temporary directory, with clients
// made of bare verbs that send what the rdmafs client never would. The
// client transport's tests (xprtrdma) run it end to end.

// startServer starts an NFS server behind an RPC-over-RDMA listener.
func startServer(t *testing.T, cfg Config) (*Server, *soft.Provider) {
	t.Helper()
	return startServerWith(t, cfg, server.Options{})
}

// startServerWith is startServer with the NFS server's options (its root
// and export are the test's).
func startServerWith(t *testing.T, cfg Config, opts server.Options) (*Server, *soft.Provider) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("the NFS server switches credentials per call and needs root")
	}
	opts.Root, opts.Export = t.TempDir(), server.Export{Insecure: true, NoRootSquash: true}
	opts.Logf = t.Logf
	nfs, err := server.New(opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { nfs.Close() })
	prov := soft.New()
	cfg.Provider = prov
	cfg.Addr = "127.0.0.1:0"
	cfg.Service = nfs.RPC()
	s, err := Listen(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	go s.Serve()
	t.Cleanup(func() { s.Close() })
	return s, prov
}

// rawConn is a client of the RPC-over-RDMA server made of bare verbs, to
// send what the rdmafs transport never would.
type rawConn struct {
	conn verbs.Conn
	mr   verbs.MR
	mem  *verbs.Memory
}

func dialRaw(t *testing.T, prov *soft.Provider, addr string) *rawConn {
	t.Helper()
	ctx := context.Background()
	dev, err := prov.Open(ctx, "", addr)
	if err != nil {
		t.Fatal(err)
	}
	pd, _ := dev.AllocPD()
	mem, _ := verbs.AllocMemory(2 * 8192)
	mr, err := pd.Register(mem, 0, 2*8192, verbs.AccessLocalWrite)
	if err != nil {
		t.Fatal(err)
	}
	conn, err := pd.Dial(ctx, addr, verbs.ConnConfig{SendDepth: 8, RecvDepth: 8, MaxSendSGE: 1, MaxRecvSGE: 1,
		ResponderResources: 1, PrivateData: rpcrdma.PrivateData{SendSize: 4096, RecvSize: 4096}.Encode()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		conn.Close()
		mr.Deregister()
		pd.Close()
		dev.Close()
		mem.Free()
	})
	return &rawConn{conn: conn, mr: mr, mem: mem}
}

// exchange sends msg and returns the reply's bytes.
func (r *rawConn) exchange(t *testing.T, msg []byte) []byte {
	t.Helper()
	recv := [1]verbs.SGE{{MR: r.mr, Offset: 8192, Length: 8192}}
	if err := r.conn.PostRecv(&verbs.RecvWR{ID: 1, SGL: recv[:]}); err != nil {
		t.Fatal(err)
	}
	copy(r.mem.Bytes(), msg)
	send := [1]verbs.SGE{{MR: r.mr, Length: len(msg)}}
	if err := r.conn.PostSend(&verbs.SendWR{ID: 2, Opcode: verbs.OpSend, SGL: send[:], Signaled: true}); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	wcs := make([]verbs.Completion, 4)
	for {
		n, err := r.conn.Poll(wcs)
		if err != nil {
			t.Fatal(err)
		}
		for _, wc := range wcs[:n] {
			if wc.ID == 1 {
				if wc.Status != verbs.StatusSuccess {
					t.Fatalf("receive: %v", wc.Status)
				}
				return append([]byte(nil), r.mem.Bytes()[8192:8192+wc.ByteLen]...)
			}
		}
		if n == 0 {
			if err := r.conn.Wait(ctx); err != nil {
				t.Fatalf("waiting for the reply: %v", err)
			}
		}
	}
}

// TestServerAnswersWrongVersion: a call in RPC-over-RDMA version 2 gets
// RDMA_ERROR ERR_VERS naming version 1 as the only one; bad chunk lists
// get ERR_CHUNK; the connection stays up for a proper call after.
func TestServerAnswersWrongVersion(t *testing.T) {
	s, prov := startServer(t, Config{})
	raw := dialRaw(t, prov, s.Addr())
	h := rpcrdma.Header{Xid: 42, Vers: 2, Credits: 8, Proc: rpcrdma.ProcMsg}
	var got rpcrdma.Header
	if _, err := got.Decode(raw.exchange(t, h.Encode(nil))); err != nil {
		t.Fatal(err)
	}
	if got.Xid != 42 || got.Proc != rpcrdma.ProcError || got.ErrCode != rpcrdma.ErrVers || got.VersLow != 1 || got.VersHigh != 1 {
		t.Fatalf("reply to version 2: %+v", got)
	}
	// A read chunk at an unaligned position.
	h = rpcrdma.Header{Xid: 43, Vers: 1, Credits: 8, Proc: rpcrdma.ProcMsg}
	h.Reads[0], h.NReads = rpcrdma.ReadSegment{Position: 3, Segment: rpcrdma.Segment{Handle: 1, Length: 8, Offset: 0}}, 1
	if _, err := got.Decode(raw.exchange(t, append(h.Encode(nil), make([]byte, 40)...))); err != nil {
		t.Fatal(err)
	}
	if got.Xid != 43 || got.Proc != rpcrdma.ProcError || got.ErrCode != rpcrdma.ErrChunk {
		t.Fatalf("reply to a bad read chunk: %+v", got)
	}
	// RDMA_MSGP is not valid in version 1.
	h = rpcrdma.Header{Xid: 44, Vers: 1, Credits: 8, Proc: rpcrdma.ProcMsgp}
	if _, err := got.Decode(raw.exchange(t, h.Encode(nil)[:16])); err != nil || got.ErrCode != rpcrdma.ErrChunk {
		t.Fatalf("reply to RDMA_MSGP: %+v %v", got, err)
	}
	// A NULL call, inline.
	h = rpcrdma.Header{Xid: 45, Vers: 1, Credits: 8, Proc: rpcrdma.ProcMsg}
	var e xdr.Encoder
	e.Buf = h.Encode(nil)
	for _, v := range []uint32{45, 0, 2, nfs3.Program, nfs3.Version, 0, 0, 0, 0, 0} {
		e.Uint32(v)
	}
	reply := raw.exchange(t, e.Buf)
	n, err := got.Decode(reply)
	if err != nil || got.Proc != rpcrdma.ProcMsg || got.Xid != 45 || len(reply)-n != 24 {
		t.Fatalf("reply to NULL: %+v, %d bytes after the header (%v)", got, len(reply)-n, err)
	}
}

// TestAdmitRefuses: a connection request from a client the server's Admit
// refuses is rejected before anything is set up for it.
func TestAdmitRefuses(t *testing.T) {
	var asked []string
	var mu sync.Mutex
	s, prov := startServer(t, Config{Admit: func(remote string) bool {
		mu.Lock()
		defer mu.Unlock()
		asked = append(asked, remote)
		return false
	}})
	dev, err := prov.Open(context.Background(), "", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer dev.Close()
	pd, err := dev.AllocPD()
	if err != nil {
		t.Fatal(err)
	}
	defer pd.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	own := rpcrdma.PrivateData{SendSize: 4096, RecvSize: 4096}
	conn, err := pd.Dial(ctx, s.Addr(), verbs.ConnConfig{SendDepth: 4, RecvDepth: 4, MaxSendSGE: 1, MaxRecvSGE: 1,
		ResponderResources: 1, PrivateData: own.Encode(), Timeout: 5 * time.Second})
	if err == nil {
		conn.Close()
		t.Fatal("a refused client connected")
	}
	if !errors.Is(err, verbs.ErrRejected) {
		t.Errorf("refused client: %v, want a rejection", err)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(asked) != 1 || !strings.HasPrefix(asked[0], "127.0.0.1:") {
		t.Errorf("Admit was asked about %q", asked)
	}
}

// FuzzServerCallHeader checks the server's acceptance of a call's header
// and inline part: nothing panics, and an accepted call's message fits the
// buffer it is assembled in.
func FuzzServerCallHeader(f *testing.F) {
	// A WRITE call with its data in a read chunk.
	h := &rpcrdma.Header{Xid: 0x01020304, Vers: rpcrdma.Version, Credits: 128, Proc: rpcrdma.ProcMsg}
	h.Reads[0] = rpcrdma.ReadSegment{Position: 120, Segment: rpcrdma.Segment{Handle: 7, Length: 1 << 20, Offset: 0x7f0000001000}}
	h.NReads = 1
	f.Add(append(h.Encode(nil), make([]byte, 200)...))
	f.Add((&rpcrdma.Header{Xid: 1, Vers: 1, Proc: rpcrdma.ProcNoMsg, NReads: 1}).Encode(nil))
	f.Fuzz(func(t *testing.T, b []byte) {
		var h rpcrdma.Header
		n, err := h.Decode(b)
		if err != nil || h.Vers != rpcrdma.Version || h.Proc == rpcrdma.ProcError {
			return
		}
		const bufSize = 1 << 16
		inline := b[n:]
		pos, total, err := checkCall(&h, inline, 4096, bufSize)
		if err != nil {
			return
		}
		if int(pos) > len(inline) || len(inline)+total+xdr.Pad(total) > bufSize || total < 0 {
			t.Fatalf("accepted a call of %d inline bytes and a chunk of %d at %d", len(inline), total, pos)
		}
	})
}

// nullCall is an inline RDMA_MSG carrying an NFS NULL call.
func nullCall(xid uint32) []byte {
	h := rpcrdma.Header{Xid: xid, Vers: 1, Credits: 8, Proc: rpcrdma.ProcMsg}
	var e xdr.Encoder
	e.Buf = h.Encode(nil)
	for _, v := range []uint32{xid, 0, 2, nfs3.Program, nfs3.Version, 0, 0, 0, 0, 0} {
		e.Uint32(v)
	}
	return e.Buf
}

// TestMaxConnectionsCountsRDMA: RDMA connections count against the
// server's connection limit (max_connections), as TCP connections do: at
// the limit, a new connection makes the least recently active go, and
// with it its buffers. Before, nothing limited RDMA connections.
func TestMaxConnectionsCountsRDMA(t *testing.T) {
	s, prov := startServerWith(t, Config{}, server.Options{MaxConns: 2})
	var raws []*rawConn
	for i := range 3 {
		raws = append(raws, dialRaw(t, prov, s.Addr()))
		var got rpcrdma.Header
		if _, err := got.Decode(raws[i].exchange(t, nullCall(uint32(50+i)))); err != nil || got.Proc != rpcrdma.ProcMsg {
			t.Fatalf("NULL on connection %d: %+v %v", i, got, err)
		}
		time.Sleep(10 * time.Millisecond) // the first is the least recently active
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	wcs := make([]verbs.Completion, 4)
	for {
		if _, err := raws[0].conn.Poll(wcs); err != nil {
			break
		}
		if err := raws[0].conn.Wait(ctx); err != nil {
			if ctx.Err() != nil {
				t.Fatal("the least recently active of 3 RDMA connections is still up with max_connections 2")
			}
			break
		}
	}
	var got rpcrdma.Header
	if _, err := got.Decode(raws[2].exchange(t, nullCall(60))); err != nil || got.Proc != rpcrdma.ProcMsg {
		t.Fatalf("NULL on the newest connection: %+v %v", got, err)
	}
	// The client sees the closed connection before the server has
	// finished tearing it down: give the teardown its moment.
	var n int
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		s.mu.Lock()
		n = len(s.conns)
		s.mu.Unlock()
		if n == 2 || time.Now().After(deadline) {
			break
		}
	}
	if n != 2 {
		t.Errorf("the RDMA server holds %d connections, want 2", n)
	}
}
