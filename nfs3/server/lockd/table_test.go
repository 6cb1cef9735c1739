package lockd

import (
	"math/rand/v2"
	"testing"

	"github.com/rdmafs/rdmafs/test/seed"
)

// The file a model test works on: bytes 0 to modelBytes-1; ranges end
// before modelEdge or run to the end of the file, so every byte from
// modelEdge on is locked as byte modelEdge is.
const (
	modelBytes = 48
	modelEdge  = 40
)

// kind of lock a model owner holds on one byte.
const (
	none = iota
	shared
	exclusive
)

func TestRangeOf(t *testing.T) {
	for _, c := range []struct {
		off, len uint64
		want     Range
	}{
		{0, 0, Range{0, ToEOF}},
		{5, 1, Range{5, 5}},
		{10, 0, Range{10, ToEOF}},
		{ToEOF - 1, 10, Range{ToEOF - 1, ToEOF}}, // past 2^64: to the end
		{1 << 63, 1 << 63, Range{1 << 63, ToEOF}},
	} {
		if got := RangeOf(c.off, c.len); got != c.want {
			t.Errorf("RangeOf(%d, %d) = %v, want %v", c.off, c.len, got, c.want)
		}
	}
	if l := (Range{3, ToEOF}).Length(); l != 0 {
		t.Errorf("length of a range to the end: %d, want 0", l)
	}
}

// TestTableSplitMerge walks the cases of posix_lock_file one by one.
func TestTableSplitMerge(t *testing.T) {
	tb := NewTable(100, 1000)
	a, b := Owner{"a", 1}, Owner{"b", 1}
	ranges := func() []Range {
		var rs []Range
		for _, l := range tb.Locks("f") {
			if l.Owner == a {
				rs = append(rs, l.Range)
			}
		}
		return rs
	}
	must := func(res Result, want Result) {
		t.Helper()
		if res != want {
			t.Fatalf("result %d, want %d; a holds %v", res, want, ranges())
		}
	}
	must(tb.Lock("f", a, "", false, Range{0, 9}), Granted)
	must(tb.Lock("f", a, "", false, Range{10, 19}), Granted) // adjacent: merged
	if rs := ranges(); len(rs) != 1 || rs[0] != (Range{0, 19}) {
		t.Fatalf("adjacent shared locks: %v, want one [0,19]", rs)
	}
	must(tb.Lock("f", a, "", true, Range{5, 9}), Granted) // upgrade in the middle: split in three
	if rs := ranges(); len(rs) != 3 || tb.Held("a") != 3 {
		t.Fatalf("exclusive inside shared: %v (%d held), want three", rs, tb.Held("a"))
	}
	must(tb.Lock("f", b, "", false, Range{0, 4}), Granted)  // shared with shared
	must(tb.Lock("f", b, "", false, Range{4, 5}), Conflict) // touches the exclusive
	if c := tb.Test("f", b, false, Range{0, ToEOF}); c == nil || !c.Exclusive || c.Range != (Range{5, 9}) {
		t.Fatalf("TEST: %+v, want a's exclusive [5,9]", c)
	}
	must(tb.Unlock("f", a, Range{0, ToEOF}), Granted)
	if rs := ranges(); len(rs) != 0 || tb.Held("a") != 0 || tb.Total() != 1 {
		t.Fatalf("after unlocking all: %v, %d held, %d in all", rs, tb.Held("a"), tb.Total())
	}
	must(tb.Lock("f", a, "", true, Range{100, ToEOF}), Granted)
	must(tb.Unlock("f", a, Range{200, 299}), Granted) // a hole: split
	if rs := ranges(); len(rs) != 2 || rs[0] != (Range{100, 199}) || rs[1] != (Range{300, ToEOF}) {
		t.Fatalf("hole in a lock to the end: %v", rs)
	}
	tb.DropHost("a")
	if tb.Held("a") != 0 || tb.Total() != 1 || len(ranges()) != 0 {
		t.Fatalf("DropHost: %d held, %d in all", tb.Held("a"), tb.Total())
	}
}

// TestTableBounds: a host cannot hold more locks than its bound, by locking
// or by punching holes, and the hosts together not more than the total.
func TestTableBounds(t *testing.T) {
	tb := NewTable(4, 6)
	a, b := Owner{"a", 1}, Owner{"b", 2}
	for i := range uint64(4) {
		if res := tb.Lock("f", a, "", true, Range{i * 10, i*10 + 1}); res != Granted {
			t.Fatalf("lock %d: %d", i, res)
		}
	}
	if res := tb.Lock("f", a, "", true, Range{100, 101}); res != NoLocks {
		t.Fatalf("a fifth lock of a host bound to 4: %d, want NoLocks", res)
	}
	if res := tb.Unlock("f", a, Range{0, 0}); res != Granted { // trims, no split
		t.Fatalf("a trim: %d", res)
	}
	if res := tb.Unlock("f", a, Range{30, 30}); res != Granted {
		t.Fatalf("a trim: %d", res)
	}
	if res := tb.Lock("g", a, "", true, Range{0, 9}); res != NoLocks {
		t.Fatalf("a fifth lock on another file: %d, want NoLocks", res)
	}
	if res := tb.Lock("g", b, "", true, Range{0, 9}); res != Granted {
		t.Fatal(res)
	}
	if res := tb.Unlock("g", b, Range{5, 5}); res != Granted { // a split: b holds 2
		t.Fatal(res)
	}
	if res := tb.Unlock("g", b, Range{2, 2}); res != NoLocks { // 7 in all
		t.Fatalf("a split beyond the total: %d, want NoLocks", res)
	}
	if tb.Total() != 6 {
		t.Fatalf("total %d, want 6", tb.Total())
	}
}

