package main

import (
	"fmt"
	"io"
	"strings"
)

// baselinePrefix marks a column mounted by the -baseline build.
const baselinePrefix = "baseline:"

// withBaselines returns targets with, when there is a baseline build, each
// rdmafs target followed by its baseline twin, unless targets name it
// already: the two mounts take their turns next to each other.
func withBaselines(targets []string, baseline bool) []string {
	if !baseline {
		return targets
	}
	var out []string
	for _, t := range targets {
		out = append(out, t)
		if strings.HasPrefix(t, "rdmafs-") && !contains(targets, baselinePrefix+t) {
			out = append(out, baselinePrefix+t)
		}
	}
	return out
}

// printBaselineTable prints, for every column with a baseline twin, the
// ratio of this build's figure, CPU per operation and context switches per
// operation to the twin's: what a change to rdmafs moved, measured in
// the same boot.
func printBaselineTable(w io.Writer, cols []string, table map[string]map[string]result) {
	head := []string{"workload", "op"}
	var pairs []string
	for _, c := range cols {
		if !strings.HasPrefix(c, baselinePrefix) && contains(cols, baselinePrefix+c) {
			pairs = append(pairs, c)
			head = append(head, c+" figure", "CPU µs", "ctxsw")
		}
	}
	lines := [][]string{head}
	for _, r := range rows {
		line := []string{r.label, opName(r.key)}
		for _, c := range pairs {
			this, base := table[c][r.key], table[baselinePrefix+c][r.key]
			line = append(line, ratio(this, base),
				costRatio(this, base, func(k cost) float64 { return float64(k.proc.CPU) }),
				costRatio(this, base, func(k cost) float64 { return float64(k.proc.CtxSw) }))
		}
		lines = append(lines, line)
	}
	writeAligned(w, lines)
}

// costRatio is this's figure per operation over base's, as f takes it
// from the rdmafs process's counters; "-" where either is missing.
func costRatio(this, base result, f func(cost) float64) string {
	per := func(r result) float64 {
		k := r.cost
		if r.err != nil || k.err != nil || k.ops == 0 || k.proc == nil {
			return 0
		}
		return f(k) / float64(k.ops)
	}
	a, b := per(this), per(base)
	if a == 0 || b == 0 {
		return "-"
	}
	return fmt.Sprintf("%.2f", a/b)
}
