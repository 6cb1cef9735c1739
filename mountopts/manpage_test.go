package mountopts

import (
	"strings"
	"testing"
)

// TestMirrorsCoverTable: every option says which kernel or mount option it
// mirrors, and no entry names an option the table lacks.
func TestMirrorsCoverTable(t *testing.T) {
	seen := make(map[string]bool)
	for i := range table {
		name := table[i].names[0]
		seen[name] = true
		if mirrors[name] == "" {
			t.Errorf("option %s: no entry in mirrors", name)
		}
	}
	for name := range mirrors {
		if !seen[name] {
			t.Errorf("mirrors has %s, which is no option's first name", name)
		}
	}
}

// TestManOptionsHasEveryOption: the man page's options section shows each
// option's syntax, help, values, default and mirror, as rdmafs -h shows
// all but the last.
func TestManOptionsHasEveryOption(t *testing.T) {
	man := ManOptions()
	for i := range table {
		opt := &table[i]
		for _, want := range []string{RoffSyntax(opt.syntax), Roff(sentence(opt.help)), "Mirrors: " + Roff(mirrorOf(opt)) + "."} {
			if !strings.Contains(man, want) {
				t.Errorf("option %s: man page lacks %q", opt.names[0], want)
			}
		}
		if opt.values != "" && !strings.Contains(man, "Values: "+opt.values+".") {
			t.Errorf("option %s: man page lacks its values %q", opt.names[0], opt.values)
		}
		if opt.def != "" && !strings.Contains(man, "Default: "+Roff(opt.def)+".") {
			t.Errorf("option %s: man page lacks its default %q", opt.names[0], opt.def)
		}
	}
	for g := range numGroups {
		if !strings.Contains(man, ".SS "+Roff(g.title())+"\n") {
			t.Errorf("no subsection %q", g.title())
		}
	}
}

func TestRoffSyntax(t *testing.T) {
	for in, want := range map[string]string{
		"port=N":                  `\fBport=\fIN\fR`,
		"vers=3 | nfsvers=3":      `\fBvers=3 | nfsvers=3\fR`,
		"x-*":                     `\fBx\-*\fR`,
		"rdmafs stats -i SECONDS": `\fBrdmafs stats \-i \fISECONDS\fR`,
		"SERVER:/EXPORT":          `\fISERVER\fB:/\fIEXPORT\fR`,
		"proto=tcp|rdma":          `\fBproto=tcp|rdma\fR`,
		"fsname=NAME":             `\fBfsname=\fINAME\fR`,
		"_netdev":                 `\fB_netdev\fR`,
	} {
		if got := RoffSyntax(in); got != want {
			t.Errorf("RoffSyntax(%q) = %q, want %q", in, got, want)
		}
	}
	if got := Roff(".x 'y' a\\b"); got != `\&.x 'y' a\eb` {
		t.Errorf("Roff: %q", got)
	}
}
