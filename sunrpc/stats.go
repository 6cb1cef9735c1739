package sunrpc

import (
	"fmt"
	"io"
	"sync/atomic"
	"time"
)

// OpStats counts the calls of one procedure, as the "per-op statistics" of
// /proc/self/mountstats do. Times are totals in nanoseconds.
type OpStats struct {
	Ops       atomic.Uint64 // calls made
	Trans     atomic.Uint64 // times sent, retransmissions included
	Timeouts  atomic.Uint64 // tries that got no reply in time
	BytesSent atomic.Uint64 // call bytes, headers included
	BytesRecv atomic.Uint64 // reply bytes, headers included
	Queue     atomic.Int64  // from Do until the last send
	RTT       atomic.Int64  // from the last send until the reply
	Execute   atomic.Int64  // from Do until the reply
	Errors    atomic.Uint64 // calls that ended in an error
	// Payload counts the bytes of Call.Payload (WRITE data, SYMLINK
	// paths) of calls that got a reply, each call once however often it
	// was sent: the kernel's serverwritebytes for WRITE.
	Payload atomic.Uint64
	// RTTHist and ExecuteHist are the distributions whose totals RTT and
	// Execute are: RTTHist counts the calls RTT adds up, ExecuteHist
	// every call.
	RTTHist, ExecuteHist Latency
}

func (c *Client) opStats(proc uint32) *OpStats {
	if int(proc) < len(c.stats) {
		return &c.stats[proc]
	}
	return &c.stats[0]
}

func (s *OpStats) record(call *Call, start time.Time, err error) {
	now := time.Now()
	s.Ops.Add(1)
	s.Trans.Add(uint64(call.Retransmits) + 1)
	s.BytesSent.Add(uint64((len(call.Head) + len(call.Payload) + len(call.Tail)) * (call.Retransmits + 1)))
	s.BytesRecv.Add(uint64(len(call.Reply.Msg) + len(call.Reply.Payload)))
	s.Execute.Add(int64(now.Sub(start)))
	s.ExecuteHist.Observe(now.Sub(start))
	if !call.SentAt.IsZero() {
		s.Queue.Add(int64(call.SentAt.Sub(start)))
		if err == nil {
			s.RTT.Add(int64(now.Sub(call.SentAt)))
			s.RTTHist.Observe(now.Sub(call.SentAt))
		}
	}
	if err != nil {
		s.Errors.Add(1)
	} else {
		s.Payload.Add(uint64(len(call.Payload)))
	}
}

// WriteOpStats writes the per-procedure block of mountstats: one line per
// procedure, "NAME: ops trans timeouts bytes_sent bytes_recv queue rtt
// execute errors" after a tab, the name right-aligned in 12 columns, times in
// milliseconds, as the kernel's rpc_clnt_show_stats writes them.
func (c *Client) WriteOpStats(w io.Writer) error {
	for i, name := range c.cfg.ProcNames {
		s := &c.stats[i]
		_, err := fmt.Fprintf(w, "\t%12s: %d %d %d %d %d %d %d %d %d\n", name,
			s.Ops.Load(), s.Trans.Load(), s.Timeouts.Load(), s.BytesSent.Load(), s.BytesRecv.Load(),
			s.Queue.Load()/1e6, s.RTT.Load()/1e6, s.Execute.Load()/1e6, s.Errors.Load())
		if err != nil {
			return err
		}
	}
	return nil
}

// PayloadBytes returns the payload bytes of the calls of procedure proc
// that got a reply (OpStats.Payload).
func (c *Client) PayloadBytes(proc uint32) uint64 { return c.opStats(proc).Payload.Load() }

// Ops returns the number of calls made of procedure proc.
func (c *Client) Ops(proc uint32) uint64 { return c.opStats(proc).Ops.Load() }
