package difftest

import (
	"fmt"
	"strings"
)

// Known is a difference between the two mounts that is intended: each is
// listed, with its reason, in test/e2e/README.md.
type Known struct {
	Name string
	// Match reports whether the results a (the reference mount's) and b
	// (the mount under test's) of op differ only in this known way.
	Match func(op Op, a, b Result) bool
	// Diverges, if set, reports whether the runs' states may part in this
	// known way at op, whose results are a (the reference's) and b: every
	// difference of the script from op on is then counted as this one, as
	// a state that differs changes the results of any call after it.
	Diverges func(op Op, a, b Result) bool
}

// Difference is one result that differs.
type Difference struct {
	Index int
	Op    Op
	A, B  Result
}

func (d Difference) String() string {
	return fmt.Sprintf("step %d (%v):\n\treference:  %v\n\tunder test: %v", d.Index, d.Op, d.A, d.B)
}

// Compare returns the results of ops that differ between the reference run
// a and the run under test b, except those a known difference explains;
// explained counts those, by name.
func Compare(ops []Op, a, b []Result, known []Known) (diffs []Difference, explained map[string]int) {
	explained = make(map[string]int)
	diverged := "" // the known difference the runs' states parted in
	for i, op := range ops {
		for _, k := range known {
			if diverged == "" && k.Diverges != nil && k.Diverges(op, a[i], b[i]) {
				diverged = k.Name
			}
		}
		if a[i].String() == b[i].String() {
			continue
		}
		name := diverged
		for _, k := range known {
			if name == "" && k.Match != nil && k.Match(op, a[i], b[i]) {
				name = k.Name
			}
		}
		if name != "" {
			explained[name]++
			continue
		}
		diffs = append(diffs, Difference{Index: i, Op: op, A: a[i], B: b[i]})
	}
	return diffs, explained
}

// Report renders the differences of a run of script for a test failure:
// the steps before each difference for context, and the difference marked;
// with full, every step of the script.
func Report(script string, ops []Op, a, b []Result, diffs []Difference, full bool) string {
	var s strings.Builder
	fmt.Fprintf(&s, "script %q: %d of %d results differ (reference | under test)\n", script, len(diffs), len(ops))
	differs := make(map[int]bool)
	for _, d := range diffs {
		differs[d.Index] = true
	}
	shown := make(map[int]bool)
	if full {
		for j := range ops {
			writeStep(&s, j, ops[j], a[j], b[j], differs[j])
		}
		return s.String()
	}
	for n, d := range diffs {
		if n == 8 {
			fmt.Fprintf(&s, "  ... %d more\n", len(diffs)-n)
			break
		}
		for j := max(0, d.Index-3); j <= d.Index; j++ {
			if shown[j] {
				continue
			}
			shown[j] = true
			writeStep(&s, j, ops[j], a[j], b[j], differs[j])
		}
	}
	return s.String()
}

// writeStep renders step j: the call and the reference's result, and the
// result under test too, marked, if it differs.
func writeStep(s *strings.Builder, j int, op Op, a, b Result, differs bool) {
	mark := " "
	if differs {
		mark = "!"
	}
	fmt.Fprintf(s, "%s %3d %v\n", mark, j, op)
	if differs {
		fmt.Fprintf(s, "        %v\n        %v\n", a, b)
	} else {
		fmt.Fprintf(s, "        %v\n", a)
	}
}
