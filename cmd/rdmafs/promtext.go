package main

import (
	"bufio"
	"io"
	"math"
	"strconv"
	"strings"
)

// The Prometheus text exposition format (version 0.0.4), which
// Prometheus scrapes and node_exporter's textfile collector reads: per
// metric family a "# HELP" and a "# TYPE" line, then its samples, each
// "name{label="value",...} value". Every sample of a family must follow
// its TYPE line without another family in between, so samples are
// gathered into families before anything is written.

// promContentType is the Content-Type of the format over HTTP.
const promContentType = "text/plain; version=0.0.4; charset=utf-8"

// promType is a family's TYPE.
type promType string

const (
	promCounter   promType = "counter"
	promGauge     promType = "gauge"
	promHistogram promType = "histogram"
)

// label is one name="value" pair of a sample.
type label struct{ name, value string }

// promSample is one line of a family: suffix is "" or, for a histogram,
// "_bucket", "_sum" or "_count".
type promSample struct {
	suffix string
	labels []label
	value  string
}

// promFamily is one metric family.
type promFamily struct {
	name, help string
	typ        promType
	samples    []promSample
}

// promSet gathers the samples of families in the order they were first
// added.
type promSet struct {
	families []*promFamily
	byName   map[string]*promFamily
}

func newPromSet() *promSet { return &promSet{byName: make(map[string]*promFamily)} }

// family returns the family of name, making it with help and typ.
func (s *promSet) family(name, help string, typ promType) *promFamily {
	f := s.byName[name]
	if f == nil {
		f = &promFamily{name: name, help: help, typ: typ}
		s.byName[name] = f
		s.families = append(s.families, f)
	}
	return f
}

// add adds a sample of a counter or gauge.
func (s *promSet) add(name, help string, typ promType, labels []label, value string) {
	f := s.family(name, help, typ)
	f.samples = append(f.samples, promSample{labels: labels, value: value})
}

// addHistogram adds one histogram: the cumulative counts of the buckets
// whose upper bounds (in seconds) are bounds, with the count above the
// last as the +Inf bucket, and the sum in seconds.
func (s *promSet) addHistogram(name, help string, labels []label, bounds []float64, counts []uint64, sum float64) {
	f := s.family(name, help, promHistogram)
	var cum uint64
	for i, c := range counts {
		cum += c
		le := "+Inf"
		if i < len(bounds) {
			le = formatFloat(bounds[i])
		}
		f.samples = append(f.samples, promSample{suffix: "_bucket", labels: withLabel(labels, "le", le), value: formatUint(cum)})
	}
	f.samples = append(f.samples,
		promSample{suffix: "_sum", labels: labels, value: formatFloat(sum)},
		promSample{suffix: "_count", labels: labels, value: formatUint(cum)})
}

// withLabel returns labels and one more, in a slice of its own.
func withLabel(labels []label, name, value string) []label {
	return append(labels[:len(labels):len(labels)], label{name, value})
}

// write writes the families in the text format.
func (s *promSet) write(w io.Writer) error {
	b := bufio.NewWriter(w)
	for _, f := range s.families {
		b.WriteString("# HELP ")
		b.WriteString(f.name)
		b.WriteByte(' ')
		b.WriteString(escapeHelp(f.help))
		b.WriteString("\n# TYPE ")
		b.WriteString(f.name)
		b.WriteByte(' ')
		b.WriteString(string(f.typ))
		b.WriteByte('\n')
		for _, smp := range f.samples {
			b.WriteString(f.name)
			b.WriteString(smp.suffix)
			if len(smp.labels) > 0 {
				b.WriteByte('{')
				for i, l := range smp.labels {
					if i > 0 {
						b.WriteByte(',')
					}
					b.WriteString(l.name)
					b.WriteString(`="`)
					b.WriteString(escapeLabelValue(l.value))
					b.WriteByte('"')
				}
				b.WriteByte('}')
			}
			b.WriteByte(' ')
			b.WriteString(smp.value)
			b.WriteByte('\n')
		}
	}
	return b.Flush()
}

// escapeHelp escapes a HELP text: backslash and newline.
var escapeHelp = strings.NewReplacer(`\`, `\\`, "\n", `\n`).Replace

// escapeLabelValue escapes a label value: backslash, double quote and
// newline.
var escapeLabelValue = strings.NewReplacer(`\`, `\\`, `"`, `\"`, "\n", `\n`).Replace

func formatUint(v uint64) string { return strconv.FormatUint(v, 10) }

// formatFloat writes v as the format's floats: the shortest decimal that
// reads back as v, and +Inf for infinity.
func formatFloat(v float64) string {
	if math.IsInf(v, 1) {
		return "+Inf"
	}
	return strconv.FormatFloat(v, 'g', -1, 64)
}
