package xprtrdma

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/rdmafs/rdmafs/nfs3"
	"github.com/rdmafs/rdmafs/sunrpc/xdr"
	"github.com/rdmafs/rdmafs/verbs"
	"github.com/rdmafs/rdmafs/verbs/soft"
)

// TestReplyLargerThanReplyChunk: a reply that does not fit the reply chunk
// the call offered is answered with ERR_CHUNK, and the call fails with it
// while the connection goes on.
func TestReplyLargerThanReplyChunk(t *testing.T) {
	b := newTestBed(t, ServerConfig{})
	c, tr := b.client(t, Config{})
	os.Mkdir(filepath.Join(b.dir, "d"), 0o755)
	for i := range 400 {
		os.WriteFile(filepath.Join(b.dir, "d", fmt.Sprintf("a-rather-long-file-name-%04d", i)), nil, 0o644)
	}
	var lr nfs3.LookupResult
	ctx := context.Background()
	if err := c.Lookup(ctx, root, &b.root, "d", &lr); err != nil {
		t.Fatal(err)
	}
	// READDIR of up to 64 KiB, offering a reply chunk of 6000 bytes only.
	rpc := c.RPC()
	call := rpc.NewCall(nfs3.ProcReaddir, root)
	e := call.Args()
	e.Opaque(lr.FH.Bytes())
	e.Uint64(0)
	e.Fixed(make([]byte, 8))
	e.Uint32(65536)
	call.SetArgs(e)
	call.ReplyMax = 6000
	err := rpc.Do(ctx, call)
	call.Release()
	var re *RDMAError
	if !errors.As(err, &re) || re.Code != ErrChunk || !errors.Is(err, ErrBadReply) {
		t.Fatalf("READDIR with a short reply chunk: %v, want ERR_CHUNK", err)
	}
	if tr.stats.badReplies.Load() != 1 {
		t.Errorf("bad_reply_count %d, want 1", tr.stats.badReplies.Load())
	}
	if err := c.Null(ctx); err != nil {
		t.Fatalf("next call on the connection: %v", err)
	}
}

// rawConn is a client of the RPC-over-RDMA server made of bare verbs, to
// send what the rdmafs transport never would.
type rawConn struct {
	conn verbs.Conn
	mr   verbs.MR
	mem  *verbs.Memory
}

func dialRaw(t *testing.T, b *testBed) *rawConn {
	t.Helper()
	ctx := context.Background()
	dev, err := b.prov.Open(ctx, "", b.rdma.Addr())
	if err != nil {
		t.Fatal(err)
	}
	pd, _ := dev.AllocPD()
	mem, _ := verbs.AllocMemory(2 * 8192)
	mr, err := pd.Register(mem, 0, 2*8192, verbs.AccessLocalWrite)
	if err != nil {
		t.Fatal(err)
	}
	conn, err := pd.Dial(ctx, b.rdma.Addr(), verbs.ConnConfig{SendDepth: 8, RecvDepth: 8, MaxSendSGE: 1, MaxRecvSGE: 1,
		ResponderResources: 1, PrivateData: PrivateData{SendSize: 4096, RecvSize: 4096}.Encode()})
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
	b := newTestBed(t, ServerConfig{})
	raw := dialRaw(t, b)
	h := Header{Xid: 42, Vers: 2, Credits: 8, Proc: ProcMsg}
	var got Header
	if _, err := got.Decode(raw.exchange(t, h.Encode(nil))); err != nil {
		t.Fatal(err)
	}
	if got.Xid != 42 || got.Proc != ProcError || got.ErrCode != ErrVers || got.VersLow != 1 || got.VersHigh != 1 {
		t.Fatalf("reply to version 2: %+v", got)
	}
	// A read chunk at an unaligned position.
	h = Header{Xid: 43, Vers: 1, Credits: 8, Proc: ProcMsg}
	h.Reads[0], h.NReads = ReadSegment{Position: 3, Segment: Segment{Handle: 1, Length: 8, Offset: 0}}, 1
	if _, err := got.Decode(raw.exchange(t, append(h.Encode(nil), make([]byte, 40)...))); err != nil {
		t.Fatal(err)
	}
	if got.Xid != 43 || got.Proc != ProcError || got.ErrCode != ErrChunk {
		t.Fatalf("reply to a bad read chunk: %+v", got)
	}
	// RDMA_MSGP is not valid in version 1.
	h = Header{Xid: 44, Vers: 1, Credits: 8, Proc: ProcMsgp}
	if _, err := got.Decode(raw.exchange(t, h.Encode(nil)[:16])); err != nil || got.ErrCode != ErrChunk {
		t.Fatalf("reply to RDMA_MSGP: %+v %v", got, err)
	}
	// A NULL call, inline.
	h = Header{Xid: 45, Vers: 1, Credits: 8, Proc: ProcMsg}
	var e xdr.Encoder
	e.Buf = h.Encode(nil)
	for _, v := range []uint32{45, 0, 2, nfs3.Program, nfs3.Version, 0, 0, 0, 0, 0} {
		e.Uint32(v)
	}
	reply := raw.exchange(t, e.Buf)
	n, err := got.Decode(reply)
	if err != nil || got.Proc != ProcMsg || got.Xid != 45 || len(reply)-n != 24 {
		t.Fatalf("reply to NULL: %+v, %d bytes after the header (%v)", got, len(reply)-n, err)
	}
}

// TestConnectionDroppedMidTransfer breaks the connection while 1 MiB WRITEs
// and READs are in flight: the transport reconnects and every call
// completes with the right data.
func TestConnectionDroppedMidTransfer(t *testing.T) {
	b := newTestBed(t, ServerConfig{})
	c, _ := b.client(t, Config{})
	ctx := context.Background()
	fh := b.create(t, c, "f")
	const n = 16
	data := randomBytes(n << 20)
	done := make(chan error, 2*n)
	write := func(i int) {
		var res nfs3.WriteResult
		done <- c.Write(ctx, root, &fh, uint64(i)<<20, data[i<<20:(i+1)<<20], nfs3.FileSync, &res)
	}
	for i := range n {
		go write(i)
	}
	time.Sleep(5 * time.Millisecond)
	if dropped := b.prov.DropConnections(); dropped == 0 {
		t.Log("nothing to drop yet")
	}
	for range n {
		if err := <-done; err != nil {
			t.Fatalf("WRITE across a lost connection: %v", err)
		}
	}
	if got, _ := os.ReadFile(filepath.Join(b.dir, "f")); len(got) != len(data) || string(got) != string(data) {
		t.Fatal("server file differs after the reconnect")
	}
	reads := make([][]byte, n)
	for i := range n {
		go func() {
			var res nfs3.ReadResult
			err := c.Read(ctx, root, &fh, uint64(i)<<20, 1<<20, &res)
			reads[i] = append([]byte(nil), res.Data...)
			res.Release()
			done <- err
		}()
	}
	time.Sleep(5 * time.Millisecond)
	b.prov.DropConnections()
	for range n {
		if err := <-done; err != nil {
			t.Fatalf("READ across a lost connection: %v", err)
		}
	}
	for i := range n {
		if string(reads[i]) != string(data[i<<20:(i+1)<<20]) {
			t.Fatalf("READ %d across a lost connection returned other data", i)
		}
	}
}

var _ = soft.New
