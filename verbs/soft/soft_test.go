package soft_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/rdmafs/rdmafs/verbs"

	"github.com/rdmafs/rdmafs/verbs/conformance"
	"github.com/rdmafs/rdmafs/verbs/soft"
)

// TestConformance runs the verbs conformance suite against the soft
// provider on the loopback interface.
func TestConformance(t *testing.T) {
	p := soft.New()
	p.RNRTimeout = 1e9 // one second: the RNR test need not wait the default
	conformance.Run(t, p, "", "127.0.0.1:0")
}

// TestCrossProcess runs the server end in a child process (this test
// binary again): regions, rkeys and private data between two processes.
func TestCrossProcess(t *testing.T) {
	if os.Getenv("SOFT_TEST_CHILD") == "1" {
		crossProcessChild()
		return
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestCrossProcess$")
	cmd.Env = append(os.Environ(), "SOFT_TEST_CHILD=1")
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Wait()
	defer cmd.Process.Kill()
	sc := bufio.NewScanner(out)
	var addr string
	for sc.Scan() {
		if a, ok := strings.CutPrefix(sc.Text(), "LISTEN "); ok {
			addr = a
			break
		}
	}
	if addr == "" {
		t.Fatalf("child did not listen")
	}

	p := soft.New()
	dev, _ := p.Open(context.Background(), "", "")
	defer dev.Close()
	pd, _ := dev.AllocPD()
	defer pd.Close()
	mem, _ := verbs.AllocMemory(1<<20 + 4096)
	defer mem.Free()
	mr, err := pd.Register(mem, 0, 1<<20+4096, verbs.AccessLocalWrite)
	if err != nil {
		t.Fatal(err)
	}
	defer mr.Deregister()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := pd.Dial(ctx, addr, verbs.ConnConfig{SendDepth: 8, RecvDepth: 8, ResponderResources: 1, InitiatorDepth: 1, PrivateData: []byte("parent")})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	// The child's accept carries its region's address and rkey.
	pdata := c.PeerPrivateData()
	if len(pdata) != 12 {
		t.Fatalf("child's private data %x", pdata)
	}
	raddr, rkey := binary.BigEndian.Uint64(pdata), binary.BigEndian.Uint32(pdata[8:])
	b := mr.Bytes()
	for i := range b[:1<<19] {
		b[i] = byte(i * 7)
	}
	wrs := []verbs.SendWR{
		{ID: 1, Opcode: verbs.OpRDMAWrite, SGL: []verbs.SGE{{MR: mr, Length: 1 << 19}}, RemoteAddr: raddr, RKey: rkey},
		{ID: 2, Opcode: verbs.OpRDMARead, Signaled: true, SGL: []verbs.SGE{{MR: mr, Offset: 1 << 19, Length: 1 << 19}}, RemoteAddr: raddr, RKey: rkey},
		{ID: 3, Opcode: verbs.OpSend, Signaled: true, SGL: []verbs.SGE{{MR: mr, Length: 64}}},
	}
	if err := c.PostRecv(&verbs.RecvWR{ID: 9, SGL: []verbs.SGE{{MR: mr, Offset: 1 << 20, Length: 100}}}); err != nil {
		t.Fatal(err)
	}
	for i := range wrs {
		if err := c.PostSend(&wrs[i]); err != nil {
			t.Fatal(err)
		}
	}
	wcs := make([]verbs.Completion, 0, 3)
	for len(wcs) < 3 {
		var buf [3]verbs.Completion
		n, _ := c.Poll(buf[:])
		wcs = append(wcs, buf[:n]...)
		if n == 0 {
			if err := c.Wait(ctx); err != nil {
				t.Fatalf("completions %+v: %v", wcs, err)
			}
		}
	}
	if wcs[0].ID != 2 || wcs[1].ID != 3 || wcs[2].ID != 9 || wcs[2].ByteLen != 2 || string(b[1<<20:1<<20+2]) != "ok" {
		t.Fatalf("completions %+v, reply %q", wcs, b[1<<20:1<<20+2])
	}
	if !bytes.Equal(b[:1<<19], b[1<<19:1<<20]) {
		t.Fatalf("RDMA READ from the child did not return what the RDMA WRITE put there")
	}
}

// crossProcessChild is the server of TestCrossProcess.
func crossProcessChild() {
	fail := func(err error) {
		fmt.Fprintln(os.Stderr, "child:", err)
		os.Exit(1)
	}
	p := soft.New()
	dev, _ := p.Open(context.Background(), "", "")
	pd, _ := dev.AllocPD()
	ln, err := pd.Listen("127.0.0.1:0")
	if err != nil {
		fail(err)
	}
	fmt.Printf("LISTEN %s\n", ln.Addr())
	mem, _ := verbs.AllocMemory(1<<19 + 4096)
	mr, err := pd.Register(mem, 0, 1<<19+4096, verbs.AccessLocalWrite|verbs.AccessRemoteWrite|verbs.AccessRemoteRead)
	if err != nil {
		fail(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	req, err := ln.Accept(ctx)
	if err != nil {
		fail(err)
	}
	if string(req.PrivateData()) != "parent" {
		fail(fmt.Errorf("request private data %q", req.PrivateData()))
	}
	pdata := binary.BigEndian.AppendUint64(nil, mr.Addr())
	pdata = binary.BigEndian.AppendUint32(pdata, mr.RKey())
	c, err := req.Accept(verbs.ConnConfig{SendDepth: 8, RecvDepth: 8, ResponderResources: 1, InitiatorDepth: 1, PrivateData: pdata})
	if err != nil {
		fail(err)
	}
	c.PostRecv(&verbs.RecvWR{ID: 1, SGL: []verbs.SGE{{MR: mr, Offset: 1 << 18, Length: 64}}})
	var wc [1]verbs.Completion
	for {
		if n, _ := c.Poll(wc[:]); n == 1 {
			break
		}
		if err := c.Wait(ctx); err != nil {
			fail(err)
		}
	}
	// Not in the first 512 KiB: the parent's RDMA READ of them may still
	// be on its way out (a READ response reads memory as it is sent).
	copy(mr.Bytes()[1<<19:], "ok")
	c.PostSend(&verbs.SendWR{ID: 2, Opcode: verbs.OpSend, Signaled: true, SGL: []verbs.SGE{{MR: mr, Offset: 1 << 19, Length: 2}}})
	for {
		if n, _ := c.Poll(wc[:]); n == 1 {
			break
		}
		if err := c.Wait(ctx); err != nil {
			fail(err)
		}
	}
	<-c.Done() // the parent disconnects
	c.Close()
	os.Exit(0)
}
