package main

import (
	"fmt"
	"strconv"
	"strings"
)

// latencyHist is one histogram of fs.LatencyXattr: the count of each
// bucket alone (the last above every bound) and the sum in nanoseconds.
type latencyHist struct {
	Counts []uint64
	SumNs  uint64
}

// count is the durations the histogram observed.
func (h *latencyHist) count() uint64 {
	var n uint64
	for _, c := range h.Counts {
		n += c
	}
	return n
}

// add adds o's counts to h's (the same bounds).
func (h *latencyHist) add(o *latencyHist) {
	if h.Counts == nil {
		h.Counts = make([]uint64, len(o.Counts))
	}
	for i := range min(len(h.Counts), len(o.Counts)) {
		h.Counts[i] += o.Counts[i]
	}
	h.SumNs += o.SumNs
}

// opLatency is the two histograms of one procedure.
type opLatency struct {
	Name         string
	RTT, Execute latencyHist
}

// latencyStats is a mount's fs.LatencyXattr: the buckets' upper bounds in
// nanoseconds and the histograms of each procedure, in its order.
type latencyStats struct {
	BoundsNs []uint64
	Ops      []opLatency
}

// clone returns a copy of l that shares no memory with it.
func (l *latencyStats) clone() *latencyStats {
	if l == nil {
		return nil
	}
	c := &latencyStats{BoundsNs: append([]uint64(nil), l.BoundsNs...), Ops: make([]opLatency, len(l.Ops))}
	for i, o := range l.Ops {
		c.Ops[i] = opLatency{Name: o.Name,
			RTT:     latencyHist{append([]uint64(nil), o.RTT.Counts...), o.RTT.SumNs},
			Execute: latencyHist{append([]uint64(nil), o.Execute.Counts...), o.Execute.SumNs}}
	}
	return c
}

// op returns the histograms of the named procedure, or nil.
func (l *latencyStats) op(name string) *opLatency {
	if l == nil {
		return nil
	}
	for i := range l.Ops {
		if l.Ops[i].Name == name {
			return &l.Ops[i]
		}
	}
	return nil
}

// parseLatencyStats parses the text of sunrpc.Client.WriteLatency: a
// bounds_ns line, then "rtt NAME:" and "execute NAME:" lines with one
// count more than there are bounds and the sum.
func parseLatencyStats(text string) (*latencyStats, error) {
	l := &latencyStats{}
	for n, line := range strings.Split(text, "\n") {
		if n > 2*maxStatsLines {
			return nil, fmt.Errorf("latency: more than %d lines", 2*maxStatsLines)
		}
		if strings.TrimSpace(line) == "" {
			continue
		}
		bad := func(format string, args ...any) error {
			return fmt.Errorf("latency line %d: %s: %q", n+1, fmt.Sprintf(format, args...), truncate(line, 80))
		}
		key, rest, ok := strings.Cut(line, ":")
		if !ok {
			return nil, bad("no colon")
		}
		nums, err := parseUints(rest)
		if err != nil {
			return nil, bad("%v", err)
		}
		if key == "bounds_ns" {
			if l.BoundsNs != nil || len(nums) == 0 || len(nums) > maxStatsLines {
				return nil, bad("bounds")
			}
			l.BoundsNs = nums
			continue
		}
		kind, name, _ := strings.Cut(key, " ")
		if l.BoundsNs == nil {
			return nil, bad("before the bounds")
		}
		if name == "" || strings.ContainsAny(name, " \t") {
			return nil, bad("no procedure")
		}
		if len(nums) != len(l.BoundsNs)+2 {
			return nil, bad("%d numbers, want %d", len(nums), len(l.BoundsNs)+2)
		}
		h := latencyHist{Counts: nums[:len(nums)-1], SumNs: nums[len(nums)-1]}
		op := l.op(name)
		if op == nil {
			if len(l.Ops) >= maxStatsLines {
				return nil, bad("more than %d procedures", maxStatsLines)
			}
			l.Ops = append(l.Ops, opLatency{Name: name})
			op = &l.Ops[len(l.Ops)-1]
		}
		switch kind {
		case "rtt":
			op.RTT = h
		case "execute":
			op.Execute = h
		default:
			return nil, bad("unknown histogram %q", kind)
		}
	}
	if l.BoundsNs == nil {
		return nil, fmt.Errorf("latency: no bounds_ns line")
	}
	return l, nil
}

// parseUints parses decimal numbers separated by spaces.
func parseUints(s string) ([]uint64, error) {
	f := strings.Fields(s)
	out := make([]uint64, len(f))
	for i, w := range f {
		v, err := strconv.ParseUint(w, 10, 64)
		if err != nil {
			return nil, fmt.Errorf("field %d: not a number", i+1)
		}
		out[i] = v
	}
	return out, nil
}
