package xprtrdma

import (
	"context"
	"encoding/binary"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rdmafs/rdmafs/nfs3"
	"github.com/rdmafs/rdmafs/rpcrdma"
	"github.com/rdmafs/rdmafs/sunrpc"
	"github.com/rdmafs/rdmafs/verbs"
	"github.com/rdmafs/rdmafs/verbs/soft"
)

// A hostile server: it takes the client's calls and answers each with a
// reply the test makes from the call's header. The client must fail the
// calls whose replies break the protocol, and go on working.

type hostileServer struct {
	t    *testing.T
	prov *soft.Provider
	l    verbs.Listener
	// answer makes the transport header and inline body of the reply to
	// the call whose header is h; nil answers nothing.
	answer func(h *rpcrdma.Header) []byte
	// The protection domain and the last connection accepted, for a
	// test that posts on it itself (set before answer is called).
	pd   verbs.PD
	conn atomic.Pointer[verbs.Conn]
}

func startHostile(t *testing.T, answer func(h *rpcrdma.Header) []byte) *hostileServer {
	t.Helper()
	s := &hostileServer{t: t, prov: soft.New(), answer: answer}
	dev, err := s.prov.Open(context.Background(), "", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	pd, _ := dev.AllocPD()
	s.pd = pd
	if s.l, err = pd.Listen("127.0.0.1:0"); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			req, err := s.l.Accept(context.Background())
			if err != nil {
				return
			}
			go s.serve(pd, req)
		}
	}()
	t.Cleanup(func() {
		s.l.Close()
		<-done
		s.prov.DropConnections()
		pd.Close()
		dev.Close()
	})
	return s
}

func (s *hostileServer) serve(pd verbs.PD, req verbs.ConnRequest) {
	mem, _ := verbs.AllocMemory(64 * 4096)
	defer mem.Free()
	mr, err := pd.Register(mem, 0, 64*4096, verbs.AccessLocalWrite)
	if err != nil {
		return
	}
	defer mr.Deregister()
	conn, err := req.Accept(verbs.ConnConfig{SendDepth: 64, RecvDepth: 64, MaxSendSGE: 1, MaxRecvSGE: 1,
		InitiatorDepth: 1, PrivateData: rpcrdma.PrivateData{SendSize: 4096, RecvSize: 4096}.Encode()})
	if err != nil {
		return
	}
	defer conn.Close()
	s.conn.Store(&conn)
	for i := range 32 {
		sge := [1]verbs.SGE{{MR: mr, Offset: i * 4096, Length: 4096}}
		conn.PostRecv(&verbs.RecvWR{ID: uint64(i), SGL: sge[:]})
	}
	wcs := make([]verbs.Completion, 8)
	next := 32 // send buffers follow the receive buffers
	for {
		n, err := conn.Poll(wcs)
		if err != nil {
			return
		}
		for _, wc := range wcs[:n] {
			if wc.Status != verbs.StatusSuccess || wc.ID >= 32 {
				continue
			}
			var h rpcrdma.Header
			msg := mem.Bytes()[wc.ID*4096 : wc.ID*4096+uint64(wc.ByteLen)]
			if _, err := h.Decode(msg); err == nil {
				if reply := s.answer(&h); reply != nil {
					buf := mem.Bytes()[next*4096:]
					copy(buf, reply)
					sge := [1]verbs.SGE{{MR: mr, Offset: next * 4096, Length: len(reply)}}
					conn.PostSend(&verbs.SendWR{ID: 100, Opcode: verbs.OpSend, SGL: sge[:]})
					next = 32 + (next-31)%32
				}
			}
			sge := [1]verbs.SGE{{MR: mr, Offset: int(wc.ID) * 4096, Length: 4096}}
			conn.PostRecv(&verbs.RecvWR{ID: wc.ID, SGL: sge[:]})
		}
		if n == 0 {
			if err := conn.Wait(context.Background()); err != nil {
				return
			}
		}
	}
}

