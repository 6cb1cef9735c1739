package sunrpc

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/rdmafs/rdmafs/sunrpc/xdr"
)

// budgetFree is what the server's receive budget has left.
func budgetFree(srv *Server) int {
	srv.receiving.mu.Lock()
	defer srv.receiving.mu.Unlock()
	return srv.receiving.free
}

// TestRecordBudget: the large part of records waits for a reservation
// from the budget, of which one host's connections, however many, take at
// most their share (half, while they are alone); small calls do not wait,
// and connections that time out give their part back.
func TestRecordBudget(t *testing.T) {
	const maxRecord = 1<<20 + 1024
	st := startSvc(t, ServerConfig{MaxRecord: maxRecord, IdleTimeout: 2 * time.Second})
	// Connections that each announce the largest record and send none of
	// it take their host's share.
	claim := maxRecord
	perConn := claim - freeRecordBytes
	n := recordBudget/perConn + 3
	for range n {
		c, err := net.Dial("tcp", st.addr)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		var hdr [4]byte
		PutRecordMark(hdr[:], claim)
		c.Write(hdr[:])
	}
	share := recordBudget / 2
	deadline := time.Now().Add(5 * time.Second)
	for {
		free := budgetFree(st.srv)
		if recordBudget-free > share-perConn {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d connections announcing %d bytes took %d of the budget, want their share, %d", n, claim, recordBudget-free, share)
		}
		time.Sleep(10 * time.Millisecond)
	}
	time.Sleep(100 * time.Millisecond)
	if used := recordBudget - budgetFree(st.srv); used > share {
		t.Errorf("one host's %d connections took %d of the budget, more than its share %d", n, used, share)
	}
	// A small call still goes through.
	var opaque xdr.Encoder
	opaque.Opaque([]byte("small"))
	if _, err := callRaw(st.client(t, svcTestProg, 2), procEcho, opaque.Buf); err != nil {
		t.Fatalf("a small call while the budget is spent: %v", err)
	}
	// The waiting connections time out and give everything back.
	deadline = time.Now().Add(10 * time.Second)
	for {
		free := budgetFree(st.srv)
		if free == recordBudget {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("budget %d of %d after the idle timeout", free, recordBudget)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// echoFrom makes an echo call of n bytes over a new connection from the
// address from, and returns how long the reply took, or an error.
func echoFrom(t *testing.T, from, addr string, n int) (time.Duration, error) {
	t.Helper()
	d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(from)}}
	c, err := d.Dial("tcp", addr)
	if err != nil {
		return 0, err
	}
	defer c.Close()
	var e xdr.Encoder
	for _, v := range []uint32{7, MsgCall, RPCVersion, svcTestProg, 2, procEcho, 0, 0, 0, 0} {
		e.Uint32(v)
	}
	e.Opaque(make([]byte, n))
	rec := make([]byte, 4, 4+len(e.Buf))
	PutRecordMark(rec, len(e.Buf))
	start := time.Now()
	c.SetDeadline(start.Add(20 * time.Second))
	if _, err := c.Write(append(rec, e.Buf...)); err != nil {
		return 0, err
	}
	rr := RecordReader{R: c, MaxRecord: 2 << 20}
	reply, err := rr.Read(nil)
	if err != nil {
		return 0, err
	}
	if len(reply) < 24+n {
		return 0, fmt.Errorf("a reply of %d bytes", len(reply))
	}
	return time.Since(start), nil
}

// TestBudgetFairAmongHosts: a crowd of connections from one host that each
// send most of a large record and stop cannot stall another host's large
// calls: that host finds its share free at once. Before, the crowd took
// the whole budget and the other host's call waited until the crowd's
// connections timed out.
func TestBudgetFairAmongHosts(t *testing.T) {
	const maxRecord = 1<<20 + 1024
	st := startSvc(t, ServerConfig{MaxRecord: maxRecord})
	data := make([]byte, 4+1000<<10)
	PutRecordMark(data, maxRecord)
	d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP("127.0.0.2")}}
	for range 80 {
		c, err := d.Dial("tcp", st.addr)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		go func() {
			c.SetWriteDeadline(time.Now().Add(5 * time.Second))
			c.Write(data)
		}()
	}
	deadline := time.Now().Add(5 * time.Second)
	for recordBudget-budgetFree(st.srv) < recordBudget/2-maxRecord {
		if time.Now().After(deadline) {
			t.Fatalf("the crowd took %d of the budget", recordBudget-budgetFree(st.srv))
		}
		time.Sleep(10 * time.Millisecond)
	}
	// Eight large calls of another host, one after another and at once.
	for range 2 {
		var wg sync.WaitGroup
		for range 4 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				took, err := echoFrom(t, "127.0.0.1", st.addr, 1<<20)
				if err != nil {
					t.Errorf("a 1 MiB call beside the crowd: %v", err)
				} else if took > 3*time.Second {
					t.Errorf("a 1 MiB call beside the crowd took %v", took)
				}
			}()
		}
		wg.Wait()
	}
}

