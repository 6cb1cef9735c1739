package main

import (
	"errors"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/rdmafs/rdmafs/bench/procstat"
)

// trimmed from fio 3.33 --output-format=json, after a warning line
const fioOut = `fio: some warning
{
  "fio version" : "fio-3.33",
  "jobs" : [
    {
      "jobname" : "knfs-tcp-seqwrite",
      "error" : 0,
      "read" : {"io_bytes" : 4096, "bw_bytes" : 4096, "iops" : 1.0, "total_ios" : 1},
      "write" : {"io_bytes" : 1073741824, "bw_bytes" : 52428800, "iops" : 50.0, "total_ios" : 1024}
    }
  ]
}`

func TestParseFio(t *testing.T) {
	v, ops, err := parseFio([]byte(fioOut), "write")
	if err != nil || v != 50 || ops != 1024 {
		t.Errorf("write: %v, %d, %v; want 50 MiB/s, 1024 I/Os", v, ops, err)
	}
	v, _, err = parseFio([]byte(fioOut), "randwrite")
	if err != nil || v != 50 {
		t.Errorf("randwrite: %v, %v; want 50 IOPS", v, err)
	}
	v, ops, err = parseFio([]byte(fioOut), "randrw")
	if err != nil || v != 51 || ops != 1025 {
		t.Errorf("randrw: %v, %d, %v; want 51 IOPS, 1025 I/Os (read and write together)", v, ops, err)
	}
	noRead := strings.Replace(fioOut, `"io_bytes" : 4096`, `"io_bytes" : 0`, 1)
	if _, _, err := parseFio([]byte(noRead), "read"); err == nil {
		t.Errorf("read of a write job: no error, want 'moved no data'")
	}
	if _, _, err := parseFio([]byte("fio: error"), "read"); err == nil {
		t.Errorf("no JSON: no error")
	}
	bad := strings.Replace(fioOut, `"error" : 0`, `"error" : 5`, 1)
	if _, _, err := parseFio([]byte(bad), "write"); err == nil {
		t.Errorf("job error 5: no error")
	}
}

func TestParseSize(t *testing.T) {
	for in, want := range map[string]int64{"1g": 1 << 30, "256m": 256 << 20, "64K": 64 << 10, "4096": 4096} {
		if got, err := parseSize(in); err != nil || got != want {
			t.Errorf("parseSize(%q) = %d, %v; want %d", in, got, err, want)
		}
	}
	for _, in := range []string{"", "x", "-1m", "0"} {
		if _, err := parseSize(in); err == nil {
			t.Errorf("parseSize(%q): no error", in)
		}
	}
}

func TestPrintTable(t *testing.T) {
	cols := []string{"knfs-rdma", "knfs-tcp", "rdmafs-tcp"}
	table := map[string]map[string]result{
		"knfs-rdma":  {"seqwrite": {value: 40}, "create": {value: 100}},
		"knfs-tcp":   {"seqwrite": {value: 60}, "create": {err: errors.New("boom")}},
		"rdmafs-tcp": {"seqwrite": {value: 20, buffered: true}},
	}
	var b strings.Builder
	printTable(&b, cols, table)
	out := b.String()
	t.Log("\n" + out)
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != 1+len(rows) {
		t.Fatalf("%d lines, want %d", len(lines), 1+len(rows))
	}
	for _, want := range []string{"knfs-tcp/knfs-rdma", "rdmafs-tcp/knfs-rdma"} {
		if !strings.Contains(lines[0], want) {
			t.Errorf("header %q lacks %q", lines[0], want)
		}
	}
	seq := strings.Fields(lines[1])
	// seq write 1M MiB/s 40.0 60.0 20.0 b 1.50 0.50
	if got := strings.Join(seq[len(seq)-6:], " "); got != "40.0 60.0 20.0 b 1.50 0.50" {
		t.Errorf("seq write row ends %q", got)
	}
	if create := lines[1+rowIndex(t, "create")]; !strings.Contains(create, "error") {
		t.Errorf("create row %q does not show the error", create)
	}
	if strings.Contains(lines[0], "target") {
		t.Errorf("header %q: a target column without the rdmafs-rdma column", lines[0])
	}
}

