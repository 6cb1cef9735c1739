package mountopts

import (
	"fmt"
	"strings"
)

// UsageWidth is the width rdmafs -h, Usage included, wraps its lines to.
const UsageWidth = 79

// Usage documents every option, grouped, for rdmafs -h. Each option gets
// a line with its syntax, allowed values and default, and an indented line
// (wrapped if long) saying what it does.
func Usage() string {
	var b strings.Builder
	Wrap(&b, "Mount options, given as -o name[=value],... in the manner of nfs(5); "+
		"a later option overrides an earlier one.", "", "")
	for g := range numGroups {
		fmt.Fprintf(&b, "\n%s:\n", g.title())
		for i := range table {
			opt := &table[i]
			if opt.group != g {
				continue
			}
			head := opt.syntax
			if notes := ValueNotes(opt.values, opt.def); notes != "" {
				head += "  (" + notes + ")"
			}
			Wrap(&b, head, "  ", "    ")
			Wrap(&b, opt.help, "      ", "      ")
		}
	}
	return b.String()
}

// ValueNotes sums up an option's values and default as rdmafs -h shows
// them, for the mount options and serve's alike: "0..65535; default 0",
// either part alone, or "" if there is neither.
func ValueNotes(values, def string) string {
	var notes []string
	if values != "" {
		notes = append(notes, values)
	}
	if def != "" {
		notes = append(notes, "default "+def)
	}
	return strings.Join(notes, "; ")
}

// Wrap writes text to b as lines of at most UsageWidth columns, breaking at
// spaces; the first line starts with indent, the others with cont. A word
// longer than a line gets a line of its own.
func Wrap(b *strings.Builder, text, indent, cont string) {
	line := indent
	empty := true // line holds no word yet
	for _, word := range strings.Fields(text) {
		if !empty && len(line)+1+len(word) > UsageWidth {
			b.WriteString(line + "\n")
			line, empty = cont, true
		}
		if !empty {
			line += " "
		}
		line += word
		empty = false
	}
	b.WriteString(line + "\n")
}
