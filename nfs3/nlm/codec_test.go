package nlm

import (
	"bytes"
	"errors"
	"runtime"
	"strings"
	"testing"

	"github.com/rdmafs/rdmafs/sunrpc/xdr"
)

// messages makes a zero value of every type a procedure takes or returns,
// for the tests that go over all decoders.
var messages = []func() Message{
	func() Message { return new(TestArgs) },
	func() Message { return new(LockArgs) },
	func() Message { return new(CancelArgs) },
	func() Message { return new(UnlockArgs) },
	func() Message { return new(ShareArgs) },
	func() Message { return new(Notify) },
	func() Message { return new(TestRes) },
	func() Message { return new(Res) },
	func() Message { return new(ShareRes) },
	func() Message { return new(SMName) },
	func() Message { return new(SMMyID) },
	func() Message { return new(SMMonID) },
	func() Message { return new(SMMon) },
	func() Message { return new(SMStatRes) },
	func() Message { return new(SMStat) },
	func() Message { return new(SMStatChange) },
	func() Message { return new(SMStatus) },
}

// samples holds one message of every type in messages, in the same order,
// with every variable-length field filled.
func samples() []Message {
	lock := Lock{CallerName: []byte("client.example"), FH: bytes.Repeat([]byte{0xfe}, 36),
		Owner: []byte("4321@client.example"), Svid: 4321, Offset: 10, Length: 20}
	share := Share{CallerName: []byte("c"), FH: []byte{1, 2, 3}, Owner: []byte("o"), Mode: DenyWrite, Access: AccessRead}
	myID := SMMyID{MyName: []byte("me"), Prog: Program, Vers: 3, Proc: ProcSMNotify}
	cookie := []byte{1, 2, 3, 4, 5}
	return []Message{
		&TestArgs{Cookie: cookie, Exclusive: true, Lock: lock},
		&LockArgs{Cookie: cookie, Block: true, Lock: lock, Reclaim: true, State: 9},
		&CancelArgs{Cookie: cookie, Block: true, Exclusive: true, Lock: lock},
		&UnlockArgs{Cookie: cookie, Lock: lock},
		&ShareArgs{Cookie: cookie, Share: share, Reclaim: true},
		&Notify{Name: []byte("client.example"), State: 11},
		&TestRes{Cookie: cookie, Stat: StatDenied, Holder: Holder{Exclusive: true, Svid: 7, Owner: []byte("7@x"), Length: 1}},
		&Res{Cookie: cookie, Stat: StatFailed},
		&ShareRes{Cookie: cookie, Stat: StatROFS, Sequence: 1},
		&SMName{MonName: []byte("server")},
		&myID,
		&SMMonID{MonName: []byte("server"), MyID: myID},
		&SMMon{MonID: SMMonID{MonName: []byte("server"), MyID: myID}, Priv: [16]byte{1, 15: 2}},
		&SMStatRes{Result: SMFail, State: 1},
		&SMStat{State: 2},
		&SMStatChange{MonName: []byte("server"), State: 3},
		&SMStatus{MonName: []byte("server"), State: 3, Priv: [16]byte{3, 15: 4}},
	}
}

func encode(m Message) []byte {
	var e xdr.Encoder
	m.Encode(&e)
	return e.Buf
}

// TestDecodeDoesNotAlias decodes every message, overwrites the buffer it
// came from, as a transport does with its next receive, and checks the
// message still encodes to what it decoded from.
func TestDecodeDoesNotAlias(t *testing.T) {
	for i, m := range samples() {
		buf := encode(m)
		want := bytes.Clone(buf)
		got := messages[i]()
		if err := Unmarshal(buf, got); err != nil {
			t.Fatalf("%T: %v", m, err)
		}
		for j := range buf {
			buf[j] = 0xee
		}
		if enc := encode(got); !bytes.Equal(enc, want) {
			t.Errorf("%T changed with the receive buffer:\n%x\nwant\n%x", m, enc, want)
		}
	}
}