func rowIndex(t *testing.T, key string) int {
	for i, r := range rows {
		if r.key == key {
			return i
		}
	}
	t.Fatalf("no row %q", key)
	return 0
}

// TestPrintTableTargets: the rdmafs-rdma ratio of each row is held against
// its target, as the ratio is printed.
func TestPrintTableTargets(t *testing.T) {
	cols := []string{"knfs-rdma", "rdmafs-tcp", "rdmafs-rdma"}
	table := map[string]map[string]result{
		"knfs-rdma":   {"seqwrite": {value: 40}, "seqread": {value: 40}, "create": {value: 100}, "stat": {value: 100}},
		"rdmafs-tcp":  {"seqwrite": {value: 80}, "seqread": {value: 80}, "create": {value: 100}},
		"rdmafs-rdma": {"seqwrite": {value: 39.7}, "seqread": {value: 40}, "create": {value: 49.96}, "stat": {value: 49}},
	}
	var b strings.Builder
	printTable(&b, cols, table)
	t.Log("\n" + b.String())
	lines := strings.Split(strings.TrimSpace(b.String()), "\n")
	if h := strings.Fields(lines[0]); h[len(h)-2] != "target" || h[len(h)-1] != "met" {
		t.Fatalf("header %q does not end with target and met", lines[0])
	}
	for key, want := range map[string]string{
		"seqwrite": ">=1.0 no", "seqread": ">=1.0 yes", // 0.9925 prints as 0.99
		"create": ">=0.5 yes", // 0.4996 prints as 0.50
		"stat":   ">=0.5 no", "unlink": ">=0.5 -",
	} {
		f := strings.Fields(lines[1+rowIndex(t, key)])
		if got := strings.Join(f[len(f)-2:], " "); got != want {
			t.Errorf("%s row %q ends %q, want %q", key, lines[1+rowIndex(t, key)], got, want)
		}
	}
}

func TestCostTable(t *testing.T) {
	cols := []string{"knfs-rdma", "rdmafs-rdma", "uncounted"}
	proc := procstat.Process{CPU: 3 * time.Second, Syscalls: 5000, CtxSw: 2500, MonitorCtxSw: 1500}
	table := map[string]map[string]result{
		"knfs-rdma":   {"create": {value: 100, cost: cost{ops: 1000, machine: 2 * time.Second, rpcs: 2000, hasRPCs: true}}},
		"rdmafs-rdma": {"create": {value: 50, cost: cost{ops: 1000, machine: 4 * time.Second, rpcs: 3000, hasRPCs: true, proc: &proc}}},
		"uncounted":   {"create": {value: 50, cost: cost{ops: 1000, machine: 4 * time.Second}}},
	}
	var b strings.Builder
	printCostTable(&b, cols, table)
	t.Log("\n" + b.String())
	lines := strings.Split(strings.TrimSpace(b.String()), "\n")
	for _, want := range []string{"knfs-rdma guest µs  RPCs", "rdmafs-rdma guest µs  RPCs", "rdmafs-rdma µs", "syscalls", "ctxsw", "sysmon"} {
		if !strings.Contains(lines[0], want) {
			t.Errorf("header %q lacks %q", lines[0], want)
		}
	}
	// an uncounted mount's RPCs are a dash, not 0
	f := strings.Fields(lines[1+rowIndex(t, "create")])
	if got := strings.Join(f[len(f)-10:], " "); got != "2000 2.00 4000 3.00 3000 5.0 2.5 1.5 4000 -" {
		t.Errorf("create row ends %q, want 2000 2.00 4000 3.00 3000 5.0 2.5 1.5 4000 -", got)
	}
	f = strings.Fields(lines[1+rowIndex(t, "unlink")])
	if got := strings.Join(f[len(f)-10:], " "); got != "- - - - - - - - - -" {
		t.Errorf("unlink row ends %q: not measured, want dashes", got)
	}
}

