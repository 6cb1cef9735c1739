package serveopts

import (
	"fmt"
	"strings"
	"testing"
)

// summary is what rdmafs serve does with o, in the words a user checks:
// where it listens, the export options as serve prints them, the limits.
func summary(o *Options) string {
	var clients []string
	for _, p := range o.Export.Clients {
		clients = append(clients, p.String())
	}
	return fmt.Sprintf("addr=%s port=%d ro=%v workers=%d proto=%v rdmaport=%d provider=%v export=%s clients=%s max_connections=%d idle=%v "+
		"nolock=%v grace=%v statedir=%s",
		o.Addr, o.Port, o.ReadOnly, o.Workers, o.Proto, o.RDMAPort, o.Provider, &o.Export,
		strings.Join(clients, "+"), o.MaxConns, o.IdleTimeout, o.NoLock, o.GraceTime, o.StateDir)
}

// defaults is summary(Default()): rdmafs serve with no -o.
const defaults = "addr=127.0.0.1 port=2049 ro=false workers=8 proto=tcp rdmaport=20049 provider=ibverbs " +
	"export=secure,root_squash,anonuid=65534,anongid=65534 clients= max_connections=256 idle=6m0s " +
	"nolock=false grace=1m30s statedir="

// withDefaults returns defaults with the fields named in changes (as
// "field=value") replaced.
func withDefaults(changes ...string) string {
	fields := strings.Fields(defaults)
	for _, c := range changes {
		name, _, _ := strings.Cut(c, "=")
		for i, f := range fields {
			if strings.HasPrefix(f, name+"=") {
				fields[i] = c
			}
		}
	}
	return strings.Join(fields, " ")
}

// acceptCases are option lists serve accepts, with what they set: every
// option, at the ends of its range.
var acceptCases = []struct{ list, want string }{
	{"", defaults},
	{" , ,", defaults},
	{"port=0", withDefaults("port=0")},
	{"port=65535", withDefaults("port=65535")},
	{"port=+8", withDefaults("port=8")}, // a sign, as strconv.Atoi takes it
	{"addr=0.0.0.0", withDefaults("addr=0.0.0.0")},
	{"addr=::1", withDefaults("addr=::1")},
	{"ro", withDefaults("ro=true")},
	{"ro,rw", defaults},
	{" ro ", withDefaults("ro=true")},
	{"workers=1", withDefaults("workers=1")},
	{"workers=1024", withDefaults("workers=1024")},
	{"proto=rdma", withDefaults("proto=rdma")},
	{"proto=rdma,proto=tcp", defaults},
	{"rdmaport=0", withDefaults("rdmaport=0")},
	{"rdmaport=65535", withDefaults("rdmaport=65535")},
	{"provider=soft", withDefaults("provider=soft")},
	{"provider=soft,provider=ibverbs", defaults},
	{"insecure", withDefaults("export=insecure,root_squash,anonuid=65534,anongid=65534")},
	{"insecure,secure", defaults},
	{"no_root_squash", withDefaults("export=secure,no_root_squash,anonuid=65534,anongid=65534")},
	{"no_root_squash,root_squash", defaults},
	{"all_squash", withDefaults("export=secure,all_squash,anonuid=65534,anongid=65534")},
	{"all_squash,no_all_squash", defaults},
	{"anonuid=0,anongid=4294967294", withDefaults("export=secure,root_squash,anonuid=0,anongid=4294967294")},
	{"anongid=7", withDefaults("export=secure,root_squash,anonuid=65534,anongid=7")},
	{"clients=*", withDefaults("clients=0.0.0.0/0+::/0")},
	{"clients=10.0.0.1+192.168.1.0/24,clients=::1", withDefaults("clients=10.0.0.1/32+192.168.1.0/24+::1/128")},
	{"max_connections=1", withDefaults("max_connections=1")},
	{"max_connections=65536", withDefaults("max_connections=65536")},
	{"idle_timeout=0", withDefaults("idle=-1ns")}, // never
	{"idle_timeout=1", withDefaults("idle=1s")},
	{"idle_timeout=1048576", withDefaults("idle=291h16m16s")},
	{"nolock", withDefaults("nolock=true")},
	{"nolock,lock", defaults},
	{"grace_time=0", withDefaults("grace=-1ns")}, // none
	{"grace_time=3600", withDefaults("grace=1h0m0s")},
	{"statedir=/var/lib/rdmafs/serve", withDefaults("statedir=/var/lib/rdmafs/serve")},
}

// TestParseAccepts: every option with valid values sets what it says and
// nothing else; the defaults stand where no option is given.
func TestParseAccepts(t *testing.T) {
	for _, c := range acceptCases {
		o := Default()
		if err := Parse(c.list, &o); err != nil {
			t.Errorf("Parse(%q): %v", c.list, err)
			continue
		}
		if got := summary(&o); got != c.want {
			t.Errorf("Parse(%q):\n got %s\nwant %s", c.list, got, c.want)
		}
	}
}

// TestAcceptCasesCoverTable: the cases above name every option, so an
// option added to the table comes with its test.
func TestAcceptCasesCoverTable(t *testing.T) {
	for _, name := range names() {
		found := false
		for _, c := range acceptCases {
			for item := range strings.SplitSeq(c.list, ",") {
				n, _, _ := strings.Cut(strings.TrimSpace(item), "=")
				found = found || n == name
			}
		}
		if !found {
			t.Errorf("no accept case uses option %s", name)
		}
	}
}

