package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"sync"
	"time"

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

// mountReadLimit is how long a report waits for one mount's statistics.
// Its daemon answers them from memory, at once, even when the server is
// gone; one that does not answer (stopped, or its FUSE connection stuck)
// must not hold up the report of every other mount.
const mountReadLimit = 5 * time.Second

// reading holds the mounts whose statistics a read still waits for, after
// its report went on without them: the next report leaves them out at once
// rather than leave another goroutine behind, so a stuck mount costs one.
var reading sync.Map

// readMountMetricsWithin is readMountMetrics, given up after limit (the
// read itself, a getxattr(2), cannot be cancelled: it goes on alone).
func readMountMetricsWithin(dir string, limit time.Duration) (mountMetrics, error) {
	type result struct {
		m   mountMetrics
		err error
	}
	if _, busy := reading.LoadOrStore(dir, true); busy {
		return mountMetrics{}, fmt.Errorf("%s: its statistics did not come within %v last time, and still have not", dir, limit)
	}
	done := make(chan result, 1)
	go func() {
		defer reading.Delete(dir)
		m, err := readMountMetrics(dir)
		done <- result{m, err}
	}()
	timer := time.NewTimer(limit)
	defer timer.Stop()
	select {
	case r := <-done:
		return r.m, r.err
	case <-timer.C:
		return mountMetrics{}, fmt.Errorf("%s: its statistics did not come within %v", dir, limit)
	}
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
	// All at once, so that stuck mounts cost one limit in all, not each.
	type result struct {
		m   mountMetrics
		err error
	}
	results := make([]result, len(dirs))
	var wg sync.WaitGroup
	for i, dir := range dirs {
		wg.Go(func() {
			m, err := readMountMetricsWithin(dir, mountReadLimit)
			results[i] = result{m, err}
		})
	}
	wg.Wait()
	var out []mountMetrics
	for i, dir := range dirs {
		m, err := results[i].m, results[i].err
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
