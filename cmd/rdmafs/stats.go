package main

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/rdmafs/rdmafs/fs"
)

// statsSynopsis is the command line of rdmafs stats, for its usage and
// the manual.
const statsSynopsis = "rdmafs stats [-json | -prometheus | -listen ADDR] [-i SECONDS [COUNT]] [MOUNTPOINT...]"

const statsUsage = "usage: " + statsSynopsis

// statsArgs is the command line of rdmafs stats.
type statsArgs struct {
	json       bool
	prometheus bool          // the Prometheus text format, once
	listen     string        // serve the Prometheus format on HTTP at this address
	interval   time.Duration // 0: one report
	count      int           // reports with an interval; 0: until killed
	dirs       []string      // none: every rdmafs mount
}

func parseStatsArgs(args []string) (*statsArgs, error) {
	a := &statsArgs{}
	for len(args) > 0 && strings.HasPrefix(args[0], "-") {
		switch args[0] {
		case "-h", "-help", "--help":
			return nil, errHelp
		case "-json", "--json":
			a.json = true
			args = args[1:]
		case "-prometheus", "--prometheus":
			a.prometheus = true
			args = args[1:]
		case "-listen", "--listen":
			if len(args) < 2 || args[1] == "" {
				return nil, &usageError{"stats -listen: missing ADDR (HOST:PORT)\n" + statsUsage}
			}
			if _, _, err := net.SplitHostPort(args[1]); err != nil {
				return nil, &usageError{fmt.Sprintf("stats -listen %s: ADDR must be HOST:PORT (%v)", args[1], err)}
			}
			a.listen = args[1]
			args = args[2:]
		case "-i":
			if len(args) < 2 {
				return nil, &usageError{"stats -i: missing SECONDS\n" + statsUsage}
			}
			secs, err := strconv.ParseFloat(args[1], 64)
			if err != nil || secs < 0.1 || secs > 86400 {
				return nil, &usageError{fmt.Sprintf("stats -i %s: SECONDS must be a number from 0.1 to 86400", args[1])}
			}
			a.interval = time.Duration(secs * float64(time.Second))
			args = args[2:]
			// An optional COUNT follows, as in nfsiostat; a mount point
			// that is all digits must be written as ./N.
			if len(args) > 0 && isDigits(args[0]) {
				n, err := strconv.Atoi(args[0])
				if err != nil || n < 1 {
					return nil, &usageError{fmt.Sprintf("stats -i: COUNT %s must be a number from 1", args[0])}
				}
				a.count = n
				args = args[1:]
			}
		case "--":
			args = args[1:]
			a.dirs = append(a.dirs, args...)
			return a, nil
		default:
			return nil, &usageError{fmt.Sprintf("stats: unknown flag %s\n%s", args[0], statsUsage)}
		}
	}
	a.dirs = append(a.dirs, args...)
	return a, a.check()
}

// check rejects flags that do not go together: one output format, and
// -i only with the formats it repeats.
func (a *statsArgs) check() error {
	formats := 0
	for _, on := range []bool{a.json, a.prometheus, a.listen != ""} {
		if on {
			formats++
		}
	}
	if formats > 1 {
		return &usageError{"stats: -json, -prometheus and -listen exclude each other\n" + statsUsage}
	}
	if a.interval != 0 && (a.prometheus || a.listen != "") {
		return &usageError{"stats: -i goes with the mountstats and -json reports, not -prometheus or -listen " +
			"(Prometheus keeps the history)\n" + statsUsage}
	}
	return nil
}

func isDigits(s string) bool {
	return s != "" && strings.Trim(s, "0123456789") == ""
}