// TestDecodeAgainDoesNotAllocate: decoding into a value that already holds a
// decoded message allocates nothing, so a server can keep one per worker.
// (Each decoder is called on its concrete type, as a server's dispatch
// would: through the Message interface the xdr.Decoder escapes to the heap.)
func TestDecodeAgainDoesNotAllocate(t *testing.T) {
	var (
		v0  TestArgs
		v1  LockArgs
		v2  CancelArgs
		v3  UnlockArgs
		v4  ShareArgs
		v5  Notify
		v6  TestRes
		v7  Res
		v8  ShareRes
		v9  SMName
		v10 SMMyID
		v11 SMMonID
		v12 SMMon
		v13 SMStatRes
		v14 SMStat
		v15 SMStatChange
		v16 SMStatus
	)
	decoders := []func([]byte) error{
		func(b []byte) error { d := xdr.NewDecoder(b); v0.Decode(&d); return d.Err() },
		func(b []byte) error { d := xdr.NewDecoder(b); v1.Decode(&d); return d.Err() },
		func(b []byte) error { d := xdr.NewDecoder(b); v2.Decode(&d); return d.Err() },
		func(b []byte) error { d := xdr.NewDecoder(b); v3.Decode(&d); return d.Err() },
		func(b []byte) error { d := xdr.NewDecoder(b); v4.Decode(&d); return d.Err() },
		func(b []byte) error { d := xdr.NewDecoder(b); v5.Decode(&d); return d.Err() },
		func(b []byte) error { d := xdr.NewDecoder(b); v6.Decode(&d); return d.Err() },
		func(b []byte) error { d := xdr.NewDecoder(b); v7.Decode(&d); return d.Err() },
		func(b []byte) error { d := xdr.NewDecoder(b); v8.Decode(&d); return d.Err() },
		func(b []byte) error { d := xdr.NewDecoder(b); v9.Decode(&d); return d.Err() },
		func(b []byte) error { d := xdr.NewDecoder(b); v10.Decode(&d); return d.Err() },
		func(b []byte) error { d := xdr.NewDecoder(b); v11.Decode(&d); return d.Err() },
		func(b []byte) error { d := xdr.NewDecoder(b); v12.Decode(&d); return d.Err() },
		func(b []byte) error { d := xdr.NewDecoder(b); v13.Decode(&d); return d.Err() },
		func(b []byte) error { d := xdr.NewDecoder(b); v14.Decode(&d); return d.Err() },
		func(b []byte) error { d := xdr.NewDecoder(b); v15.Decode(&d); return d.Err() },
		func(b []byte) error { d := xdr.NewDecoder(b); v16.Decode(&d); return d.Err() },
	}
	for i, m := range samples() {
		buf := encode(m)
		if err := decoders[i](buf); err != nil {
			t.Fatalf("%T: %v", m, err)
		}
		var err error
		allocs := testing.AllocsPerRun(20, func() { err = decoders[i](buf) })
		if err != nil || allocs != 0 {
			t.Errorf("%T: %.0f allocations decoding again, error %v", m, allocs, err)
		}
	}
}

// TestLimits: each variable-length field is accepted at its limit and
// refused one byte past it, with an error that names the field.
func TestLimits(t *testing.T) {
	big := func(n int) []byte { return bytes.Repeat([]byte{'x'}, n) }
	for _, tc := range []struct {
		field string
		max   int
		set   func(n int) Message
		new   func() Message
	}{
		{"cookie", MaxNetobjLen, func(n int) Message { return &Res{Cookie: big(n)} }, func() Message { return new(Res) }},
		{"caller_name", MaxStrLen, func(n int) Message { return &LockArgs{Lock: Lock{CallerName: big(n)}} }, func() Message { return new(LockArgs) }},
		{"fh", MaxNetobjLen, func(n int) Message { return &TestArgs{Lock: Lock{FH: big(n)}} }, func() Message { return new(TestArgs) }},
		{"oh", MaxNetobjLen, func(n int) Message { return &UnlockArgs{Lock: Lock{Owner: big(n)}} }, func() Message { return new(UnlockArgs) }},
		{"oh", MaxNetobjLen, func(n int) Message { return &TestRes{Stat: StatDenied, Holder: Holder{Owner: big(n)}} }, func() Message { return new(TestRes) }},
		{"caller_name", MaxStrLen, func(n int) Message { return &ShareArgs{Share: Share{CallerName: big(n)}} }, func() Message { return new(ShareArgs) }},
		{"name", MaxStrLen, func(n int) Message { return &Notify{Name: big(n)} }, func() Message { return new(Notify) }},
		{"mon_name", SMMaxStrLen, func(n int) Message { return &SMMon{MonID: SMMonID{MonName: big(n)}} }, func() Message { return new(SMMon) }},
		{"my_name", SMMaxStrLen, func(n int) Message { return &SMMonID{MyID: SMMyID{MyName: big(n)}} }, func() Message { return new(SMMonID) }},
		{"mon_name", SMMaxStrLen, func(n int) Message { return &SMStatus{MonName: big(n)} }, func() Message { return new(SMStatus) }},
		{"mon_name", SMMaxStrLen, func(n int) Message { return &SMStatChange{MonName: big(n)} }, func() Message { return new(SMStatChange) }},
		{"mon_name", SMMaxStrLen, func(n int) Message { return &SMName{MonName: big(n)} }, func() Message { return new(SMName) }},
	} {
		if err := Unmarshal(encode(tc.set(tc.max)), tc.new()); err != nil {
			t.Errorf("%s of %d bytes refused: %v", tc.field, tc.max, err)
		}
		err := Unmarshal(encode(tc.set(tc.max+1)), tc.new())
		if !errors.Is(err, ErrTooLong) || !errors.Is(err, ErrMalformed) || !strings.Contains(err.Error(), tc.field+" of ") {
			t.Errorf("%s of %d bytes: error %v", tc.field, tc.max+1, err)
		}
	}
}

