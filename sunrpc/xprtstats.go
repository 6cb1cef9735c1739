package sunrpc

import (
	"fmt"
	"sync/atomic"
	"time"
)

// XprtCounters are the counters every transport keeps for its "xprt:"
// line of /proc/self/mountstats, the fields the Linux client counts for
// each transport (struct rpc_xprt's stat). A transport adds its own
// fields around Common's.
type XprtCounters struct {
	BindCount    atomic.Uint64 // address resolutions or bound sockets
	ConnectCount atomic.Uint64 // connections made
	ConnectTime  atomic.Int64  // nanoseconds spent connecting
	Sends        atomic.Uint64 // calls put on the wire
	Recvs        atomic.Uint64 // replies matched to a call
	BadXids      atomic.Uint64 // replies to no call in flight
	ReqU         atomic.Uint64 // calls in flight, summed at each send
	BklogU       atomic.Uint64 // calls waiting for a slot or credit, summed at each send
	Inflight     atomic.Int64  // calls in flight now
	Backlog      atomic.Int64  // calls waiting for a slot or credit now

	lastUse atomic.Int64 // unix nanoseconds of the last call
}

// Used notes that a call came to the transport at now; idle_time counts
// from the last.
func (s *XprtCounters) Used(now time.Time) { s.lastUse.Store(now.UnixNano()) }

// Sent counts a call put on the wire, with the calls in flight and
// waiting at that moment.
func (s *XprtCounters) Sent() {
	s.Sends.Add(1)
	s.ReqU.Add(uint64(s.Inflight.Load()))
	s.BklogU.Add(uint64(s.Backlog.Load()))
}

// Common renders the fields every transport's line has after its source
// port: bind_count connect_count connect_time idle_time sends recvs
// bad_xids req_u bklog_u, times in whole seconds as the kernel prints
// them.
func (s *XprtCounters) Common() string {
	var idle time.Duration
	if last := s.lastUse.Load(); last != 0 {
		idle = time.Since(time.Unix(0, last))
	}
	return fmt.Sprintf("%d %d %d %d %d %d %d %d %d",
		s.BindCount.Load(), s.ConnectCount.Load(), s.ConnectTime.Load()/1e9, int64(idle.Seconds()),
		s.Sends.Load(), s.Recvs.Load(), s.BadXids.Load(), s.ReqU.Load(), s.BklogU.Load())
}
