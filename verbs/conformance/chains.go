package conformance

import (
	"encoding/binary"
	"errors"
	"syscall"
	"testing"

	"github.com/rdmafs/rdmafs/verbs"
)

// --- chains of work requests (SendWR.Next)

// allocMW allocates a memory window in pd, closed at the end of the test.
func (f *fixture) allocMW(pd verbs.PD) verbs.MW {
	f.t.Helper()
	mw, err := pd.AllocMW()
	if err != nil {
		f.t.Fatalf("alloc MW: %v", err)
	}
	f.t.Cleanup(func() {
		if err := mw.Close(); err != nil {
			f.t.Errorf("close MW: %v", err)
		}
	})
	return mw
}

// nextKey is a window's next rkey: the low byte, the consumer's, moved on.
func nextKey(rkey uint32) uint32 { return rkey&^0xff | (rkey+1)&0xff }

// chain links wrs by Next, the last to nothing, and returns the first.
func chain(wrs ...*verbs.SendWR) *verbs.SendWR {
	for i, wr := range wrs {
		wr.Next = nil
		if i+1 < len(wrs) {
			wr.Next = wrs[i+1]
		}
	}
	return wrs[0]
}

// sendWR is a signaled SEND of n bytes of r from off.
func sendWR(id uint64, r *region, off, n int) *verbs.SendWR {
	return &verbs.SendWR{ID: id, Opcode: verbs.OpSend, Signaled: true, SGL: []verbs.SGE{{MR: r.mr, Offset: off, Length: n}}}
}

// received waits for the receive id of c and checks that it holds want
// (at rb's offset off).
func received(t *testing.T, c verbs.Conn, id uint64, rb *region, off int, want string) {
	t.Helper()
	wc := completion(t, c, id, verbs.StatusSuccess, verbs.CompRecv)
	if got := string(rb.b[off : off+int(wc.ByteLen)]); got != want {
		t.Fatalf("receive %d holds %q, want %q", id, got, want)
	}
}

// testChainBindSend posts what an RPC-over-RDMA client posts for a call
// with two chunks, in one PostSend: the binds of two memory windows and
// the SEND that advertises their rkeys. The peer writes through both
// once the SEND has come. Then a chain whose second bind is refused:
// the first bind is posted, the SEND after the refused one is not.
func (s *suite) testChainBindSend(t *testing.T) {
	m := s.mwSetup(t)
	mw2 := m.allocMW(m.spd)
	msg := m.region(m.spd, 4096, recvAcces) // the SENDs' payloads
	rb := m.region(m.cpd, 8192, recvAcces)
	postRecv(t, m.c, 10, verbs.SGE{MR: rb.mr, Length: 4096})
	postRecv(t, m.c, 11, verbs.SGE{MR: rb.mr, Offset: 4096, Length: 4096})

	key1, key2 := nextKey(m.mw.RKey()), nextKey(mw2.RKey())
	binary.BigEndian.PutUint32(msg.b[0:], key1)
	binary.BigEndian.PutUint32(msg.b[4:], key2)
	post(t, m.sc, chain(
		&verbs.SendWR{ID: 1, Opcode: verbs.OpBindMW, Signaled: true, MW: m.mw, BindMR: m.exposed.mr,
			Offset: 4096, Length: 8192, BindAccess: verbs.AccessRemoteWrite | verbs.AccessRemoteRead, NewRKey: key1},
		&verbs.SendWR{ID: 2, Opcode: verbs.OpBindMW, MW: mw2, BindMR: m.exposed.mr,
			Offset: 16384, Length: 4096, BindAccess: verbs.AccessRemoteWrite, NewRKey: key2},
		sendWR(3, msg, 0, 8)))
	if got1, got2 := m.mw.RKey(), mw2.RKey(); got1 != key1 || got2 != key2 {
		t.Fatalf("after the chained binds the windows' rkeys are %#x and %#x, want %#x and %#x", got1, got2, key1, key2)
	}
	completion(t, m.sc, 1, verbs.StatusSuccess, verbs.CompBindMW) // the second bind is unsignaled
	completion(t, m.sc, 3, verbs.StatusSuccess, verbs.CompSend)
	wc := completion(t, m.c, 10, verbs.StatusSuccess, verbs.CompRecv)
	if wc.ByteLen != 8 {
		t.Fatalf("the SEND advertising the windows: %d bytes, want 8", wc.ByteLen)
	}
	adv1, adv2 := binary.BigEndian.Uint32(rb.b[0:]), binary.BigEndian.Uint32(rb.b[4:])
	m.write(t, 4, adv1, 5000, 100)
	m.read(t, 5, adv1, 4096, 8192)
	m.write(t, 6, adv2, 16384, 4096)
	noCompletion(t, m.sc)

	// [bind, bind of a window of another PD, SEND]: the first is
	// posted, the rest are not.
	post(t, m.sc, &verbs.SendWR{ID: 7, Opcode: verbs.OpLocalInv, InvalidateRKey: key1, Signaled: true})
	completion(t, m.sc, 7, verbs.StatusSuccess, verbs.CompLocalInv)
	foreign := m.allocMW(m.cpd)
	foreignKey := foreign.RKey()
	key3 := nextKey(key1)
	copy(msg.b[100:], "not sent")
	copy(msg.b[200:], "sent after")
	err := m.sc.PostSend(chain(
		&verbs.SendWR{ID: 8, Opcode: verbs.OpBindMW, Signaled: true, MW: m.mw, BindMR: m.exposed.mr,
			Offset: 0, Length: 4096, BindAccess: verbs.AccessRemoteWrite, NewRKey: key3},
		&verbs.SendWR{ID: 9, Opcode: verbs.OpBindMW, Signaled: true, MW: foreign, BindMR: m.exposed.mr,
			Offset: 0, Length: 4096, BindAccess: verbs.AccessRemoteWrite},
		sendWR(10, msg, 100, 8)))
	var pe *verbs.PostError
	if !errors.As(err, &pe) || pe.Posted != 1 {
		t.Fatalf("chain [bind, bind of another PD's window, SEND]: error %v, want a *verbs.PostError with Posted 1", err)
	}
	t.Logf("chain [bind, bind of another PD's window, SEND]: %v", err)
	if got := m.mw.RKey(); got != key3 {
		t.Errorf("the posted bind's window has rkey %#x, want %#x", got, key3)
	}
	if got := foreign.RKey(); got != foreignKey {
		t.Errorf("the refused bind changed its window's rkey from %#x to %#x", foreignKey, got)
	}
	completion(t, m.sc, 8, verbs.StatusSuccess, verbs.CompBindMW)
	post(t, m.sc, sendWR(11, msg, 200, 10))
	completion(t, m.sc, 11, verbs.StatusSuccess, verbs.CompSend)
	received(t, m.c, 11, rb, 4096, "sent after")
	m.write(t, 12, key3, 0, 4096)
	noCompletion(t, m.sc)
	noCompletion(t, m.c)
}