// TestHostileLengths: a length near 4 GiB is refused without allocating
// what it asks for, and a length within the limit that the message does
// not hold is refused without allocating at all.
func TestHostileLengths(t *testing.T) {
	huge := []byte{0xff, 0xff, 0xff, 0xff, 0, 0, 0, 0} // a cookie of 4 GiB
	var a LockArgs
	if err := Unmarshal(huge, &a); !errors.Is(err, ErrTooLong) {
		t.Errorf("cookie of 4 GiB: error %v", err)
	}
	// What remains is the error's text (more under the race detector).
	if n := allocBytes(func() { _ = Unmarshal(huge, &a) }); n > 4096 {
		t.Errorf("%d bytes allocated to refuse a cookie of 4 GiB", n)
	}

	short := []byte{0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 1, 0, 0, 4, 0, 'a', 'b'} // caller_name of 1024 bytes, 2 present
	if err := Unmarshal(short, &a); !errors.Is(err, xdr.ErrShort) {
		t.Errorf("truncated caller_name: error %v", err)
	}
	allocs := testing.AllocsPerRun(20, func() {
		d := xdr.NewDecoder(short)
		a.Decode(&d)
	})
	if allocs != 0 {
		t.Errorf("%.0f allocations to refuse a truncated caller_name", allocs)
	}
}

// allocBytes returns the bytes f allocates, averaged over 100 runs.
func allocBytes(f func()) uint64 {
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	for range 100 {
		f()
	}
	runtime.ReadMemStats(&after)
	return (after.TotalAlloc - before.TotalAlloc) / 100
}

func TestEnumsChecked(t *testing.T) {
	for _, tc := range []struct {
		body []byte
		m    Message
		want string
	}{
		{[]byte{0, 0, 0, 0, 0, 0, 0, 10}, new(Res), "nlm4_stats 10"},
		{[]byte{0, 0, 0, 0, 0, 0, 0, 10}, new(TestRes), "nlm4_stats 10"},
		{[]byte{0, 0, 0, 0, 0, 0, 0, 10, 0, 0, 0, 0}, new(ShareRes), "nlm4_stats 10"},
		{[]byte{0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 4, 0, 0, 0, 0}, new(ShareArgs), "fsh4_mode 4"},
		{[]byte{0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 4}, new(ShareArgs), "fsh4_access 4"},
		{[]byte{0, 0, 0, 2, 0, 0, 0, 1}, new(SMStatRes), "res 2"},
	} {
		if err := Unmarshal(tc.body, tc.m); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%T %x: error %v, want %q", tc.m, tc.body, err, tc.want)
		}
	}
}

// TestBoolsAsLinux: lockd takes any non-zero bool for true.
func TestBoolsAsLinux(t *testing.T) {
	body := encode(&LockArgs{Block: true, Exclusive: true, Reclaim: true})
	body[7] = 2     // block
	body[11] = 0x80 // exclusive
	var a LockArgs
	if err := Unmarshal(body, &a); err != nil || !a.Block || !a.Exclusive || !a.Reclaim {
		t.Fatalf("%+v, %v", a, err)
	}
}
