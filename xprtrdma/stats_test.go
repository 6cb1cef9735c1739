package xprtrdma

import (
	"strings"
	"testing"
)

// setDistinct gives every counter of s its own value, so that a field
// printed in the wrong place shows.
func setDistinct(s *stats) {
	s.BindCount.Store(1)
	s.ConnectCount.Store(2)
	s.ConnectTime.Store(3e9) // printed in whole seconds
	// idle_time stays 0: no call was made.
	s.Sends.Store(5)
	s.Recvs.Store(6)
	s.BadXids.Store(7)
	s.ReqU.Store(8)
	s.BklogU.Store(9)
	s.readChunks.Store(10)
	s.writeChunks.Store(11)
	s.replyChunks.Store(12)
	s.rdmaRequestBytes.Store(13)
	s.rdmaReplyBytes.Store(14)
	s.pullupBytes.Store(15)
	s.fixupBytes.Store(16)
	s.hardwayRegister.Store(17)
	s.failedMarshal.Store(18)
	s.badReplies.Store(19)
	s.nomsgCalls.Store(20)
	s.mwReused.Store(21)
	s.mwAllocated.Store(23)
	s.localInv.Store(24)
	s.creditWaits.Store(25)
	s.payloadCopies.Store(27)
	s.registered.Store(28)
	s.registeredPeak.Store(29)
	s.creditsGranted.Store(30)
	s.writeChunksPlaced.Store(31)
}

// TestStatsLine pins the "xprt: rdma" line byte for byte: the kernel's
// field order, which mountstats(8) and rdmafs stats read by position.
func TestStatsLine(t *testing.T) {
	var s stats
	setDistinct(&s)
	const want = "rdma 0 1 2 3 0 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19 20 21 0 23 24 25 0 27 28 29 30 31"
	if got := s.line(); got != want {
		t.Errorf("line\n%q\nwant\n%q", got, want)
	}
	// rdmafs stats names the fields by StatNames: one name a field.
	if got, names := strings.Fields(s.line())[1:], StatNames(); len(got) != len(names) {
		t.Errorf("%d fields after rdma, %d names: %q", len(got), len(names), names)
	}
}
