package chart

import (
	"encoding/csv"
	"encoding/xml"
	"strconv"
	"strings"
	"testing"
)

// sample is a table like make bench-e2e's: a missing figure, a buffered
// one, and a note.
var sample = &Table{
	Title:   "bench-e2e <sample> & co",
	Columns: []string{"knfs-rdma", "knfs-tcp", "rdmafs-tcp", "rdmafs-rdma"},
	Rows: []Row{
		{Label: "seq write 1M", Unit: "MiB/s", Values: []float64{40, 60, 20.5, Missing}, Marks: []string{"", "", "b", ""}},
		{Label: "create empty files", Unit: "ops/s", Values: []float64{118, 48.2, 46.7, 30}},
	},
	Notes: []string{"rdmafs-rdma: mount: exit status 32"},
}

func TestWriteCSV(t *testing.T) {
	var b strings.Builder
	if err := WriteCSV(&b, sample); err != nil {
		t.Fatal(err)
	}
	recs, err := csv.NewReader(strings.NewReader(b.String())).ReadAll()
	if err != nil {
		t.Fatalf("%v:\n%s", err, b.String())
	}
	want := [][]string{
		{"workload", "unit", "knfs-rdma", "knfs-tcp", "rdmafs-tcp", "rdmafs-rdma", "marks"},
		{"seq write 1M", "MiB/s", "40", "60", "20.5", "", "rdmafs-tcp: b"},
		{"create empty files", "ops/s", "118", "48.2", "46.7", "30", ""},
	}
	if len(recs) != len(want) {
		t.Fatalf("%d records, want %d:\n%s", len(recs), len(want), b.String())
	}
	for i := range want {
		if strings.Join(recs[i], "|") != strings.Join(want[i], "|") {
			t.Errorf("record %d: %q, want %q", i, recs[i], want[i])
		}
	}
}

// svgElem is what the test reads back of the SVG.
type svgElem struct {
	Rects []struct {
		Width string `xml:"width,attr"`
		Fill  string `xml:"fill,attr"`
	} `xml:"rect"`
	Texts []string `xml:"text"`
}

func TestWriteSVG(t *testing.T) {
	var b strings.Builder
	if err := WriteSVG(&b, sample); err != nil {
		t.Fatal(err)
	}
	var s svgElem
	if err := xml.Unmarshal([]byte(b.String()), &s); err != nil {
		t.Fatalf("not well-formed XML: %v\n%s", err, b.String())
	}
	// the background, then one bar per figure: 3 + 4
	if len(s.Rects) != 1+7 {
		t.Fatalf("%d rects, want 8:\n%s", len(s.Rects), b.String())
	}
	widths := make([]float64, 0, 7)
	for _, r := range s.Rects[1:] {
		w, err := strconv.ParseFloat(r.Width, 64)
		if err != nil {
			t.Fatal(err)
		}
		widths = append(widths, w)
	}
	// Each panel's largest figure gets the full bar, the others their share.
	full := float64(width - 2*margin - labelWidth - valueRoom)
	for i, want := range []float64{40.0 / 60 * full, full, 20.5 / 60 * full, full, 48.2 / 118 * full, 46.7 / 118 * full, 30.0 / 118 * full} {
		if d := widths[i] - want; d > 0.1 || d < -0.1 {
			t.Errorf("bar %d: width %.1f, want %.1f", i, widths[i], want)
		}
	}
	all := strings.Join(s.Texts, "\n")
	for _, want := range []string{"bench-e2e <sample> & co", "seq write 1M (MiB/s)", "20.5 b", "n/a", "118", "48.2", "rdmafs-rdma: mount: exit status 32"} {
		if !strings.Contains(all, want) {
			t.Errorf("SVG texts lack %q:\n%s", want, all)
		}
	}
}

func TestWriteFiles(t *testing.T) {
	dir := t.TempDir() + "/out"
	c, s, err := WriteFiles(dir, "hostbench", sample)
	if err != nil || !strings.HasSuffix(c, "out/hostbench.csv") || !strings.HasSuffix(s, "out/hostbench.svg") {
		t.Fatalf("%q %q %v", c, s, err)
	}
}
