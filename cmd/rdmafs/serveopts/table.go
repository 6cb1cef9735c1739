package serveopts

import (
	"fmt"
	"net"
	"strconv"
	"strings"
	"time"

	"github.com/rdmafs/rdmafs/mountopts"
	"github.com/rdmafs/rdmafs/nfs3/server"
)

// An option is one entry of the table: the same entry parses the option
// (apply) and documents it (syntax, values, def, help).
type option struct {
	names   []string // the words accepted before "="; names[0] leads
	section section
	value   bool // written name=value; otherwise a bare word that takes none

	// allowed says what the value must be, in errors: "a number from 0
	// to 65535", "tcp or rdma". Empty for bare words.
	allowed string

	syntax string // how the option is written: "port=N", "ro | rw"
	values string // the values in short, "0..65535"; may be empty
	def    string // the default as Default sets it, in words
	help   string // what the option does

	// apply sets the option in o. name is the word used (of names) and
	// val the value ("" for a bare word). It returns "" or what is wrong
	// and what is allowed.
	apply func(o *Options, name, val string) string
}

// section is a group of options in the documentation.
type section int

const (
	sectionServe  section = iota // where and how serve listens
	sectionExport                // knfsd's export options
	numSections
)

func (s section) title() string {
	switch s {
	case sectionServe:
		return ""
	case sectionExport:
		return "Export options, as knfsd's (exports(5)), safe by default:"
	}
	return "section " + strconv.Itoa(int(s))
}

// table is every option of rdmafs serve, in the order the documentation
// and the unknown-option error list them. It and byName are read-only
// after package initialization.
var table = []option{
	number(sectionServe, "port", "TCP port of MOUNT and NFS; 0 picks a free one",
		0, 65535, func(o *Options) *int { return &o.Port }),
	{
		names: []string{"addr"}, section: sectionServe, value: true,
		allowed: "an IP address",
		syntax:  "addr=IP", def: Default().Addr, help: "address to listen on",
		apply: func(o *Options, _, val string) string {
			if net.ParseIP(val) == nil {
				return "must be an IP address"
			}
			o.Addr = val
			return ""
		},
	},
	flagPair(sectionServe, "ro", "rw", "ro", "refuse or allow changes",
		func(o *Options) *bool { return &o.ReadOnly }),
	number(sectionServe, "workers", "calls served at once per connection",
		1, 1024, func(o *Options) *int { return &o.Workers }),
	enum(sectionServe, "proto", "rdma: also serve NFS over RPC-over-RDMA; MOUNT stays on TCP",
		[]mountopts.Proto{mountopts.ProtoTCP, mountopts.ProtoRDMA},
		func(o *Options) *mountopts.Proto { return &o.Proto }),
	number(sectionServe, "rdmaport", "RDMA port, for proto=rdma; 0 picks a free one",
		0, 65535, func(o *Options) *int { return &o.RDMAPort }),
	enum(sectionServe, "provider", "verbs provider for proto=rdma: ibverbs (RDMA hardware) or soft (software RDMA)",
		[]mountopts.Provider{mountopts.ProviderIBVerbs, mountopts.ProviderSoft},
		func(o *Options) *mountopts.Provider { return &o.Provider }),
	flagPair(sectionServe, "lock", "nolock", "nolock",
		"nolock: serve no file locks (NLM v4 and its NSM, on the TCP port, registered with the host's rpcbind); with lock, as with knfsd, a client locks only a regular file of the export that its caller may read or owns",
		func(o *Options) *bool { return &o.NoLock }),
	graceTime(),
	{
		names: []string{"statedir"}, section: sectionServe, value: true,
		allowed: "an absolute path",
		syntax:  "statedir=DIR", def: "none: no grace period, no notice of a restart",
		help: "where the lock manager keeps its NSM state number and the clients that hold locks, " +
			"so that a restart tells them and keeps a grace period; one per serve",
		apply: func(o *Options, _, val string) string {
			if !strings.HasPrefix(val, "/") {
				return "must be an absolute path"
			}
			o.StateDir = val
			return ""
		},
	},

	flagPair(sectionExport, "secure", "insecure", "insecure",
		"calls over TCP only from ports below 1024 (root's), or from any; "+
			"RDMA connections count as secure, as in knfsd",
		func(o *Options) *bool { return &o.Export.Insecure }),
	flagPair(sectionExport, "root_squash", "no_root_squash", "no_root_squash",
		"root_squash: uid/gid 0 served as anonuid/anongid",
		func(o *Options) *bool { return &o.Export.NoRootSquash }),
	flagPair(sectionExport, "all_squash", "no_all_squash", "all_squash",
		"all_squash: everyone served as anonuid/anongid",
		func(o *Options) *bool { return &o.Export.AllSquash }),
	anonID(),
	clients(),
	number(sectionExport, "max_connections", "connections at once, TCP and RDMA together; a new one closes the least recently active",
		1, 1<<16, func(o *Options) *int { return &o.MaxConns }),
	idleTimeout(),
}

// byName indexes table by every name of every option.
var byName = func() map[string]*option {
	m := make(map[string]*option)
	for i := range table {
		for _, name := range table[i].names {
			if m[name] != nil {
				panic("serveopts: option " + name + " declared twice")
			}
			m[name] = &table[i]
		}
	}
	return m
}()