// stats prints the statistics of rdmafs mounts, which each mount keeps in
// an extended attribute of its root: as the mount's block of
// /proc/self/mountstats (what nfs-utils' mountstats -f reads), as JSON,
// or as nfsiostat-like rates every interval; or as Prometheus metrics,
// once or for every scrape of an HTTP endpoint.
func stats(args []string) error {
	a, err := parseStatsArgs(args)
	if err != nil {
		return err
	}
	switch {
	case a.listen != "":
		return serveMetrics(a.listen, a.dirs)
	case a.prometheus:
		return writeMetrics(os.Stdout, a.dirs)
	}
	dirs := a.dirs
	if len(dirs) == 0 {
		if dirs, err = rdmafsMounts("/proc/self/mountinfo"); err != nil {
			return err
		}
		if len(dirs) == 0 {
			return errors.New("no rdmafs mounts")
		}
	}
	out := bufio.NewWriter(os.Stdout)
	defer out.Flush()
	if a.interval == 0 {
		for _, dir := range dirs {
			text, err := readStats(dir)
			if err != nil {
				return err
			}
			if !a.json {
				out.WriteString(text)
				continue
			}
			if err := writeJSONOf(out, text, time.Now()); err != nil {
				return fmt.Errorf("%s: %w", dir, err)
			}
		}
		return nil
	}
	return statsEvery(out, a, dirs)
}

// statsEvery writes a report of every mount in dirs every interval, count
// times (0: until killed): rates since the previous report, the first
// since the mount; or, with -json, the counters.
func statsEvery(out *bufio.Writer, a *statsArgs, dirs []string) error {
	prev := make([]*mountStats, len(dirs))
	var last time.Time
	for n := 0; a.count == 0 || n < a.count; n++ {
		if n > 0 {
			time.Sleep(time.Until(last.Add(a.interval)))
		}
		now := time.Now()
		for i, dir := range dirs {
			text, err := readStats(dir)
			if err != nil {
				return err
			}
			if a.json {
				if err := writeJSONOf(out, text, now); err != nil {
					return fmt.Errorf("%s: %w", dir, err)
				}
				continue
			}
			ms, err := parseMountStats(text)
			if err != nil {
				return fmt.Errorf("%s: %w", dir, err)
			}
			cur := &ms[0]
			secs := 0.0
			if prev[i] != nil {
				secs = now.Sub(last).Seconds()
			}
			writeIOStat(out, prev[i], cur, secs)
			prev[i] = cur
		}
		last = now
		if err := out.Flush(); err != nil {
			return err
		}
	}
	return nil
}

func writeJSONOf(w io.Writer, text string, t time.Time) error {
	ms, err := parseMountStats(text)
	if err != nil {
		return err
	}
	for i := range ms {
		if err := writeJSON(w, &ms[i], t); err != nil {
			return err
		}
	}
	return nil
}

// readStats returns the mountstats block of the rdmafs mount at dir.
func readStats(dir string) (string, error) { return readRootXattr(dir, fs.StatsXattr) }

// errNoStatsXattr is the error of readRootXattr for a directory without
// the attribute: not an rdmafs mount, or (for fs.LatencyXattr) one of an
// rdmafs too old to have it.
var errNoStatsXattr = errors.New("is not an rdmafs mount")

// readRootXattr returns the extended attribute attr of the root of the
// rdmafs mount at dir.
func readRootXattr(dir, attr string) (string, error) {
	buf := make([]byte, 64<<10)
	for {
		n, err := unix.Getxattr(dir, attr, buf)
		if errors.Is(err, unix.ERANGE) && len(buf) < 16<<20 {
			buf = make([]byte, 2*len(buf))
			continue
		}
		if errors.Is(err, unix.EOPNOTSUPP) || errors.Is(err, unix.ENODATA) {
			return "", fmt.Errorf("%s %w", dir, errNoStatsXattr)
		}
		if err != nil {
			return "", fmt.Errorf("%s: %w", dir, err)
		}
		return string(buf[:n]), nil
	}
}

// rdmafsMounts returns the mount points of the rdmafs mounts listed in
// the mountinfo file, in its order.
func rdmafsMounts(mountinfo string) ([]string, error) {
	f, err := os.Open(mountinfo)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var dirs []string
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		// id parent maj:min root mountpoint options [optional...] - fstype source superoptions
		fields := strings.Fields(sc.Text())
		for i, w := range fields {
			if w == "-" && i >= 5 && i+1 < len(fields) {
				if fields[i+1] == "fuse.rdmafs" {
					dirs = append(dirs, unmangle(fields[4]))
				}
				break
			}
		}
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("%s: %w", mountinfo, err)
	}
	return dirs, nil
}
