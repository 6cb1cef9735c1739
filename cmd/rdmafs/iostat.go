package main

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"time"
)

// writeIOStat writes the rates of one mount over an interval of secs
// seconds, from the counters in prev (nil: since the mount) to those in
// cur, in the layout of nfs-utils' nfsiostat: calls per second and the
// backlog of the transport, then for READ and WRITE the calls and
// kilobytes per second, kilobytes per call, retransmissions, and the
// average round trip, execution and queueing times.
func writeIOStat(w io.Writer, prev, cur *mountStats, secs float64) {
	d := *cur
	if prev != nil && prev.Age <= cur.Age {
		d = diffStats(prev, cur)
	}
	if secs <= 0 {
		secs = float64(d.Age)
	}
	if secs <= 0 {
		secs = 1 // just mounted: show the counts as they are
	}
	sends := float64(d.xprtSum("sends"))
	backlog := 0.0
	if sends > 0 {
		backlog = float64(d.xprtSum("bklog_u")) / sends / secs
	}
	fmt.Fprintf(w, "\n%s mounted on %s:\n\n", d.Device, d.Mountpoint)
	fmt.Fprintf(w, "%16s%16s\n%16.3f%16.3f\n\n", "ops/s", "rpc bklog", sends/secs, backlog)
	for _, name := range []string{"READ", "WRITE"} {
		o := d.op(name)
		ops := float64(o.Fields[0])
		retrans := float64(o.Fields[1]) - ops
		kb := float64(o.Fields[3]+o.Fields[4]) / 1024
		errs := float64(o.Fields[8])
		per := func(v float64) float64 {
			if ops == 0 {
				return 0
			}
			return v / ops
		}
		pct := func(v float64) string { return fmt.Sprintf("%.0f (%.1f%%)", v, per(v)*100) }
		fmt.Fprintf(w, "%-16s%8s%16s%16s%16s%16s%16s%16s%16s\n", strings.ToLower(name)+":",
			"ops/s", "kB/s", "kB/op", "retrans", "avg RTT (ms)", "avg exe (ms)", "avg queue (ms)", "errors")
		fmt.Fprintf(w, "%24.3f%16.3f%16.3f%16s%16.3f%16.3f%16.3f%16s\n",
			ops/secs, kb/secs, per(kb), pct(retrans), per(float64(o.Fields[6])),
			per(float64(o.Fields[7])), per(float64(o.Fields[5])), pct(errs))
	}
}

// diffStats returns cur with every counter less its value in prev; the
// age becomes the length of the interval.
func diffStats(prev, cur *mountStats) mountStats {
	d := *cur
	d.Age = cur.Age - prev.Age
	d.Events = diffCounters(prev.Events, cur.Events)
	d.Bytes = diffCounters(prev.Bytes, cur.Bytes)
	d.Xprts = make([]xprt, len(cur.Xprts))
	for i, x := range cur.Xprts {
		d.Xprts[i] = x
		if i < len(prev.Xprts) && prev.Xprts[i].Proto == x.Proto {
			d.Xprts[i].Fields = diffCounters(prev.Xprts[i].Fields, x.Fields)
		}
	}
	d.Ops = make([]opStats, len(cur.Ops))
	for i, o := range cur.Ops {
		p := prev.op(o.Name)
		d.Ops[i].Name = o.Name
		for j := range o.Fields {
			d.Ops[i].Fields[j] = sub(o.Fields[j], p.Fields[j])
		}
	}
	return d
}

func diffCounters(prev, cur []counter) []counter {
	out := make([]counter, len(cur))
	for i, c := range cur {
		out[i] = counter{c.Name, sub(c.Value, value(prev, c.Name))}
	}
	return out
}

// sub is a-b for counters, 0 if b is larger: a value that is not a counter
// (a port, a slot count) or one that started again.
func sub(a, b uint64) uint64 {
	if b > a {
		return 0
	}
	return a - b
}

// statsJSON is the JSON form of a mount's statistics: one object per
// mount, on one line, with every counter by name.
type statsJSON struct {
	Time       string `json:"time"`
	Device     string `json:"device"`
	Mountpoint string `json:"mountpoint"`
	Opts       string `json:"opts"`
	// FUSEChannel is how the kernel's requests reach rdmafs: "io_uring"
	// or "dev" (/dev/fuse), from the opts line's fuse_channel=.
	FUSEChannel string                       `json:"fuse_channel,omitempty"`
	AgeSeconds  uint64                       `json:"age_seconds"`
	Caps        string                       `json:"caps"`
	Sec         string                       `json:"sec"`
	Events      map[string]uint64            `json:"events"`
	Bytes       map[string]uint64            `json:"bytes"`
	Xprt        []xprtJSON                   `json:"xprt"`
	Ops         map[string]map[string]uint64 `json:"ops"`
	// LockOps are the NLM procedures, on a mount whose locks go to the
	// server.
	LockOps map[string]map[string]uint64 `json:"lock_ops,omitempty"`
}

// optValue returns the value of name= in the option list opts, or "".
func optValue(opts, name string) string {
	for _, o := range strings.Split(opts, ",") {
		if v, ok := strings.CutPrefix(o, name+"="); ok {
			return v
		}
	}
	return ""
}

type xprtJSON struct {
	Proto    string            `json:"proto"`
	Counters map[string]uint64 `json:"counters"`
}

func countersMap(cs []counter) map[string]uint64 {
	m := make(map[string]uint64, len(cs))
	for _, c := range cs {
		m[c.Name] = c.Value
	}
	return m
}

// opsMap names the fields of each per-op line.
func opsMap(ops []opStats) map[string]map[string]uint64 {
	m := make(map[string]map[string]uint64, len(ops))
	for _, o := range ops {
		f := make(map[string]uint64, len(opFieldNames))
		for i, name := range opFieldNames {
			f[name] = o.Fields[i]
		}
		m[o.Name] = f
	}
	return m
}

// writeJSON writes m as one line of JSON, stamped with the time t.
func writeJSON(w io.Writer, m *mountStats, t time.Time) error {
	j := statsJSON{
		Time: t.UTC().Format(time.RFC3339Nano), Device: m.Device, Mountpoint: m.Mountpoint,
		Opts: m.Opts, FUSEChannel: optValue(m.Opts, "fuse_channel"), AgeSeconds: m.Age, Caps: m.Caps, Sec: m.Sec,
		Events: countersMap(m.Events), Bytes: countersMap(m.Bytes),
		Xprt: make([]xprtJSON, len(m.Xprts)), Ops: make(map[string]map[string]uint64, len(m.Ops)),
	}
	for i, x := range m.Xprts {
		j.Xprt[i] = xprtJSON{x.Proto, countersMap(x.Fields)}
	}
	j.Ops = opsMap(m.Ops)
	if len(m.LockOps) > 0 {
		j.LockOps = opsMap(m.LockOps)
	}
	b, err := json.Marshal(&j)
	if err != nil {
		return err
	}
	_, err = w.Write(append(b, '\n'))
	return err
}
