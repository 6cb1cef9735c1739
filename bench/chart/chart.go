// Package chart writes a benchmark's table as CSV and draws it as an SVG
// bar chart of rdmafs next to its peers, in pure Go (no gnuplot): make
// bench and make bench-e2e write both beside the table they print.
//
// Each workload (a row) gets a panel of its own, since the rows have
// different units (MiB/s, IOPS, files/s): one bar per column (client),
// scaled to the row's largest figure and labelled with the figure.
package chart

import (
	"encoding/csv"
	"fmt"
	"html"
	"io"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// Table is a benchmark's result: one row per workload, one column per
// client measured.
type Table struct {
	Title   string
	Columns []string // the clients, e.g. "rdmafs", "libnfs", "loopback"
	Rows    []Row
	Notes   []string // shown under the chart
}

// Row is one workload's figures, one per column; NaN where a column has
// no figure (not measured, or failed).
type Row struct {
	Label, Unit string
	Values      []float64
	// Marks annotate a figure ("b" for buffered I/O), one per column or
	// nil.
	Marks []string
}

// Missing is the value of a figure a column does not have.
var Missing = math.NaN()

// WriteCSV writes the table as CSV, one record per row, every record of
// the same fields: "workload,unit,COLUMN...,marks". A figure is a plain
// number, empty where the column has none; marks lists the marked
// figures of the row as "COLUMN: MARK; ...". The table's notes are not
// data and stay out.
func WriteCSV(w io.Writer, t *Table) error {
	cw := csv.NewWriter(w)
	cw.Write(append(append([]string{"workload", "unit"}, t.Columns...), "marks"))
	for _, r := range t.Rows {
		line := []string{r.Label, r.Unit}
		var marks []string
		for i, col := range t.Columns {
			v := Missing
			if i < len(r.Values) {
				v = r.Values[i]
			}
			if math.IsNaN(v) || math.IsInf(v, 0) {
				line = append(line, "")
			} else {
				line = append(line, strconv.FormatFloat(v, 'f', -1, 64))
			}
			if i < len(r.Marks) && r.Marks[i] != "" {
				marks = append(marks, col+": "+r.Marks[i])
			}
		}
		cw.Write(append(line, strings.Join(marks, "; ")))
	}
	cw.Flush()
	return cw.Error()
}

// Layout of the SVG, in pixels.
const (
	width      = 760
	margin     = 16
	labelWidth = 150 // column names left of the bars
	barHeight  = 18
	barGap     = 4
	panelHead  = 26 // the workload's title above its bars
	panelGap   = 14
	valueRoom  = 90 // room right of the longest bar for its figure
)

// colors of the columns, in order. The names of rdmafs's own columns are
// set in bold, whatever their place.
var colors = []string{"#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f"}

// WriteSVG draws the table: a title, then per row a panel with one
// horizontal bar per column, the figure (and its mark) at the bar's end,
// "n/a" where the column has no figure; the notes at the bottom.
func WriteSVG(w io.Writer, t *Table) error {
	barsPer := len(t.Columns)
	panel := panelHead + barsPer*(barHeight+barGap) + panelGap
	height := margin + 28 + len(t.Rows)*panel + len(t.Notes)*16 + margin
	var b strings.Builder
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d" font-family="sans-serif" font-size="12">`+"\n",
		width, height, width, height)
	fmt.Fprintf(&b, `<rect width="%d" height="%d" fill="white"/>`+"\n", width, height)
	fmt.Fprintf(&b, `<text x="%d" y="%d" font-size="15" font-weight="bold">%s</text>`+"\n", margin, margin+14, esc(t.Title))
	y := margin + 28
	barMax := float64(width - 2*margin - labelWidth - valueRoom)
	for _, r := range t.Rows {
		fmt.Fprintf(&b, `<text x="%d" y="%d" font-weight="bold">%s</text>`+"\n", margin, y+16, esc(r.Label+" ("+r.Unit+")"))
		top := 0.0
		for _, v := range r.Values {
			if !math.IsNaN(v) && !math.IsInf(v, 0) {
				top = math.Max(top, v)
			}
		}
		by := y + panelHead
		for i, col := range t.Columns {
			weight := "normal"
			if strings.HasPrefix(col, "rdmafs") {
				weight = "bold"
			}
			fmt.Fprintf(&b, `<text x="%d" y="%d" text-anchor="end" font-weight="%s">%s</text>`+"\n",
				margin+labelWidth-6, by+barHeight-5, weight, esc(col))
			v := Missing
			if i < len(r.Values) {
				v = r.Values[i]
			}
			if math.IsNaN(v) || math.IsInf(v, 0) || top <= 0 {
				fmt.Fprintf(&b, `<text x="%d" y="%d" fill="#888">n/a</text>`+"\n", margin+labelWidth+4, by+barHeight-5)
			} else {
				bw := math.Max(1, v/top*barMax)
				fmt.Fprintf(&b, `<rect x="%d" y="%d" width="%.1f" height="%d" fill="%s"/>`+"\n",
					margin+labelWidth, by, bw, barHeight, colors[i%len(colors)])
				text := figure(v)
				if i < len(r.Marks) && r.Marks[i] != "" {
					text += " " + r.Marks[i]
				}
				fmt.Fprintf(&b, `<text x="%.1f" y="%d">%s</text>`+"\n",
					float64(margin+labelWidth)+bw+4, by+barHeight-5, esc(text))
			}
			by += barHeight + barGap
		}
		y += panel
	}
	for _, n := range t.Notes {
		fmt.Fprintf(&b, `<text x="%d" y="%d" fill="#444">%s</text>`+"\n", margin, y+10, esc(n))
		y += 16
	}
	b.WriteString("</svg>\n")
	_, err := io.WriteString(w, b.String())
	return err
}

// figure formats a value with three significant digits or more.
func figure(v float64) string {
	switch {
	case v >= 100:
		return strconv.FormatFloat(v, 'f', 0, 64)
	case v >= 10:
		return strconv.FormatFloat(v, 'f', 1, 64)
	}
	return strconv.FormatFloat(v, 'f', 2, 64)
}

func esc(s string) string { return html.EscapeString(s) }

// WriteFiles writes the table as DIR/NAME.csv and DIR/NAME.svg, creating
// DIR, and returns the two paths.
func WriteFiles(dir, name string, t *Table) (csvPath, svgPath string, err error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", "", err
	}
	csvPath, svgPath = filepath.Join(dir, name+".csv"), filepath.Join(dir, name+".svg")
	for path, write := range map[string]func(io.Writer, *Table) error{csvPath: WriteCSV, svgPath: WriteSVG} {
		f, err := os.Create(path)
		if err != nil {
			return "", "", err
		}
		err = write(f, t)
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return "", "", fmt.Errorf("%s: %w", path, err)
		}
	}
	return csvPath, svgPath, nil
}
