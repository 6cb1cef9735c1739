package mountopts

import (
	"fmt"
	"strings"
)

// ManOptions documents every option for the rdmafs(8) man page, in roff
// (man macros), from the same table as Usage: one subsection per group,
// and for each option its syntax, what it does, its values, its default
// and the kernel or mount option it mirrors.
func ManOptions() string {
	var b strings.Builder
	b.WriteString(".PP\n" + Roff("Mount options are given as -o name[=value],... in the manner of nfs(5); "+
		"a later option overrides an earlier one. Each says which option of the kernel NFS client "+
		"(nfs(5)), of its RPC-over-RDMA transport (a sysctl under /proc/sys/sunrpc), of FUSE or of "+
		"mount(8) it mirrors.") + "\n")
	for g := range numGroups {
		fmt.Fprintf(&b, ".SS %s\n", Roff(g.title()))
		for i := range table {
			opt := &table[i]
			if opt.group != g {
				continue
			}
			fmt.Fprintf(&b, ".TP\n%s\n%s\n", RoffSyntax(opt.syntax), Roff(sentence(opt.help)))
			var notes []string
			if opt.values != "" {
				notes = append(notes, "Values: "+opt.values+".")
			}
			if opt.def != "" {
				notes = append(notes, "Default: "+opt.def+".")
			}
			if m := mirrorOf(opt); m != "" {
				notes = append(notes, "Mirrors: "+m+".")
			}
			if len(notes) > 0 {
				fmt.Fprintf(&b, ".br\n%s\n", Roff(strings.Join(notes, " ")))
			}
		}
	}
	return b.String()
}

// sentence ends s with a full stop. The first letter stays as it is: many
// helps begin with the name of an option ("noac: ...").
func sentence(s string) string {
	if s == "" {
		return s
	}
	if !strings.HasSuffix(s, ".") {
		s += "."
	}
	return s
}

// Roff escapes text for a roff text line: backslashes, and a leading
// period or apostrophe that would make the line a request.
func Roff(s string) string {
	s = strings.ReplaceAll(s, `\`, `\e`)
	if strings.HasPrefix(s, ".") || strings.HasPrefix(s, "'") {
		s = `\&` + s
	}
	return s
}

// RoffSyntax renders an option's or a command's syntax: literal words in
// bold, placeholders (words in capitals: N, NAME, DIR) in italics, and
// hyphens as the minus signs of command lines.
func RoffSyntax(s string) string {
	var b strings.Builder
	b.WriteString(`\fB`)
	for i := 0; i < len(s); {
		j := i
		for j < len(s) && isUpper(s[j]) {
			j++
		}
		// A placeholder is a run of capitals (with _ or digits after the
		// first) not inside a literal word: "port=N", "COUNT".
		if j > i && (i == 0 || !isWordByte(s[i-1])) {
			for j < len(s) && (isUpper(s[j]) || s[j] == '_' || s[j] >= '0' && s[j] <= '9') {
				j++
			}
			if j == len(s) || !isLowerByte(s[j]) {
				b.WriteString(`\fI` + s[i:j] + `\fB`)
				i = j
				continue
			}
		}
		switch c := s[i]; c {
		case '-':
			b.WriteString(`\-`)
		case '\\':
			b.WriteString(`\e`)
		default:
			b.WriteByte(c)
		}
		i++
	}
	b.WriteString(`\fR`)
	return strings.NewReplacer(`\fB\fI`, `\fI`, `\fB\fR`, `\fR`).Replace(b.String())
}

func isUpper(c byte) bool     { return c >= 'A' && c <= 'Z' }
func isLowerByte(c byte) bool { return c >= 'a' && c <= 'z' }
func isWordByte(c byte) bool {
	return isUpper(c) || isLowerByte(c) || c >= '0' && c <= '9' || c == '_'
}
