package sunrpc

import (
	"net"
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

// TestRecordBudget: the large part of records waits for a server-wide
// reservation; small calls do not, and connections that time out give
// their part back.
func TestRecordBudget(t *testing.T) {
	const maxRecord = 1<<20 + 1024
	st := startSvc(t, ServerConfig{MaxRecord: maxRecord, IdleTimeout: 2 * time.Second})
	// Connections that each announce the largest record and send none of
	// it take what the budget has.
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
	deadline := time.Now().Add(5 * time.Second)
	for {
		free := budgetFree(st.srv)
		if free < perConn {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d connections announcing %d bytes left %d of the budget free", n, claim, free)
		}
		time.Sleep(10 * time.Millisecond)
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
