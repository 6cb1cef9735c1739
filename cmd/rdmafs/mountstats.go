package main

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/rdmafs/rdmafs/fs"
	"github.com/rdmafs/rdmafs/xprtrdma"
)

// The names of the counters of a mountstats block, in the order of their
// fields. Events and bytes are named as nfs-utils' mountstats names them;
// the transport fields as the kernel's xprt print_stats functions do
// (rdma's as package xprtrdma, which prints them, names them).
var (
	eventNames = []string{"inoderevalidates", "dentryrevalidates", "datainvalidates", "attrinvalidates",
		"vfsopen", "vfslookup", "vfspermission", "vfsupdatepage", "vfsreadpage", "vfsreadpages",
		"vfswritepage", "vfswritepages", "vfsreaddir", "vfssetattr", "vfsflush", "vfsfsync", "vfslock",
		"vfsrelease", "congestionwait", "setattrtrunc", "extendwrite", "sillyrenames", "shortreads",
		"shortwrites", "delay", "pnfsreads", "pnfswrites"}
	byteNames = []string{"normalreadbytes", "normalwritebytes", "directreadbytes", "directwritebytes",
		"serverreadbytes", "serverwritebytes", "readpages", "writepages"}
	xprtNames = map[string][]string{
		"tcp": {"port", "bind_count", "connect_count", "connect_time", "idle_time", "sends", "recvs",
			"bad_xids", "req_u", "bklog_u", "max_slots", "sending_u", "pending_u"},
		// The RDMA transport names its own fields, in the order it
		// prints them.
		"rdma": xprtrdma.StatNames(),
	}
	// xprtMinFields is the fewest fields a transport's line may have: the
	// kernel's, for rdma; rdmafs's own fields after them came one by one,
	// and a mount made by an older rdmafs has fewer of them.
	xprtMinFields = map[string]int{"rdma": 27}
	opFieldNames  = []string{"ops", "trans", "timeouts", "bytes_sent", "bytes_recv", "queue_ms", "rtt_ms",
		"execute_ms", "errors"}
)

// counter is one named value of a mountstats line.
type counter struct {
	Name  string
	Value uint64
}

// xprt is one "xprt:" line.
type xprt struct {
	Proto  string
	Fields []counter
}

// opStats is one line of the per-op statistics.
type opStats struct {
	Name   string
	Fields [9]uint64 // in the order of opFieldNames
}

// mountStats is one mount's block of /proc/self/mountstats, as rdmafs
// stats writes it.
type mountStats struct {
	Device, Mountpoint, Fstype, StatVers string
	Opts                                 string
	Age                                  uint64
	Caps, Sec                            string
	Events, Bytes                        []counter
	Program                              string // "100003/3"
	Xprts                                []xprt
	Ops                                  []opStats
	// LockOps are the NLM procedures of a mount whose locks go to the
	// server (the block of fs.LockStatsHeader that follows the mount's).
	LockOps []opStats
}

// maxStatsLines bounds the lines of one block; a real block has fewer
// than 50.
const maxStatsLines = 1000

// parseMountStats parses the text of one or more mountstats blocks. Every
// line must be one the kernel writes for an NFS mount; numbers must fit 64
// bits.
func parseMountStats(text string) ([]mountStats, error) {
	var all []mountStats
	var m *mountStats
	inOps, inLock := false, false
	for n, line := range strings.Split(text, "\n") {
		if n >= maxStatsLines*16 {
			return nil, fmt.Errorf("mountstats: more than %d lines", maxStatsLines*16)
		}
		bad := func(format string, args ...any) error {
			return fmt.Errorf("mountstats line %d: %s: %q", n+1, fmt.Sprintf(format, args...), truncate(line, 80))
		}
		if strings.TrimSpace(line) == "" {
			continue
		}
		if strings.HasPrefix(line, "device ") {
			d, err := parseDeviceLine(line)
			if err != nil {
				return nil, bad("%v", err)
			}
			all = append(all, d)
			m, inOps, inLock = &all[len(all)-1], false, false
			continue
		}
		if strings.HasPrefix(line, fs.LockStatsHeader) {
			if m == nil {
				return nil, bad("before the first device line")
			}
			inOps, inLock = true, true
			continue
		}
		if m == nil {
			return nil, bad("before the first device line")
		}
		key, rest, _ := strings.Cut(strings.TrimSpace(line), ":")
		rest = strings.TrimSpace(rest)
		var err error
		switch {
		case inOps:
			var op opStats
			op.Name = key
			err = parseNumbers(rest, op.Fields[:])
			if inLock {
				m.LockOps = append(m.LockOps, op)
			} else {
				m.Ops = append(m.Ops, op)
			}
		case key == "opts":
			m.Opts = rest
		case key == "age":
			m.Age, err = strconv.ParseUint(rest, 10, 64)
		case key == "caps":
			m.Caps = rest
		case key == "sec":
			m.Sec = rest
		case key == "events":
			m.Events, err = parseNamed(rest, eventNames)
		case key == "bytes":
			m.Bytes, err = parseNamed(rest, byteNames)
		case strings.HasPrefix(key, "RPC iostats version"):
			_, p, ok := strings.Cut(line, "p/v: ")
			if !ok {
				return nil, bad("no p/v")
			}
			m.Program, _, _ = strings.Cut(p, " ")
		case key == "xprt":
			proto, nums, _ := strings.Cut(rest, " ")
			names, ok := xprtNames[proto]
			if !ok {
				return nil, bad("unknown transport %q", proto)
			}
			var x xprt
			x.Proto = proto
			x.Fields, err = parseNamedMin(nums, names, xprtMinFields[proto])
			m.Xprts = append(m.Xprts, x)
		case key == "per-op statistics":
			inOps = true
		default:
			return nil, bad("unknown line")
		}
		if err != nil {
			return nil, bad("%v", err)
		}
		if len(m.Ops)+len(m.LockOps) > maxStatsLines {
			return nil, bad("more than %d procedures", maxStatsLines)
		}
	}
	if len(all) == 0 {
		return nil, fmt.Errorf("mountstats: no device line")
	}
	return all, nil
}