// client returns an NFS client over a new transport to the server, whose
// calls time out after timeout.
func (s *hostileServer) client(t *testing.T, timeout time.Duration) (*nfs3.Client, *Transport) {
	t.Helper()
	tr, err := New(Config{Provider: s.prov, Addr: s.l.Addr(), ConnectTimeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	rpc := sunrpc.NewClient(tr, sunrpc.Config{Prog: nfs3.Program, Vers: nfs3.Version, Timeout: timeout, ProcNames: nfs3.ProcNames})
	t.Cleanup(func() { rpc.Close() })
	return nfs3.NewClient(rpc, nfs3.ClientConfig{}), tr
}

// rpcSuccess is an accepted, successful RPC reply to xid with body.
func rpcSuccess(xid uint32, body ...uint32) []byte {
	b := binary.BigEndian.AppendUint32(nil, xid)
	for _, v := range append([]uint32{1, 0, 0, 0, 0}, body...) {
		b = binary.BigEndian.AppendUint32(b, v)
	}
	return b
}

func TestHostileServerReplies(t *testing.T) {
	var mode int
	s := startHostile(t, func(h *rpcrdma.Header) []byte {
		r := rpcrdma.Header{Xid: h.Xid, Vers: 1, Credits: 16, Proc: rpcrdma.ProcMsg}
		rpc := rpcSuccess(h.Xid, 0) // NFS3_OK...
		switch mode {
		case 0: // garbage after a valid xid
			return append(binary.BigEndian.AppendUint32(nil, h.Xid), 0xde, 0xad, 0xbe, 0xef, 1, 2, 3)
		case 1: // a write list naming another rkey
			r.Writes[0] = h.Writes[0]
			r.Writes[0].Segments[0].Handle ^= 0x55
			r.NWrites = 1
		case 2: // a write list claiming more than the chunk holds
			r.Writes[0] = h.Writes[0]
			r.Writes[0].Segments[0].Length += 4096
			r.NWrites = 1
		case 3: // RDMA_MSGP
			r.Proc = rpcrdma.ProcMsgp
			return r.Encode(nil)[:16]
		case 4: // RDMA_ERROR ERR_VERS
			r.Proc, r.ErrCode, r.VersLow, r.VersHigh = rpcrdma.ProcError, rpcrdma.ErrVers, 2, 3
			return r.Encode(nil)
		case 5: // a reply chunk nobody offered
			r.Proc = rpcrdma.ProcNoMsg
			r.Reply.N, r.HasReply = 1, true
			r.Reply.Segments[0] = rpcrdma.Segment{Handle: 1, Length: 100, Offset: 0}
			return r.Encode(nil)
		default: // a proper reply: a NULL's empty result
			return append(r.Encode(nil), rpcSuccess(h.Xid)...)
		}
		return append(r.Encode(nil), rpc...)
	})
	c, tr := s.client(t, 5*time.Second)
	ctx := context.Background()
	var fh nfs3.FH // the hostile server answers without looking at it
	for mode = 0; mode <= 5; mode++ {
		// A READ of 8 KiB offers a write chunk.
		var res nfs3.ReadResult
		err := c.Read(ctx, nil, &fh, 0, 8192, &res)
		res.Release()
		if !errors.Is(err, ErrBadReply) {
			t.Errorf("mode %d: READ returned %v, want a bad-reply error", mode, err)
		}
	}
	mode = 7
	if err := c.Null(ctx); err != nil {
		t.Fatalf("a proper reply after the hostile ones: %v", err)
	}
	if got := tr.stats.badReplies.Load(); got != 6 {
		t.Errorf("bad_reply_count %d, want 6", got)
	}
	if tr.stats.ConnectCount.Load() != 1 {
		t.Errorf("%d connections: a bad reply must fail its call only", tr.stats.ConnectCount.Load())
	}
}
