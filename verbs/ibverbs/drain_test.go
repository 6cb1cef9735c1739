//go:build cgo && linux

package ibverbs

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/rdmafs/rdmafs/verbs"
)

// TestDrainWhilePolling ends a connection whose drain marker the device
// refuses while another goroutine polls a send completion: Poll holds the
// CQ's lock and converts the completion under the send queue's, drain
// holds the send queue's and then marks the send queue drained under the
// CQ's. Taken in opposite orders, the two deadlocked. The marker hook
// starts the Poll and gives it time to block on the send queue's lock
// before drain goes on.
func TestDrainWhilePolling(t *testing.T) {
	device, addr := os.Getenv("RDMAFS_VERBS_DEVICE"), os.Getenv("RDMAFS_VERBS_ADDR")
	if device == "" || addr == "" {
		t.Skip("no RDMA device to test on: set RDMAFS_VERBS_DEVICE and RDMAFS_VERBS_ADDR (e.g. rxe0 and its IP)")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	dev, err := Provider{}.Open(ctx, device, addr)
	if err != nil {
		t.Fatal(err)
	}
	defer dev.Close()
	cpd, _ := dev.AllocPD()
	defer cpd.Close()
	spd, _ := dev.AllocPD()
	defer spd.Close()
	ln, err := spd.Listen(addr + ":0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	cfg := verbs.ConnConfig{SendDepth: 8, RecvDepth: 8, MaxSendSGE: 1, MaxRecvSGE: 1, ResponderResources: 1}

	mem, _ := verbs.AllocMemory(8192)
	defer mem.Free()
	smr, err := spd.Register(mem, 4096, 4096, verbs.AccessLocalWrite)
	if err != nil {
		t.Fatal(err)
	}
	defer smr.Deregister()
	accepted := make(chan verbs.Conn, 1)
	go func() {
		r, err := ln.Accept(ctx)
		if err != nil {
			accepted <- nil
			return
		}
		c, _ := r.Accept(cfg)
		if c != nil {
			// A receive for the client's send.
			c.PostRecv(&verbs.RecvWR{ID: 1, SGL: []verbs.SGE{{MR: smr, Length: 4096}}})
		}
		accepted <- c
	}()
	client, err := cpd.Dial(ctx, ln.Addr(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	server := <-accepted
	if server == nil {
		t.Fatal("accept failed")
	}
	defer server.Close()
	cmr, err := cpd.Register(mem, 0, 4096, verbs.AccessLocalWrite)
	if err != nil {
		t.Fatal(err)
	}
	defer cmr.Deregister()

	// A signaled send that completes, not yet polled.
	if err := client.PostSend(&verbs.SendWR{ID: 7, Opcode: verbs.OpSend, Signaled: true,
		SGL: []verbs.SGE{{MR: cmr, Length: 64}}}); err != nil {
		t.Fatal(err)
	}
	time.Sleep(200 * time.Millisecond)

	polled := make(chan int, 1)
	client.(*conn).postMarker = func(c *conn) bool {
		go func() {
			wcs := make([]verbs.Completion, 4)
			n, _ := client.Poll(wcs)
			polled <- n
		}()
		time.Sleep(200 * time.Millisecond) // Poll takes cqMu and waits for sendMu
		return false
	}

	disconnected := make(chan struct{})
	go func() {
		client.Disconnect()
		close(disconnected)
	}()
	select {
	case <-disconnected:
	case <-time.After(10 * time.Second):
		deadlocked("Disconnect")
	}
	select {
	case n := <-polled:
		if n < 1 {
			t.Errorf("Poll returned %d completions, want the send's", n)
		}
	case <-time.After(10 * time.Second):
		deadlocked("Poll")
	}
}

// deadlocked ends the test binary: closing the connections would hang on
// the same locks.
func deadlocked(what string) {
	fmt.Fprintf(os.Stderr, "--- FAIL: TestDrainWhilePolling: %s did not return in 10 s: drain and Poll deadlocked\n", what)
	os.Exit(1)
}