// testChainPostError posts [SEND, SEND with an SGE past its region,
// SEND]: PostSend says the first was posted; it arrives, the third does
// not.
func (s *suite) testChainPostError(t *testing.T) {
	f := s.setup(t)
	c, sc := f.pair()
	local := f.region(f.cpd, 8192, rwAccess)
	rb := f.region(f.spd, 8192, recvAcces)
	postRecv(t, sc, 20, verbs.SGE{MR: rb.mr, Length: 4096})
	postRecv(t, sc, 21, verbs.SGE{MR: rb.mr, Offset: 4096, Length: 4096})
	copy(local.b[0:], "first")
	copy(local.b[100:], "third")
	copy(local.b[200:], "after")
	bad := sendWR(2, local, 8190, 10)
	err := c.PostSend(chain(sendWR(1, local, 0, 5), bad, sendWR(3, local, 100, 5)))
	var pe *verbs.PostError
	if !errors.As(err, &pe) || pe.Posted != 1 {
		t.Fatalf("chain [SEND, bad SEND, SEND]: error %v, want a *verbs.PostError with Posted 1", err)
	}
	if !errors.Is(err, syscall.EINVAL) {
		t.Errorf("chain [SEND, bad SEND, SEND]: error %v does not wrap EINVAL", err)
	}
	t.Logf("chain [SEND, bad SEND, SEND]: %v", err)
	completion(t, c, 1, verbs.StatusSuccess, verbs.CompSend)
	received(t, sc, 20, rb, 0, "first")
	post(t, c, sendWR(4, local, 200, 5))
	completion(t, c, 4, verbs.StatusSuccess, verbs.CompSend)
	received(t, sc, 21, rb, 4096, "after")
	noCompletion(t, c)

	// A chain whose first work request is refused posts nothing.
	err = c.PostSend(chain(sendWR(5, local, 8190, 10), sendWR(6, local, 0, 5)))
	if !errors.As(err, &pe) || pe.Posted != 0 {
		t.Fatalf("chain [bad SEND, SEND]: error %v, want a *verbs.PostError with Posted 0", err)
	}
	noCompletion(t, c)
}

// testChainLimits: a chain longer than verbs.MaxChain, or longer than the
// send queue has room for, is refused whole; one of MaxChain work
// requests goes, in order.
func (s *suite) testChainLimits(t *testing.T) {
	f := s.setup(t)
	c, sc := f.pair()
	local := f.region(f.cpd, 8192, rwAccess)
	rb := f.region(f.spd, 65536, recvAcces)
	for i := range verbs.MaxChain + 1 {
		copy(local.b[i*16:], []byte{'m', byte('0' + i)})
		postRecv(t, sc, uint64(100+i), verbs.SGE{MR: rb.mr, Offset: i * 1024, Length: 1024})
	}
	wrs := make([]*verbs.SendWR, verbs.MaxChain+1)
	for i := range wrs {
		wrs[i] = sendWR(uint64(i), local, i*16, 2)
	}
	refusedWhole := func(what string, err, errno error) {
		t.Helper()
		var pe *verbs.PostError
		switch {
		case err == nil:
			t.Fatalf("%s: posted", what)
		case errors.As(err, &pe):
			t.Fatalf("%s: %v, a *verbs.PostError (posted in part), want the chain refused whole", what, err)
		case !errors.Is(err, errno):
			t.Errorf("%s: %v does not wrap %v", what, err, errno)
		}
		t.Logf("%s: %v", what, err)
	}
	refusedWhole("a chain of MaxChain+1", c.PostSend(chain(wrs...)), syscall.EINVAL)
	noCompletion(t, c)

	cfg := defaultConfig()
	cfg.SendDepth = 4
	small, _, _ := f.connect(cfg, defaultConfig())
	refusedWhole("a chain of 5 on a send queue of 4", small.PostSend(chain(wrs[:5]...)), syscall.ENOMEM)
	noCompletion(t, small)

	// Nothing went: the first receive takes the chain's first SEND.
	post(t, c, chain(wrs[:verbs.MaxChain]...))
	for i := range verbs.MaxChain {
		completion(t, c, uint64(i), verbs.StatusSuccess, verbs.CompSend)
	}
	for i := range verbs.MaxChain {
		received(t, sc, uint64(100+i), rb, i*1024, string([]byte{'m', byte('0' + i)}))
	}
	noCompletion(t, c)
}