func TestMemoryTable(t *testing.T) {
	mem := map[string]memoryUse{"rdmafs-rdma": {
		idle: procstat.Memory{RSS: 40 << 20, Pinned: 128 << 20},
		peak: procstat.Memory{RSS: 300 << 20, Pinned: 128 << 20, Locked: 1 << 20},
	}}
	var b strings.Builder
	printMemoryTable(&b, []string{"knfs-rdma", "rdmafs-rdma"}, mem)
	t.Log("\n" + b.String())
	out := b.String()
	for _, want := range []string{"idle pinned (VmPin)  128.0", "peak resident  300.0", "peak locked  1.0"} {
		if !strings.Contains(strings.Join(strings.Fields(out), " "), strings.Join(strings.Fields(want), " ")) {
			t.Errorf("memory table lacks %q", want)
		}
	}
	if strings.Contains(out, "knfs-rdma") {
		t.Errorf("memory table has a column for the kernel client")
	}
}

func TestChartTable(t *testing.T) {
	cols := []string{"knfs-rdma", "rdmafs-tcp"}
	table := map[string]map[string]result{
		"knfs-rdma":  {"seqwrite": {value: 40}, "create": {err: errors.New("boom")}},
		"rdmafs-tcp": {"seqwrite": {value: 20, buffered: true}, "create": {value: 7}},
	}
	ct := chartTable("title", cols, table, []string{"a note"})
	if len(ct.Rows) != len(rows) || ct.Rows[0].Values[0] != 40 || ct.Rows[0].Values[1] != 20 || ct.Rows[0].Marks[1] != "b" {
		t.Errorf("seq write row %+v", ct.Rows[0])
	}
	if create := ct.Rows[rowIndex(t, "create")]; !math.IsNaN(create.Values[0]) || create.Values[1] != 7 {
		t.Errorf("create row %+v: the failed figure must be missing", create)
	}
	if !math.IsNaN(ct.Rows[1].Values[0]) {
		t.Errorf("seq read, never measured: %v, want missing", ct.Rows[1].Values[0])
	}
	if len(ct.Notes) != 2 || !strings.HasPrefix(ct.Notes[1], "b: buffered") {
		t.Errorf("notes %q", ct.Notes)
	}
}

func TestWithBaselines(t *testing.T) {
	in := []string{"knfs-rdma", "rdmafs-rdma", "rdmafs-tcp@GOMAXPROCS=1", "baseline:rdmafs-tcp@GOMAXPROCS=1"}
	got := strings.Join(withBaselines(in, true), ",")
	want := "knfs-rdma,rdmafs-rdma,baseline:rdmafs-rdma,rdmafs-tcp@GOMAXPROCS=1,baseline:rdmafs-tcp@GOMAXPROCS=1"
	if got != want {
		t.Errorf("withBaselines = %s, want %s", got, want)
	}
	if got := withBaselines(in[:2], false); len(got) != 2 {
		t.Errorf("without a baseline build: %v, want the targets as they are", got)
	}
}

func TestBaselineTable(t *testing.T) {
	proc := func(cpu time.Duration, ctxsw uint64) *procstat.Process {
		return &procstat.Process{CPU: cpu, CtxSw: ctxsw}
	}
	table := map[string]map[string]result{
		"rdmafs-rdma":          {"create": {value: 300, cost: cost{ops: 100, proc: proc(60*time.Millisecond, 2000)}}},
		"baseline:rdmafs-rdma": {"create": {value: 200, cost: cost{ops: 200, proc: proc(200*time.Millisecond, 8000)}}},
	}
	var b strings.Builder
	printBaselineTable(&b, []string{"knfs-rdma", "rdmafs-rdma", "baseline:rdmafs-rdma"}, table)
	// per file: 600 µs against 1000, 20 switches against 40
	var line string
	for _, l := range strings.Split(b.String(), "\n") {
		if strings.HasPrefix(l, "create") {
			line = l
		}
	}
	if f := strings.Fields(line); len(f) < 3 || strings.Join(f[len(f)-3:], " ") != "1.50 0.60 0.50" {
		t.Errorf("create row %q, want the ratios 1.50 0.60 0.50\n%s", line, b.String())
	}
}
