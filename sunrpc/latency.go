package sunrpc

import (
	"fmt"
	"io"
	"sync/atomic"
	"time"
)

// LatencyBounds are the upper bounds of the buckets of a Latency
// histogram, from the microseconds of a call over RDMA on one switch to
// the seconds of a server that stalls; a last bucket above them counts
// the rest. Fixed, so that histograms of every mount and every run add
// up.
var LatencyBounds = [...]time.Duration{
	5 * time.Microsecond, 10 * time.Microsecond, 25 * time.Microsecond, 50 * time.Microsecond,
	100 * time.Microsecond, 250 * time.Microsecond, 500 * time.Microsecond,
	time.Millisecond, 2500 * time.Microsecond, 5 * time.Millisecond, 10 * time.Millisecond,
	25 * time.Millisecond, 50 * time.Millisecond, 100 * time.Millisecond, 250 * time.Millisecond,
	500 * time.Millisecond, time.Second, 2500 * time.Millisecond, 5 * time.Second, 10 * time.Second,
}

// Latency is a histogram of durations over LatencyBounds. Every field is
// an atomic counter: calls observe without a lock, and a reader may see
// one observation's bucket before its sum.
type Latency struct {
	buckets [len(LatencyBounds) + 1]atomic.Uint64 // not cumulative; the last: above every bound
	sum     atomic.Int64                          // nanoseconds
}

// Observe counts one duration.
func (h *Latency) Observe(d time.Duration) {
	i := 0
	for i < len(LatencyBounds) && d > LatencyBounds[i] {
		i++
	}
	h.buckets[i].Add(1)
	h.sum.Add(int64(d))
}

// Count returns the durations observed.
func (h *Latency) Count() uint64 {
	var n uint64
	for i := range h.buckets {
		n += h.buckets[i].Load()
	}
	return n
}

// write writes the counts of the buckets, not cumulative, then the sum in
// nanoseconds.
func (h *Latency) write(w io.Writer) error {
	for i := range h.buckets {
		if _, err := fmt.Fprintf(w, " %d", h.buckets[i].Load()); err != nil {
			return err
		}
	}
	_, err := fmt.Fprintf(w, " %d", h.sum.Load())
	return err
}

// WriteLatency writes the latency histograms of every procedure, the
// format of fs.LatencyXattr that rdmafs stats reads:
//
//	bounds_ns: B1 B2 ... B20
//	rtt NAME: C1 ... C21 SUM_NS
//	execute NAME: C1 ... C21 SUM_NS
//
// one rtt and one execute line per procedure. Ci counts the durations in
// bucket i alone (not those below it): up to Bi and above the bound before,
// C21 above B20. rtt observes the round trip of every call that got a
// reply (mountstats' rtt), execute every call from Do to its end
// (mountstats' execute), so that its counts add up to the procedure's ops.
func (c *Client) WriteLatency(w io.Writer) error {
	if _, err := io.WriteString(w, "bounds_ns:"); err != nil {
		return err
	}
	for _, b := range LatencyBounds {
		if _, err := fmt.Fprintf(w, " %d", b.Nanoseconds()); err != nil {
			return err
		}
	}
	if _, err := io.WriteString(w, "\n"); err != nil {
		return err
	}
	for i, name := range c.cfg.ProcNames {
		s := &c.stats[i]
		for _, h := range []struct {
			kind string
			h    *Latency
		}{{"rtt", &s.RTTHist}, {"execute", &s.ExecuteHist}} {
			if _, err := fmt.Fprintf(w, "%s %s:", h.kind, name); err != nil {
				return err
			}
			if err := h.h.write(w); err != nil {
				return err
			}
			if _, err := io.WriteString(w, "\n"); err != nil {
				return err
			}
		}
	}
	return nil
}
