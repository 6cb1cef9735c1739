package main

import (
	"errors"
	"math"
	"strings"
	"testing"
)

// trimmed from fio 3.33 --output-format=json, after a warning line
const fioOut = `fio: some warning
{
  "fio version" : "fio-3.33",
  "jobs" : [
    {
      "jobname" : "knfs-tcp-seqwrite",
      "error" : 0,
      "read" : {"io_bytes" : 0, "bw_bytes" : 0, "iops" : 0.0},
      "write" : {"io_bytes" : 1073741824, "bw_bytes" : 52428800, "iops" : 50.0}
    }
  ]
}`

func TestParseFio(t *testing.T) {
	v, err := parseFio([]byte(fioOut), "write")
	if err != nil || v != 50 {
		t.Errorf("write: %v, %v; want 50 MiB/s", v, err)
	}
	v, err = parseFio([]byte(fioOut), "randwrite")
	if err != nil || v != 50 {
		t.Errorf("randwrite: %v, %v; want 50 IOPS", v, err)
	}
	if _, err := parseFio([]byte(fioOut), "read"); err == nil {
		t.Errorf("read of a write job: no error, want 'moved no data'")
	}
	if _, err := parseFio([]byte("fio: error"), "read"); err == nil {
		t.Errorf("no JSON: no error")
	}
	bad := strings.Replace(fioOut, `"error" : 0`, `"error" : 5`, 1)
	if _, err := parseFio([]byte(bad), "write"); err == nil {
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
	if !strings.Contains(lines[5], "error") {
		t.Errorf("create row %q does not show the error", lines[5])
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
	if create := ct.Rows[4]; !math.IsNaN(create.Values[0]) || create.Values[1] != 7 {
		t.Errorf("create row %+v: the failed figure must be missing", create)
	}
	if !math.IsNaN(ct.Rows[1].Values[0]) {
		t.Errorf("seq read, never measured: %v, want missing", ct.Rows[1].Values[0])
	}
	if len(ct.Notes) != 2 || !strings.HasPrefix(ct.Notes[1], "b: buffered") {
		t.Errorf("notes %q", ct.Notes)
	}
}
