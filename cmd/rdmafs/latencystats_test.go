package main

import (
	"strings"
	"testing"
)

func TestParseLatencyStats(t *testing.T) {
	l, err := parseLatencyStats(sampleLatency)
	if err != nil {
		t.Fatal(err)
	}
	if len(l.BoundsNs) != 20 || l.BoundsNs[0] != 5000 || len(l.Ops) != 3 {
		t.Fatalf("%+v", l)
	}
	r := l.op("READ")
	if r == nil || r.RTT.count() != 9 || r.Execute.count() != 10 || r.Execute.SumNs != 50987654 {
		t.Errorf("READ %+v", r)
	}
	for name, text := range map[string]string{
		"empty":          "",
		"no bounds":      "rtt READ: 1 2 3\n",
		"short":          strings.Replace(sampleLatency, "rtt READ: 0 0 0", "rtt READ: 0 0", 1),
		"unknown kind":   strings.Replace(sampleLatency, "rtt READ", "p99 READ", 1),
		"no procedure":   strings.Replace(sampleLatency, "rtt READ:", "rtt:", 1),
		"not a number":   strings.Replace(sampleLatency, "rtt READ: 0", "rtt READ: x", 1),
		"bounds twice":   sampleLatency + "bounds_ns: 1\n",
		"no colon":       sampleLatency + "rtt READ\n",
		"overflow count": strings.Replace(sampleLatency, "rtt READ: 0", "rtt READ: 99999999999999999999", 1),
	} {
		if _, err := parseLatencyStats(text); err == nil {
			t.Errorf("%s: no error", name)
		} else if !strings.Contains(err.Error(), "latency") {
			t.Errorf("%s: error %q does not say what it parsed", name, err)
		}
	}
}

func FuzzParseLatencyStats(f *testing.F) {
	f.Add(sampleLatency)
	f.Add("bounds_ns: 1\nrtt X: 1 2 3\nexecute X: 4 5 6\n")
	f.Fuzz(func(t *testing.T, text string) {
		l, err := parseLatencyStats(text)
		if err != nil {
			return
		}
		// Whatever parses makes histograms promtool's rules allow:
		// one count per bound and one above.
		for _, o := range l.Ops {
			for _, h := range []latencyHist{o.RTT, o.Execute} {
				if h.Counts != nil && len(h.Counts) != len(l.BoundsNs)+1 {
					t.Fatalf("%s: %d counts for %d bounds", o.Name, len(h.Counts), len(l.BoundsNs))
				}
			}
		}
		var mm = []mountMetrics{{latency: l}}
		promMetrics(mm)
	})
}