// parseDeviceLine parses "device SOURCE mounted on DIR with fstype nfs
// statvers=1.1", unescaping the octal escapes of SOURCE and DIR.
func parseDeviceLine(line string) (mountStats, error) {
	f := strings.Fields(line)
	if len(f) < 8 || len(f) > 9 || f[0] != "device" || f[2] != "mounted" || f[3] != "on" ||
		f[5] != "with" || f[6] != "fstype" {
		return mountStats{}, fmt.Errorf("not a device line")
	}
	m := mountStats{Device: unmangle(f[1]), Mountpoint: unmangle(f[4]), Fstype: f[7]}
	if len(f) == 9 {
		v, ok := strings.CutPrefix(f[8], "statvers=")
		if !ok {
			return mountStats{}, fmt.Errorf("no statvers")
		}
		m.StatVers = v
	}
	return m, nil
}

// parseNumbers parses exactly len(out) decimal numbers separated by
// spaces.
func parseNumbers(s string, out []uint64) error {
	f := strings.Fields(s)
	if len(f) != len(out) {
		return fmt.Errorf("%d numbers, want %d", len(f), len(out))
	}
	for i, w := range f {
		v, err := strconv.ParseUint(w, 10, 64)
		if err != nil {
			return fmt.Errorf("field %d: not a number", i+1)
		}
		out[i] = v
	}
	return nil
}

// parseNamed parses the numbers of a line whose fields have the given
// names. Fewer numbers than names are an error; further ones (a newer
// kernel's) get the names field29, field30, ...
func parseNamed(s string, names []string) ([]counter, error) {
	return parseNamedMin(s, names, len(names))
}

// parseNamedMin is parseNamed for a line that may end after its first
// least fields (0: all the names).
func parseNamedMin(s string, names []string, least int) ([]counter, error) {
	f := strings.Fields(s)
	if least == 0 {
		least = len(names)
	}
	if len(f) < least {
		return nil, fmt.Errorf("%d numbers, want %d", len(f), len(names))
	}
	if len(f) > len(names)+maxStatsLines {
		return nil, fmt.Errorf("%d numbers, want %d", len(f), len(names))
	}
	out := make([]counter, len(f))
	for i, w := range f {
		v, err := strconv.ParseUint(w, 10, 64)
		if err != nil {
			return nil, fmt.Errorf("field %d: not a number", i+1)
		}
		name := fmt.Sprintf("field%d", i+1)
		if i < len(names) {
			name = names[i]
		}
		out[i] = counter{name, v}
	}
	return out, nil
}

// unmangle undoes the octal escapes (\040 for a space) of a device name or
// mount point in mountstats or mountinfo.
func unmangle(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) && isOctal(s[i+1]) && isOctal(s[i+2]) && isOctal(s[i+3]) {
			b.WriteByte((s[i+1]-'0')<<6 | (s[i+2]-'0')<<3 | (s[i+3] - '0'))
			i += 3
			continue
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

func isOctal(c byte) bool { return c >= '0' && c <= '7' }

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "..."
}

// value returns the named counter of cs, or 0.
func value(cs []counter, name string) uint64 {
	for _, c := range cs {
		if c.Name == name {
			return c.Value
		}
	}
	return 0
}

// op returns the per-op line of the named procedure, or a zero line.
func (m *mountStats) op(name string) opStats {
	for _, o := range m.Ops {
		if o.Name == name {
			return o
		}
	}
	return opStats{Name: name}
}

// xprtSum adds up the named field of every transport line (nconnect).
func (m *mountStats) xprtSum(name string) uint64 {
	var sum uint64
	for _, x := range m.Xprts {
		sum += value(x.Fields, name)
	}
	return sum
}
