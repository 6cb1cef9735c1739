package sunrpc

import (
	"bytes"
	"context"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestLatencyBuckets: a duration lands in the first bucket whose bound is
// at least it, one above every bound in the last, and the sum is exact.
func TestLatencyBuckets(t *testing.T) {
	var h Latency
	for _, d := range []time.Duration{0, 5 * time.Microsecond, 5*time.Microsecond + 1, 3 * time.Millisecond, time.Minute} {
		h.Observe(d)
	}
	want := map[int]uint64{0: 2, 1: 1, 9: 1, len(LatencyBounds): 1}
	for i := range h.buckets {
		if got := h.buckets[i].Load(); got != want[i] {
			t.Errorf("bucket %d (bound %v) = %d, want %d", i, bound(i), got, want[i])
		}
	}
	if s := time.Duration(h.sum.Load()); s != 10*time.Microsecond+1+3*time.Millisecond+time.Minute {
		t.Errorf("sum %v", s)
	}
	for i := 1; i < len(LatencyBounds); i++ {
		if LatencyBounds[i] <= LatencyBounds[i-1] {
			t.Errorf("bounds not increasing at %d", i)
		}
	}
}

func bound(i int) string {
	if i < len(LatencyBounds) {
		return LatencyBounds[i].String()
	}
	return "+Inf"
}

// TestLatencyCountsAddUpToOps makes calls that succeed and calls that
// time out, and reads WriteLatency as rdmafs stats does: each procedure's
// execute histogram counts its ops, its rtt histogram the calls that got a
// reply (ops less errors), and the sums agree with the mountstats totals.
func TestLatencyCountsAddUpToOps(t *testing.T) {
	s := newTestServer(t, func(c *serverCall) []byte {
		if c.proc == 2 {
			return nil // no reply: the call times out
		}
		time.Sleep(time.Duration(c.args[4]) * time.Millisecond)
		return acceptedReply(c.xid, nil)
	})
	c := newTestClient(t, s.addr(), Config{Timeout: 30 * time.Millisecond, Retrans: 1, Soft: true,
		ProcNames: []string{"NULL", "FAST", "LOST"}})
	for i := range 20 {
		if _, err := echo(context.Background(), c, 1, []byte{byte(i % 4)}, nil); err != nil {
			t.Fatal(err)
		}
	}
	for range 2 {
		if _, err := echo(context.Background(), c, 2, []byte{0}, nil); err == nil {
			t.Fatal("LOST got a reply")
		}
	}
	var b bytes.Buffer
	if err := c.WriteLatency(&b); err != nil {
		t.Fatal(err)
	}
	t.Logf("%s", b.String())
	var op bytes.Buffer
	c.WriteOpStats(&op)
	lines := strings.Split(strings.TrimSpace(b.String()), "\n")
	if len(lines) != 1+2*3 || !strings.HasPrefix(lines[0], "bounds_ns: 5000 10000 ") {
		t.Fatalf("lines:\n%s", b.String())
	}
	for proc, name := range []string{"NULL", "FAST", "LOST"} {
		st := &c.stats[proc]
		ops, errs := st.Ops.Load(), st.Errors.Load()
		for _, h := range []struct {
			kind       string
			count, sum uint64
			totalMs    int64
		}{{"execute", ops, 0, st.Execute.Load() / 1e6}, {"rtt", ops - errs, 0, st.RTT.Load() / 1e6}} {
			f := fieldsOf(t, lines, fmt.Sprintf("%s %s:", h.kind, name))
			if len(f) != len(LatencyBounds)+2 {
				t.Fatalf("%s %s: %d fields", h.kind, name, len(f))
			}
			var n uint64
			for _, v := range f[:len(f)-1] {
				n += v
			}
			if n != h.count {
				t.Errorf("%s %s: histogram counts %d, want %d (ops %d, errors %d)\n%s", h.kind, name, n, h.count, ops, errs, op.String())
			}
			if ms := int64(f[len(f)-1]) / 1e6; ms != h.totalMs {
				t.Errorf("%s %s: sum %d ms, mountstats %d ms", h.kind, name, ms, h.totalMs)
			}
		}
	}
	if c.stats[1].Ops.Load() != 20 || c.stats[2].Errors.Load() != 2 {
		t.Errorf("ops:\n%s", op.String())
	}
}

func fieldsOf(t *testing.T, lines []string, prefix string) []uint64 {
	t.Helper()
	for _, l := range lines {
		if rest, ok := strings.CutPrefix(l, prefix); ok {
			var out []uint64
			for _, w := range strings.Fields(rest) {
				v, err := strconv.ParseUint(w, 10, 64)
				if err != nil {
					t.Fatalf("%q: %v", l, err)
				}
				out = append(out, v)
			}
			return out
		}
	}
	t.Fatalf("no line %q", prefix)
	return nil
}