// TestRefusedClientSmallRecords: a client the server does not admit, or
// whose large calls it would refuse, may send small records only (a NULL
// call is answered); one that announces a large record is cut off at its
// header and takes nothing of the budget.
func TestRefusedClientSmallRecords(t *testing.T) {
	const maxRecord = 1<<20 + 1024
	for _, cfg := range []ServerConfig{
		{MaxRecord: maxRecord, Admit: func(p *Peer) bool { return false }},
		{MaxRecord: maxRecord, LargeCalls: func(p *Peer) bool { return p.Secure }},
	} {
		st := startSvc(t, cfg)
		if _, err := callRaw(st.client(t, svcTestProg, 2), 0, nil); err != nil {
			t.Errorf("NULL: %v", err)
		}
		c, err := net.Dial("tcp", st.addr)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		data := make([]byte, 4+1000<<10)
		PutRecordMark(data, maxRecord)
		go func() {
			c.SetWriteDeadline(time.Now().Add(5 * time.Second))
			c.Write(data)
		}()
		c.SetReadDeadline(time.Now().Add(5 * time.Second))
		if _, err := c.Read(make([]byte, 1)); err == nil || errors.Is(err, os.ErrDeadlineExceeded) {
			t.Errorf("a refused client's connection announcing a 1 MiB record is still open (%v)", err)
		}
		if free := budgetFree(st.srv); free != recordBudget {
			t.Errorf("a refused client took %d of the budget", recordBudget-free)
		}
	}
}

// TestHostBudgetShares: a host may hold at most the budget over one more
// than the hosts active, and at least one largest call; a new host finds
// its share free; what a host gives back lets its own waiters in.
func TestHostBudgetShares(t *testing.T) {
	var b hostBudget
	b.init(60, 5)
	a, c := netip.MustParseAddr("10.0.0.1"), netip.MustParseAddr("10.0.0.2")
	for range 6 {
		if !b.tryAcquire(a, 5) {
			t.Fatal("a host alone cannot take half the budget")
		}
	}
	if b.tryAcquire(a, 5) {
		t.Fatal("a host alone took more than half the budget")
	}
	// c comes: its share (60/3) is free at once; a's shrinks.
	for range 4 {
		if !b.tryAcquire(c, 5) {
			t.Fatal("a new host did not find its share free")
		}
	}
	if b.tryAcquire(c, 5) || b.tryAcquire(a, 5) {
		t.Fatal("a host took more than its share")
	}
	// A waiter of c gets in when c gives back.
	got := make(chan bool)
	go func() {
		ok, _ := b.acquire(c, 5, 5*time.Second, nil, nil)
		got <- ok
	}()
	time.Sleep(50 * time.Millisecond)
	b.release(a, 5) // not c's: c stays at its share
	select {
	case <-got:
		t.Fatal("a host's waiter got in past its share")
	case <-time.After(50 * time.Millisecond):
	}
	b.release(c, 5)
	if !<-got {
		t.Fatal("a host's waiter did not get in once it gave back")
	}
	// Many hosts: each may take one largest call, as long as the budget
	// has it.
	b.release(a, 5)
	for i := range 20 {
		h := netip.AddrFrom4([4]byte{10, 1, 0, byte(i)})
		free := b.free
		if ok := b.tryAcquire(h, 5); ok != (free >= 5) {
			t.Fatalf("host %d of 20: took one largest call: %v, with %d free", i, ok, free)
		}
	}
}