// TestTableModel drives the table with random locks and unlocks of random
// owners on one file and checks it, after each, against a model that
// records each owner's lock on each byte: the same bytes locked the same
// way, TEST finding a conflict exactly when the model has one, an owner's
// locks never overlapping nor touching with the same kind, and the counts.
func TestTableModel(t *testing.T) {
	rng := rand.New(rand.NewPCG(seed.New(t, "RDMAFS_LOCKD_SEED"), 0))
	owners := []Owner{{"a", 1}, {"a", 2}, {"b", 1}}
	for round := range 200 {
		tb := NewTable(1<<20, 1<<20)
		model := make([][modelBytes]int, len(owners))
		for step := range 60 {
			oi := rng.IntN(len(owners))
			o := owners[oi]
			start := uint64(rng.IntN(modelEdge))
			var r Range
			if rng.IntN(4) == 0 {
				r = Range{start, ToEOF}
			} else {
				r = Range{start, start + uint64(rng.IntN(modelEdge-int(start)))}
			}
			end := min(r.End, modelBytes-1)
			op := rng.IntN(3)
			excl := rng.IntN(2) == 0
			kind := shared
			if excl {
				kind = exclusive
			}
			conflict := false
			for oj := range owners {
				for b := r.Start; b <= end; b++ {
					if oj != oi && model[oj][b] != none && (excl || model[oj][b] == exclusive) {
						conflict = true
					}
				}
			}
			switch op {
			case 0: // TEST
				if got := tb.Test("f", o, excl, r) != nil; got != conflict {
					t.Fatalf("round %d step %d: TEST %v %v of %v: conflict %v, model %v", round, step, r, excl, o, got, conflict)
				}
			case 1: // LOCK
				res := tb.Lock("f", o, "", excl, r)
				if (res == Conflict) != conflict || res == NoLocks {
					t.Fatalf("round %d step %d: LOCK %v %v of %v: %d, model conflict %v", round, step, r, excl, o, res, conflict)
				}
				if res == Granted {
					for b := r.Start; b <= end; b++ {
						model[oi][b] = kind
					}
				}
			case 2: // UNLOCK
				if res := tb.Unlock("f", o, r); res != Granted {
					t.Fatalf("round %d step %d: UNLOCK: %d", round, step, res)
				}
				for b := r.Start; b <= end; b++ {
					model[oi][b] = none
				}
			}
			checkModel(t, tb, owners, model, round, step)
		}
	}
}

func checkModel(t *testing.T, tb *Table, owners []Owner, model [][modelBytes]int, round, step int) {
	t.Helper()
	locks := tb.Locks("f")
	held := map[string]int{}
	for oi, o := range owners {
		var got [modelBytes]int
		var mine []Lock
		for _, l := range locks {
			if l.Owner != o {
				continue
			}
			mine = append(mine, l)
			held[o.Host]++
			for b := l.Start; b <= min(l.End, modelBytes-1); b++ {
				if got[b] != none {
					t.Fatalf("round %d step %d: %v holds byte %d twice: %v", round, step, o, b, mine)
				}
				got[b] = shared
				if l.Exclusive {
					got[b] = exclusive
				}
			}
			if l.End != ToEOF && l.End >= modelEdge {
				t.Fatalf("round %d step %d: lock %v ends past the model's ranges", round, step, l.Range)
			}
		}
		if got != model[oi] {
			t.Fatalf("round %d step %d: %v holds %v, model %v", round, step, o, got, model[oi])
		}
		for i := range mine {
			for j := range mine {
				if i != j && mine[i].Exclusive == mine[j].Exclusive && mine[i].Range.touches(mine[j].Range) {
					t.Fatalf("round %d step %d: %v holds unmerged %v and %v", round, step, o, mine[i].Range, mine[j].Range)
				}
			}
		}
	}
	for _, h := range []string{"a", "b"} {
		if tb.Held(h) != held[h] {
			t.Fatalf("round %d step %d: host %s counted %d locks, holds %d", round, step, h, tb.Held(h), held[h])
		}
	}
	if tb.Total() != len(locks) {
		t.Fatalf("round %d step %d: total %d, %d locks", round, step, tb.Total(), len(locks))
	}
}