// names is every option name, in table order.
func names() []string {
	var all []string
	for i := range table {
		all = append(all, table[i].names...)
	}
	return all
}

// parseNumber returns val as a decimal number from lo to hi, or false. It
// takes what strconv.Atoi takes, a sign included, as serve always has.
func parseNumber(val string, lo, hi int) (int, bool) {
	n, err := strconv.Atoi(val)
	if err != nil || n < lo || n > hi {
		return 0, false
	}
	return n, true
}

// numeric is a name=N option (or several names sharing a range) that set
// stores; def is its default in words.
func numeric(s section, names []string, syntax, help, def string, lo, hi int, set func(o *Options, name string, n int)) option {
	allowed := fmt.Sprintf("a number from %d to %d", lo, hi)
	return option{
		names: names, section: s, value: true,
		allowed: allowed,
		syntax:  syntax, values: fmt.Sprintf("%d..%d", lo, hi), def: def, help: help,
		apply: func(o *Options, name, val string) string {
			n, ok := parseNumber(val, lo, hi)
			if !ok {
				return "must be " + allowed
			}
			set(o, name, n)
			return ""
		},
	}
}

// number is a name=N option for one int field, whose default is
// Default's.
func number(s section, name, help string, lo, hi int, field func(*Options) *int) option {
	d := Default()
	return numeric(s, []string{name}, name+"=N", help, strconv.Itoa(*field(&d)), lo, hi,
		func(o *Options, _ string, n int) { *field(o) = n })
}

// anonID is anonuid=N and anongid=N. 4294967295 is (uid_t)-1, which the
// kernel reads as "no change", so it is no identity.
func anonID() option {
	return numeric(sectionExport, []string{"anonuid", "anongid"}, "anonuid=N, anongid=N",
		"the anonymous identity: squashed callers and AUTH_NONE calls",
		strconv.Itoa(server.DefaultAnonID), 0, 1<<32-2,
		func(o *Options, name string, n int) {
			id := uint32(n)
			if name == "anonuid" {
				o.Export.AnonUID = &id
			} else {
				o.Export.AnonGID = &id
			}
		})
}

// idleTimeout is idle_timeout=SECONDS, where 0 means never.
func idleTimeout() option {
	d := Default()
	return numeric(sectionExport, []string{"idle_timeout"}, "idle_timeout=SECONDS",
		"close TCP connections that send nothing and have no call in service that long; 0 never",
		strconv.Itoa(int(d.IdleTimeout/time.Second)), 0, 1<<20,
		func(o *Options, _ string, n int) {
			o.IdleTimeout = time.Duration(n) * time.Second
			if n == 0 {
				o.IdleTimeout = -1
			}
		})
}

// graceTime is grace_time=SECONDS, where 0 means none.
func graceTime() option {
	d := Default()
	return numeric(sectionServe, []string{"grace_time"}, "grace_time=SECONDS",
		"after a restart on a statedir that records clients holding locks, grant only their reclaims that long; 0 none",
		strconv.Itoa(int(d.GraceTime/time.Second)), 0, 3600,
		func(o *Options, _ string, n int) {
			o.GraceTime = time.Duration(n) * time.Second
			if n == 0 {
				o.GraceTime = -1
			}
		})
}

// flagPair is two bare words for one bool: on sets it (one of first and
// second, the order they are listed in), the other clears it.
func flagPair(s section, first, second, on, help string, field func(*Options) *bool) option {
	off := first
	if on == first {
		off = second
	}
	d := Default()
	def := off
	if *field(&d) {
		def = on
	}
	return option{
		names: []string{first, second}, section: s,
		syntax: first + " | " + second, def: def, help: help,
		apply: func(o *Options, name, _ string) string {
			*field(o) = name == on
			return ""
		},
	}
}

// enum is name=word, a word for each value: its String, so that the type
// and the table cannot disagree.
func enum[T interface {
	comparable
	fmt.Stringer
}](s section, name, help string, values []T, field func(*Options) *T) option {
	words := make([]string, len(values))
	for i, v := range values {
		words[i] = v.String()
	}
	allowed := strings.Join(words, " or ")
	d := Default()
	return option{
		names: []string{name}, section: s, value: true,
		allowed: allowed,
		syntax:  name + "=" + strings.Join(words, "|"), def: (*field(&d)).String(), help: help,
		apply: func(o *Options, _, val string) string {
			for _, v := range values {
				if v.String() == val {
					*field(o) = v
					return ""
				}
			}
			return "must be " + allowed
		},
	}
}

// clients is clients=LIST. Each clients= adds to the list.
func clients() option {
	const allowed = "addresses or networks (CIDR) joined by +, or *"
	return option{
		names: []string{"clients"}, section: sectionExport, value: true,
		allowed: allowed,
		syntax:  "clients=LIST", def: "this host only, the address served on",
		help: "who may use the export: " + allowed + "; each clients= adds to the list",
		apply: func(o *Options, _, val string) string {
			ps, err := server.ParseClients(val)
			if err != nil {
				return err.Error()
			}
			o.Export.Clients = append(o.Export.Clients, ps...)
			return ""
		},
	}
}
