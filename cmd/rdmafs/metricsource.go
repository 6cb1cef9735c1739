package main

import (
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/rdmafs/rdmafs/fs"
)

// The mounts rdmafs stats -prometheus and -listen report on, read afresh
// for every report: the named ones, or every rdmafs mount of the host.

// readMountMetrics reads the statistics of the rdmafs mount at dir: its
// mountstats block and, if its rdmafs keeps them, its latency histograms.
func readMountMetrics(dir string) (mountMetrics, error) {
	text, err := readStats(dir)
	if err != nil {
		return mountMetrics{}, err
	}
	ms, err := parseMountStats(text)
	if err != nil {
		return mountMetrics{}, fmt.Errorf("%s: %w", dir, err)
	}
	m := mountMetrics{stats: ms[0]}
	lat, err := readRootXattr(dir, fs.LatencyXattr)
	switch {
	case errors.Is(err, errNoStatsXattr):
		// Mounted by an rdmafs without histograms: the counters alone.
	case err != nil:
		return mountMetrics{}, err
	default:
		if m.latency, err = parseLatencyStats(lat); err != nil {
			return mountMetrics{}, fmt.Errorf("%s: %w", dir, err)
		}
	}
	return m, nil
}

// gatherMetrics reads the mounts at dirs, or, if there are none, every
// rdmafs mount of mountinfo. A named mount that cannot be read is an
// error; one found in mountinfo is left out, with a warning to warn (it
// went away, or its daemon did), so that one dead mount does not hide
// the others.
func gatherMetrics(dirs []string, mountinfo string, warn io.Writer) ([]mountMetrics, error) {
	named := len(dirs) > 0
	if !named {
		var err error
		if dirs, err = rdmafsMounts(mountinfo); err != nil {
			return nil, err
		}
	}
	var out []mountMetrics
	for _, dir := range dirs {
		m, err := readMountMetrics(dir)
		if err != nil {
			if named {
				return nil, err
			}
			fmt.Fprintf(warn, "rdmafs stats: leaving out %s: %v\n", dir, err)
			continue
		}
		out = append(out, m)
	}
	return out, nil
}

// writeMetrics writes the metrics of the mounts at dirs (none: every
// rdmafs mount) in the Prometheus text format, for node_exporter's
// textfile collector or a pushgateway. No mounts make an empty file, not
// an error: a host without mounts now has no series.
func writeMetrics(w io.Writer, dirs []string) error {
	mounts, err := gatherMetrics(dirs, "/proc/self/mountinfo", os.Stderr)
	if err != nil {
		return err
	}
	return promMetrics(mounts).write(w)
}