// knownOptions is the list the error for an unknown option gives.
const knownOptions = "(port, addr, ro, rw, workers, proto, rdmaport, provider, lock, nolock, grace_time, statedir, secure, insecure, root_squash, " +
	"no_root_squash, all_squash, no_all_squash, anonuid, anongid, clients, max_connections, idle_timeout)"

// rejectCases are option lists serve refuses, with the error it prints.
var rejectCases = []struct{ list, err string }{
	{"bogus", `unknown serve option "bogus" ` + knownOptions},
	{"ro,nfsvers=3", `unknown serve option "nfsvers=3" ` + knownOptions},
	{"Port=1", `unknown serve option "Port=1" ` + knownOptions},
	{"port", "option port: must be a number from 0 to 65535"},
	{"port=", "option port=: must be a number from 0 to 65535"},
	{"port=65536", "option port=65536: must be a number from 0 to 65535"},
	{"port=-1", "option port=-1: must be a number from 0 to 65535"},
	{"port=0x10", "option port=0x10: must be a number from 0 to 65535"},
	{"workers=0", "option workers=0: must be a number from 1 to 1024"},
	{"workers=1025", "option workers=1025: must be a number from 1 to 1024"},
	{"rdmaport=70000", "option rdmaport=70000: must be a number from 0 to 65535"},
	{"max_connections=0", "option max_connections=0: must be a number from 1 to 65536"},
	{"max_connections=65537", "option max_connections=65537: must be a number from 1 to 65536"},
	{"idle_timeout=-1", "option idle_timeout=-1: must be a number from 0 to 1048576"},
	{"idle_timeout=1048577", "option idle_timeout=1048577: must be a number from 0 to 1048576"},
	{"anonuid=4294967295", "option anonuid=4294967295: must be a number from 0 to 4294967294"},
	{"anongid=-1", "option anongid=-1: must be a number from 0 to 4294967294"},
	{"addr=localhost", "option addr=localhost: must be an IP address"},
	{"addr", "option addr: must be an IP address"},
	{"proto=udp", "option proto=udp: must be tcp or rdma"},
	{"proto", "option proto: must be tcp or rdma"},
	{"provider=rxe", "option provider=rxe: must be ibverbs or soft"},
	{"ro=1", "option ro=1: takes no value"},
	{"rw=", "option rw=: takes no value"},
	{"insecure=yes", "option insecure=yes: takes no value"},
	{"no_root_squash=1", "option no_root_squash=1: takes no value"},
	{"all_squash=1", "option all_squash=1: takes no value"},
	{"clients=10.0.0.300", `option clients=10.0.0.300: client "10.0.0.300": not an address or network (CIDR): ` +
		`ParseAddr("10.0.0.300"): IPv4 field has value >255`},
	{"nolock=1", "option nolock=1: takes no value"},
	{"grace_time=-1", "option grace_time=-1: must be a number from 0 to 3600"},
	{"grace_time=3601", "option grace_time=3601: must be a number from 0 to 3600"},
	{"statedir=var/lib", "option statedir=var/lib: must be an absolute path"},
	{"statedir", "option statedir: must be an absolute path"},
	{"clients", "option clients: must be addresses or networks (CIDR) joined by +, or *"},
}

// TestParseRejects: a bad item is an error that names it and says what
// is allowed; an unknown option's error lists the known ones.
func TestParseRejects(t *testing.T) {
	for _, c := range rejectCases {
		o := Default()
		err := Parse(c.list, &o)
		if err == nil || err.Error() != c.err {
			t.Errorf("Parse(%q) = %v, want %s", c.list, err, c.err)
		}
	}
}

// TestDocumentedDefaults: rdmafs -h and the man page state each default
// as Default sets it, and its range as Parse checks it.
func TestDocumentedDefaults(t *testing.T) {
	want := map[string]string{
		"port=N":                       "(0..65535; default 2049)",
		"addr=IP":                      "(default 127.0.0.1)",
		"ro | rw":                      "(default rw)",
		"workers=N":                    "(1..1024; default 8)",
		"proto=tcp|rdma":               "(default tcp)",
		"rdmaport=N":                   "(0..65535; default 20049)",
		"provider=ibverbs|soft":        "(default ibverbs)",
		"secure | insecure":            "(default secure)",
		"root_squash | no_root_squash": "(default root_squash)",
		"all_squash | no_all_squash":   "(default no_all_squash)",
		"anonuid=N, anongid=N":         "(0..4294967294; default 65534)",
		"clients=LIST":                 "(default this host only, the address served on)",
		"max_connections=N":            "(1..65536; default 256)",
		"idle_timeout=SECONDS":         "(0..1048576; default 360)",
		"lock | nolock":                "(default lock)",
		"grace_time=SECONDS":           "(0..3600; default 90)",
		"statedir=DIR":                 "(default none: no grace period, no notice of a restart)",
	}
	seen := 0
	for _, sec := range Sections() {
		for _, it := range sec.Items {
			seen++
			w, ok := want[it.Syntax]
			if !ok {
				t.Errorf("item %q: not expected", it.Syntax)
				continue
			}
			if !strings.HasSuffix(it.Help, " "+w) {
				t.Errorf("item %q: help %q does not end in %q", it.Syntax, it.Help, w)
			}
		}
	}
	if seen != len(want) {
		t.Errorf("%d items documented, want %d", seen, len(want))
	}
}
