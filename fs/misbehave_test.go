package fs

import (
	"bytes"
	"context"
	"encoding/binary"
	"os/exec"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/rdmafs/rdmafs/nfs3"
	"github.com/rdmafs/rdmafs/sunrpc"
)

// misbehaving makes a correct server look broken: it changes calls before
// they go out and replies once they are back.
type misbehaving struct {
	sunrpc.Transport
	call  func(*sunrpc.Call) // before the call is sent
	reply func(*sunrpc.Call) // after its reply came
}

var _ sunrpc.Transport = (*misbehaving)(nil)

func (m *misbehaving) RoundTrip(ctx context.Context, call *sunrpc.Call) error {
	if m.call != nil {
		m.call(call)
	}
	err := m.Transport.RoundTrip(ctx, call)
	if err == nil && m.reply != nil {
		m.reply(call)
	}
	return err
}

// replyBody returns the offset of the procedure's results in an accepted
// RPC reply message: after xid, direction, reply status, the verifier and
// the accept status.
func replyBody(msg []byte) int {
	vlen := int(binary.BigEndian.Uint32(msg[16:]))
	return 20 + (vlen+3)&^3 + 4
}

// shortenRead cuts the data of a READ reply to at most n bytes, and unless
// the reply reached the end of the file, says it did not.
func shortenRead(call *sunrpc.Call, n int) {
	msg := call.Reply.Msg
	p := replyBody(msg)
	if binary.BigEndian.Uint32(msg[p:]) != 0 {
		return // an error status
	}
	p += 4
	if binary.BigEndian.Uint32(msg[p:]) != 0 {
		p += 4 + 84 // post_op_attr: the fattr3
	} else {
		p += 4
	}
	count := int(binary.BigEndian.Uint32(msg[p:]))
	if count <= n {
		return
	}
	binary.BigEndian.PutUint32(msg[p:], uint32(n))
	binary.BigEndian.PutUint32(msg[p+4:], 0) // eof false
	binary.BigEndian.PutUint32(msg[p+8:], uint32(n))
	call.Reply.Msg = msg[:p+12+(n+3)&^3]
}

// TestShortReads: a READ that returns less than asked, not at the end of
// the file, is continued where it stopped; one that returns nothing and
// no end of file is an I/O error, not the end of the file.
func TestShortReads(t *testing.T) {
	for _, c := range []struct {
		name    string
		cut     int
		wantErr syscall.Errno
	}{
		{"1000 bytes at a time", 1000, 0},
		{"nothing and no EOF", 0, syscall.EIO},
	} {
		t.Run(c.name, func(t *testing.T) {
			var cutting bool
			h := newHarness(t, harnessConfig{wrap: func(tr sunrpc.Transport) sunrpc.Transport {
				return &misbehaving{Transport: tr, reply: func(call *sunrpc.Call) {
					if cutting && call.Proc == nfs3.ProcRead {
						shortenRead(call, c.cut)
					}
				}}
			}})
			data := bytes.Repeat([]byte("0123456789abcdef"), 4096)
			h.writeServerFile("f", data, 0o644)
			node := h.mustLookup(rootNode, "f")
			fh, _, en := h.open(node, syscall.O_RDONLY)
			if en != 0 {
				t.Fatal(en)
			}
			cutting = true
			got, en := h.read(node, fh, 100, 32<<10)
			if en != c.wantErr {
				t.Fatalf("read of 32 KiB at 100: %d bytes, errno %v; want errno %v", len(got), en, c.wantErr)
			}
			if en == 0 && !bytes.Equal(got, data[100:100+32<<10]) {
				t.Fatalf("read of 32 KiB at 100: %d bytes, not the file's", len(got))
			}
		})
	}
}

// TestReaddirLoop: a server whose READDIRPLUS cookies lead back to the
// start makes the listing fail with ELOOP instead of going on for ever.
func TestReaddirLoop(t *testing.T) {
	h := newHarness(t, harnessConfig{
		opts: Options{RSize: 4096, ACRegMin: time.Second, ACRegMax: time.Second, ACDirMin: time.Second, ACDirMax: time.Second},
		wrap: func(tr sunrpc.Transport) sunrpc.Transport {
			return &misbehaving{Transport: tr, call: func(call *sunrpc.Call) {
				if call.Proc == nfs3.ProcReaddirplus {
					// cookie and cookie verifier, before dircount and
					// maxcount: back to the start of the directory.
					clear(call.Head[len(call.Head)-24 : len(call.Head)-8])
				}
			}}
		},
	})
	for i := range 200 {
		h.writeServerFile("file-with-a-long-name-"+itoa(i), nil, 0o644)
	}
	done := make(chan syscall.Errno, 1)
	go func() {
		names, en := h.listRoot()
		t.Logf("%d names before the listing ended", len(names))
		done <- en
	}()
	select {
	case en := <-done:
		if en != syscall.ELOOP {
			t.Fatalf("listing a directory whose cookies loop: errno %v, want ELOOP", en)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("listing a directory whose cookies loop did not end in 20 s")
	}
}

// TestCallOfAGoneCallerIsAbandoned: a READ no one waits for any more (the
// readahead of a program that died) is abandoned once its caller is gone,
// even if the server never answers and nothing interrupts it.
func TestCallOfAGoneCallerIsAbandoned(t *testing.T) {
	var hang atomic.Bool
	h := newHarness(t, harnessConfig{wrap: func(tr sunrpc.Transport) sunrpc.Transport {
		return &stalling{Transport: tr, stall: func(call *sunrpc.Call) bool {
			return hang.Load() && call.Proc == nfs3.ProcRead
		}}
	}})
	h.writeServerFile("f", bytes.Repeat([]byte("x"), 8192), 0o644)
	node := h.mustLookup(rootNode, "f")
	fh, _, en := h.open(node, syscall.O_RDONLY)
	if en != 0 {
		t.Fatal(en)
	}
	gone := exec.Command("true")
	if err := gone.Run(); err != nil {
		t.Fatal(err)
	}
	hang.Store(true)
	dead := h
	dead.caller.Pid = uint32(gone.Process.Pid)
	start := time.Now()
	_, en = dead.read(node, fh, 0, 4096)
	if took := time.Since(start); en == 0 || took > 3*time.Second {
		t.Errorf("READ of a caller that is gone, from a server that does not answer: errno %v after %v; want an error within 3 s", en, took)
	}
}

// stalling makes the calls that stall says so wait until their caller
// gives up, as a server that never answers.
type stalling struct {
	sunrpc.Transport
	stall func(*sunrpc.Call) bool
}

var _ sunrpc.Transport = (*stalling)(nil)

func (s *stalling) RoundTrip(ctx context.Context, call *sunrpc.Call) error {
	if s.stall(call) {
		<-ctx.Done()
		return ctx.Err()
	}
	return s.Transport.RoundTrip(ctx, call)
}
