package lockd

import (
	"reflect"
	"testing"
)

// TestHeldSet: the ranges kept for reclaim follow POSIX's rules, as the
// server's copy does: a lock splits or replaces what the owner held, an
// unlock punches a hole, neighbours of one kind merge.
func TestHeldSet(t *testing.T) {
	type op struct {
		r          Range
		ex, unlock bool
	}
	for _, tc := range []struct {
		name string
		ops  []op
		want heldSet
	}{
		{"one", []op{{Range{0, 9}, true, false}}, heldSet{{Range{0, 9}, true}}},
		{"unlock middle", []op{{Range{0, 9}, true, false}, {Range{3, 4}, false, true}},
			heldSet{{Range{0, 2}, true}, {Range{5, 9}, true}}},
		{"downgrade middle", []op{{Range{0, MaxOffset}, true, false}, {Range{10, 19}, false, false}},
			heldSet{{Range{0, 9}, true}, {Range{10, 19}, false}, {Range{20, MaxOffset}, true}}},
		{"merge adjacent", []op{{Range{0, 9}, false, false}, {Range{10, 19}, false, false}},
			heldSet{{Range{0, 19}, false}}},
		{"unlock all", []op{{Range{0, 9}, false, false}, {Range{20, 29}, true, false}, {Range{0, MaxOffset}, false, true}},
			nil},
		{"no merge of kinds", []op{{Range{0, 9}, false, false}, {Range{10, 19}, true, false}},
			heldSet{{Range{0, 9}, false}, {Range{10, 19}, true}}},
	} {
		var h heldSet
		for _, o := range tc.ops {
			h = h.set(o.r, o.ex, o.unlock)
		}
		if len(h) == 0 && len(tc.want) == 0 {
			continue
		}
		if !reflect.DeepEqual(h, tc.want) {
			t.Errorf("%s: got %v, want %v", tc.name, h, tc.want)
		}
	}
}

// TestNLMRange: FUSE's inclusive ranges and NLM's offset and length
// convert both ways, with to-the-end as length 0.
func TestNLMRange(t *testing.T) {
	for _, r := range []Range{{0, MaxOffset}, {0, 0}, {5, 9}, {1 << 40, MaxOffset}} {
		off, n := toNLM(r)
		if got := fromNLM(off, n); got != r {
			t.Errorf("%v -> (%d, %d) -> %v", r, off, n, got)
		}
	}
	if off, n := toNLM(Range{10, MaxOffset}); off != 10 || n != 0 {
		t.Errorf("to the end: (%d, %d), want (10, 0)", off, n)
	}
}
