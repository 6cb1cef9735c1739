package mountopts

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"unicode"

	"github.com/rdmafs/rdmafs/xprtrdma"
)

// An option is one entry of the option table. The same entry parses and
// validates the option (apply), renders it for Options.String (show) and
// documents it for Usage (syntax, values, def, help).
type option struct {
	names []string // the words accepted before "="; names[0] leads
	group group
	form  form

	// prefix makes names[0] match every name that starts with it (x-).
	prefix bool

	// allowed says what the value may be, in error messages and Usage:
	// "a number from 0 to 65535", "tcp or rdma". Empty for flags.
	allowed string

	syntax string // Usage: how the option is written, "port=N", "hard | soft"
	values string // Usage: the allowed values in short, "0..65535"; may be empty
	def    string // Usage: the default; empty if none is worth showing
	help   string // Usage: what the option does, one sentence

	// apply sets the option in o. name is the word used (of names), val
	// the trimmed value ("" for a flag). It returns "" or the Msg of an
	// *Error: what is wrong and what is allowed.
	apply func(o *Options, name, val string) string

	// show renders the option's current state in o for Options.String,
	// or returns "" to leave it out. nil for options String never shows
	// (aliases such as actimeo, and accepted-but-ignored words).
	show func(o *Options) string
}

// form is the shape of a list item.
type form int

const (
	formFlag  form = iota // a bare word: soft
	formValue             // name=value: rsize=65536
	formAny               // either; for options ignored or rejected whatever their form
)

// group is a section of Usage.
type group int

const (
	groupNFS group = iota
	groupCache
	groupRDMA
	groupFUSE
	groupIdentity
	groupCompat
	numGroups
)

func (g group) title() string {
	switch g {
	case groupNFS:
		return "NFS and transport"
	case groupCache:
		return "Caching"
	case groupRDMA:
		return "RDMA transport (used with proto=rdma, accepted with any proto)"
	case groupFUSE:
		return "FUSE"
	case groupIdentity:
		return "Identity"
	case groupCompat:
		return "Compatibility (fstab and mount(8))"
	}
	return "group " + strconv.Itoa(int(g))
}

// table is every option rdmafs knows, in the order String renders them.
// It and byName are read-only after package initialization.
var table = []option{
	// NFS and transport.
	vers(),
	enum(groupNFS, "proto", "transport to the NFS server: TCP or RPC-over-RDMA",
		func(o *Options) *Proto { return &o.Proto },
		enumSpec[Proto]{values: []Proto{ProtoTCP, ProtoRDMA}, unsupported: []string{"udp", "udp6", "tcp6", "rdma6"}}),
	{
		names: []string{"tcp", "rdma"}, group: groupNFS, form: formFlag,
		syntax: "tcp | rdma", help: "the same as proto=tcp and proto=rdma",
		apply: func(o *Options, name, _ string) string {
			o.Proto = ProtoTCP
			if name == "rdma" {
				o.Proto = ProtoRDMA
			}
			return ""
		},
	},
	number(groupNFS, "port", "NFS server port; 0: ask the portmapper (tcp) or use 20049 (rdma)",
		numSpec{lo: 0, hi: 65535, omitZero: true}, intField(func(o *Options) *int { return &o.Port })),
	number(groupNFS, "mountport", "MOUNT server port; 0: ask the portmapper",
		numSpec{lo: 0, hi: 65535, omitZero: true}, intField(func(o *Options) *int { return &o.MountPort })),
	enum(groupNFS, "mountproto", "transport of the MOUNT protocol; only tcp is supported",
		func(o *Options) *Proto { return &o.MountProto },
		enumSpec[Proto]{values: []Proto{ProtoTCP}, invalid: "only tcp is supported"}),
	number(groupNFS, "rsize", "largest READ in bytes; 0: negotiate with the server; rounded down to a multiple of 4096",
		numSpec{lo: 4096, hi: 1 << 20, zeroOK: true, omitZero: true, roundTo: 4096},
		intField(func(o *Options) *int { return &o.RSize })),
	number(groupNFS, "wsize", "largest WRITE in bytes; 0: negotiate with the server; rounded down to a multiple of 4096",
		numSpec{lo: 4096, hi: 1 << 20, zeroOK: true, omitZero: true, roundTo: 4096},
		intField(func(o *Options) *int { return &o.WSize })),
	number(groupNFS, "timeo", "tenths of a second to wait for a reply before the first retransmission",
		numSpec{lo: 1, hi: 6000}, intField(func(o *Options) *int { return &o.Timeo })),
	number(groupNFS, "retrans", "retransmissions before a soft mount fails the call",
		numSpec{lo: 0, hi: 100}, intField(func(o *Options) *int { return &o.Retrans })),
	flagPair(groupNFS, "hard", "soft",
		"hard: retry NFS calls until the server answers; soft: fail them with EIO after retrans retransmissions",
		func(o *Options) *bool { return &o.Soft }),
	number(groupNFS, "nconnect", "number of TCP connections to the server (proto=rdma uses one)",
		numSpec{lo: 1, hi: 16}, intField(func(o *Options) *int { return &o.NConnect })),
	enum(groupNFS, "sec", "RPC authentication: sys is AUTH_SYS (uid and gids), none is AUTH_NONE",
		func(o *Options) *Sec { return &o.Sec },
		enumSpec[Sec]{values: []Sec{SecSys, SecNone}, unsupported: []string{"krb5", "krb5i", "krb5p"}}),
	flagPair(groupNFS, "resvport", "noresvport",
		"resvport: connect from a privileged source port (needs root), as servers that export with secure (knfsd's default) require",
		func(o *Options) *bool { return &o.NoResvPort }),
	choice(groupNFS, "acl", "noacl", "acl: use NFSACL if the server offers it",
		"acl: read and write POSIX ACLs with the NFSACL side protocol, as system.posix_acl_access and system.posix_acl_default, "+
			"and let the kernel check permissions against them; a server without NFSACL is used without, as the kernel client does; "+
			"noacl: no ACLs, permissions from the mode bits only",
		func(o *Options) *Choice { return &o.ACL }),
	number(groupNFS, "retry", "minutes to keep retrying the mount while the server is unreachable",
		numSpec{lo: 0, hi: 10000}, intField(func(o *Options) *int { return &o.Retry })),

	// Caching.
	flagPair(groupCache, "ac", "noac",
		"noac: no attribute caching (acregmin, acregmax, acdirmin and acdirmax become 0) and synchronous writes; wins over the ac* times wherever it stands",
		func(o *Options) *bool { return &o.NoAC }),
	number(groupCache, "acregmin", "seconds a file's attributes are cached at least",
		numSpec{lo: 0, hi: 3600}, intField(func(o *Options) *int { return &o.ACRegMin })),
	number(groupCache, "acregmax", "seconds a file's attributes are cached at most",
		numSpec{lo: 0, hi: 3600}, intField(func(o *Options) *int { return &o.ACRegMax })),
	number(groupCache, "acdirmin", "seconds a directory's attributes are cached at least",
		numSpec{lo: 0, hi: 3600}, intField(func(o *Options) *int { return &o.ACDirMin })),
	number(groupCache, "acdirmax", "seconds a directory's attributes are cached at most",
		numSpec{lo: 0, hi: 3600}, intField(func(o *Options) *int { return &o.ACDirMax })),
	number(groupCache, "actimeo", "sets acregmin, acregmax, acdirmin and acdirmax to the same value",
		numSpec{lo: 0, hi: 3600},
		intAccess{set: func(o *Options, n int) { o.ACRegMin, o.ACRegMax, o.ACDirMin, o.ACDirMax = n, n, n, n }}),
	enum(groupCache, "lookupcache", "which LOOKUP results are cached: all, none, or only names that exist",
		func(o *Options) *LookupCache { return &o.LookupCache },
		enumSpec[LookupCache]{
			values:  []LookupCache{LookupCacheAll, LookupCacheNone, LookupCachePositive},
			aliases: map[string]LookupCache{"pos": LookupCachePositive},
		}),
	flagPair(groupCache, "cto", "nocto",
		"close-to-open consistency: revalidate attributes on open, flush writes on close; nocto skips both",
		func(o *Options) *bool { return &o.NoCTO }),
	flagPair(groupCache, "rdirplus", "nordirplus",
		"read directories with READDIRPLUS, which returns attributes too; nordirplus uses READDIR",
		func(o *Options) *bool { return &o.NoRdirPlus }),
	flagPair(groupCache, "rw", "ro", "mount read-write or read-only",
		func(o *Options) *bool { return &o.ReadOnly }),
	flagPair(groupCache, "async", "sync",
		"sync: every write reaches the server before write(2) returns",
		func(o *Options) *bool { return &o.Sync }),

	// RDMA transport.
	number(groupRDMA, "slot_table_entries", "RPC-over-RDMA credits (calls in flight) to request from the server; fewer, and logged, where the RDMA device's queues hold fewer",
		numSpec{lo: 4, hi: 16384}, intField(func(o *Options) *int { return &o.SlotTableEntries })),
	number(groupRDMA, "max_inline_read", "largest reply in bytes the server may send inline rather than by RDMA Write",
		numSpec{lo: 1024, hi: 65536}, intField(func(o *Options) *int { return &o.MaxInlineRead })),
	number(groupRDMA, "max_inline_write", "largest call in bytes sent inline rather than by RDMA Read",
		numSpec{lo: 1024, hi: 65536}, intField(func(o *Options) *int { return &o.MaxInlineWrite })),
	number(groupRDMA, "inline_write_padding", "accepted for the kernel tunable's sake; no effect: padded messages (RDMA_MSGP) are obsolete (RFC 8166), as in Linux",
		numSpec{lo: 0, hi: 4096}, intField(func(o *Options) *int { return &o.InlineWritePadding })),
	enum(groupRDMA, "memreg",
		"memory registration: mw binds a memory window per call and invalidates it when the call completes; "+
			"register registers memory per call; persistent uses one pre-registered pool (trusted fabrics only)",
		func(o *Options) *xprtrdma.MemReg { return &o.MemReg },
		enumSpec[xprtrdma.MemReg]{values: []xprtrdma.MemReg{xprtrdma.MemRegMW, xprtrdma.MemRegRegister, xprtrdma.MemRegPersistent}}),
	enum(groupRDMA, "provider", "verbs provider for proto=rdma: ibverbs (RDMA hardware) or soft (software RDMA)",
		func(o *Options) *Provider { return &o.Provider },
		enumSpec[Provider]{values: providers}),

	// FUSE.
	choice(groupFUSE, "allow_other", "noallow_other", "allow_other when mounted by root, unless uid=, gid= or sec=none",
		"allow_other: every local user may use the mount, each with their own credentials, as with an NFS mount; "+
			"noallow_other: only the user who mounted",
		func(o *Options) *Choice { return &o.AllowOther }),
	choice(groupFUSE, "default_permissions", "nodefault_permissions", "default_permissions, unless uid=, gid= or sec=none",
		"default_permissions: the kernel checks permissions against the files' modes on every path walk and open, "+
			"as the NFS client does (the server checks each call too); nodefault_permissions: only the server checks, "+
			"so the server's ACLs count even without NFSACL (see acl), but names the kernel has cached skip the directories' search permission",
		func(o *Options) *Choice { return &o.DefaultPermissions }),
	fsname(),
	number(groupFUSE, "max_read", "largest FUSE read request in bytes; unset: the FUSE default",
		numSpec{lo: 4096, hi: 1 << 20, omitZero: true, def: "unset"},
		intField(func(o *Options) *int { return &o.MaxRead })),
	flagPair(groupFUSE, "noio_uring", "io_uring",
		"io_uring: where the kernel offers FUSE over io_uring (fuse module parameter enable_uring), take the requests "+
			"through per-CPU io_uring queues instead of reading /dev/fuse; noio_uring: always /dev/fuse "+
			"(the default: through the ring, a program waiting on a stopped or hung rdmafs cannot be killed, "+
			"and the ring is no faster yet)",
		func(o *Options) *bool { return &o.IOURing }),
	number(groupFUSE, "io_uring_q_depth", "ring entries per CPU queue with io_uring: requests of one CPU in flight at once",
		numSpec{lo: 1, hi: 1024},
		intField(func(o *Options) *int { return &o.IOURingQDepth })),
	flag(groupFUSE, "debug", "log every FUSE request, as -d does",
		func(o *Options) *bool { return &o.Debug }),

	// Identity.
	fixedID("uid", func(o *Options) *FixedID { return &o.FixedUID }),
	fixedID("gid", func(o *Options) *FixedID { return &o.FixedGID }),

	// Compatibility.
	choice(groupCompat, "lock", "nolock", "lock if the server's portmapper offers NLM version 4, else nolock (nolock with mountport=, which says there is no portmapper)",
		"lock: fcntl(2) and flock(2) locks are shared with every client of the server through its lock manager "+
			"(NLM version 4 over TCP; the mount fails if the server offers none); "+
			"nolock: locks stay local to this client (local_lock=all)",
		func(o *Options) *Choice { return &o.Lock }),
	enum(groupCompat, "local_lock", "which locks stay local to this client with lock: none (the default), "+
		"flock (flock(2) locks), posix (fcntl(2) locks) or all",
		func(o *Options) *LocalLock { return &o.LocalLock },
		enumSpec[LocalLock]{values: []LocalLock{LocalLockNone, LocalLockAll, LocalLockFlock, LocalLockPosix}}),
	mountFlag(groupCompat, "dev", "nodev", "nodev: device files on the mount cannot be opened",
		func(o *Options) *bool { return &o.NoDev }),
	mountFlag(groupCompat, "suid", "nosuid", "nosuid: set-user-ID and set-group-ID bits are ignored",
		func(o *Options) *bool { return &o.NoSUID }),
	mountFlag(groupCompat, "exec", "noexec", "noexec: programs on the mount cannot be executed",
		func(o *Options) *bool { return &o.NoExec }),
	atime(),
	mountFlag(groupCompat, "diratime", "nodiratime", "nodiratime: no access-time updates on directories",
		func(o *Options) *bool { return &o.NoDirAtime }),
	mountFlag(groupCompat, "nolazytime", "lazytime", "lazytime: keep timestamp updates in memory only",
		func(o *Options) *bool { return &o.LazyTime }),
	ignored(formFlag, "accepted for fstab and mount(8) and ignored (intr and nointr are ignored by Linux too)",
		"defaults", "auto", "noauto", "user", "nouser", "users", "_netdev", "nofail",
		"silent", "loud", "intr", "nointr", "fg"),
	{
		names: []string{"x-"}, prefix: true, group: groupCompat, form: formAny,
		syntax: "x-*", help: "fstab and systemd options such as x-systemd.automount: ignored",
		apply: func(*Options, string, string) string { return "" },
	},
	{
		names: []string{"comment"}, group: groupCompat, form: formValue,
		allowed: "any text without commas",
		syntax:  "comment=TEXT", help: "ignored",
		apply: func(*Options, string, string) string { return "" },
	},
	unsupported("options of nfs(5) that rdmafs does not support: rejected", "", "bg", "softerr", "softreval", "nosoftreval", "sharecache", "nosharecache",
		"fsc", "nofsc", "mounthost", "mountaddr", "mountvers",
		"namlen", "addr", "clientaddr", "minorversion", "migration", "nomigration", "max_connect",
		"xprtsec", "trunkdiscovery", "notrunkdiscovery", "write", "sloppy"),
	unsupported("the same as proto=udp: rejected, as UDP is not supported (use tcp or rdma)", " (use proto=tcp or proto=rdma)", "udp"),
}

// byName indexes table by every name of every option.
var byName = func() map[string]*option {
	m := make(map[string]*option)
	for i := range table {
		for _, name := range table[i].names {
			m[name] = &table[i]
		}
	}
	return m
}()

// lookup finds the option called name, or returns nil.
func lookup(name string) *option {
	if opt, ok := byName[name]; ok {
		return opt
	}
	for i := range table {
		if opt := &table[i]; opt.prefix && strings.HasPrefix(name, opt.names[0]) {
			return opt
		}
	}
	return nil
}

// numSpec describes the values of a numeric option.
type numSpec struct {
	lo, hi   uint64
	zeroOK   bool   // 0 is accepted besides lo..hi: it means "negotiate"
	omitZero bool   // 0 means "not given", so String leaves the option out
	roundTo  int    // non-zero: values are rounded down to a multiple of it
	def      string // Usage default when the default value says too little
	invalid  string // Msg for a bad value instead of "must be <allowed>"
}

func (s numSpec) allowed() string {
	a := fmt.Sprintf("a number from %d to %d", s.lo, s.hi)
	if s.zeroOK {
		a = "0 or " + a
	}
	return a
}

// parse returns val as a number of the option, or false. Values are
// decimal, without sign.
func (s numSpec) parse(val string) (uint64, bool) {
	n, err := strconv.ParseUint(val, 10, 64)
	switch {
	case err != nil:
		return 0, false
	case n == 0 && s.zeroOK:
		return 0, true
	case n < s.lo || n > s.hi:
		return 0, false
	}
	if s.roundTo > 0 {
		// Linux rounds rsize and wsize down to a whole page; so do we.
		n -= n % uint64(s.roundTo)
	}
	return n, true
}

// intAccess reads and writes one int field of Options.
type intAccess struct {
	get func(*Options) int
	set func(*Options, int)
}

func intField(field func(*Options) *int) intAccess {
	return intAccess{
		get: func(o *Options) int { return *field(o) },
		set: func(o *Options, n int) { *field(o) = n },
	}
}

// number is a name=N option. acc.get is nil for an option that only sets
// others (actimeo): String never shows it.
func number(g group, name, help string, spec numSpec, acc intAccess) option {
	values := fmt.Sprintf("%d..%d", spec.lo, spec.hi)
	if spec.zeroOK {
		values = "0 or " + values
	}
	def := spec.def
	if def == "" && acc.get != nil {
		d := Default()
		def = strconv.Itoa(acc.get(&d))
	}
	opt := option{
		names: []string{name}, group: g, form: formValue,
		allowed: spec.allowed(),
		syntax:  name + "=N", values: values, def: def, help: help,
		apply: func(o *Options, _, val string) string {
			n, ok := spec.parse(val)
			if !ok {
				if spec.invalid != "" {
					return spec.invalid
				}
				return "must be " + spec.allowed()
			}
			acc.set(o, int(n)) // fits: every hi is far below 1<<31
			return ""
		},
	}
	if acc.get != nil {
		opt.show = func(o *Options) string {
			n := acc.get(o)
			if n == 0 && spec.omitZero {
				return ""
			}
			return name + "=" + strconv.Itoa(n)
		}
	}
	return opt
}

// vers is vers=3 and its alias nfsvers=3.
func vers() option {
	spec := numSpec{lo: 3, hi: 3, invalid: "only NFS version 3 is supported"}
	opt := number(groupNFS, "vers", "NFS protocol version; only 3 is supported", spec,
		intField(func(o *Options) *int { return &o.Vers }))
	opt.names = append(opt.names, "nfsvers")
	opt.allowed = "3 (only NFS version 3 is supported)"
	opt.syntax, opt.values = "vers=3 | nfsvers=3", ""
	return opt
}

// enumSpec describes the words an enumerated option accepts. A value's
// word is its String(), so the type and the table cannot disagree.
type enumSpec[T comparable] struct {
	values      []T
	aliases     map[string]T // further words for some values (lookupcache=pos)
	unsupported []string     // words of nfs(5) that rdmafs rejects as not supported
	invalid     string       // Msg for any bad word instead of "must be <allowed>"
}

func enum[T interface {
	comparable
	fmt.Stringer
}](g group, name, help string, field func(*Options) *T, spec enumSpec[T]) option {
	byWord := make(map[string]T)
	var words []string
	for _, v := range spec.values {
		byWord[v.String()] = v
		words = append(words, v.String())
	}
	aliases := make([]string, 0, len(spec.aliases))
	for w, v := range spec.aliases {
		byWord[w] = v
		aliases = append(aliases, w)
	}
	slices.Sort(aliases) // map order is random; Usage must not be
	words = append(words, aliases...)
	allowed := orList(words)
	d := Default()
	return option{
		names: []string{name}, group: g, form: formValue,
		allowed: allowed,
		syntax:  name + "=" + strings.Join(words, "|"), def: (*field(&d)).String(), help: help,
		apply: func(o *Options, _, val string) string {
			v, ok := byWord[val]
			switch {
			case ok:
				*field(o) = v
				return ""
			case spec.invalid != "":
				return spec.invalid
			case slices.Contains(spec.unsupported, val):
				return val + " is not supported by rdmafs; must be " + allowed
			}
			return "must be " + allowed
		},
		show: func(o *Options) string { return name + "=" + (*field(o)).String() },
	}
}

// ignoredEnum is a name=word option that is validated and then ignored.
func ignoredEnum(g group, name, help string, accepted ...string) option {
	allowed := orList(accepted)
	return option{
		names: []string{name}, group: g, form: formValue,
		allowed: allowed,
		syntax:  name + "=" + strings.Join(accepted, "|"), help: help,
		apply: func(_ *Options, _, val string) string {
			if slices.Contains(accepted, val) {
				return ""
			}
			return "must be " + allowed
		},
	}
}

// orList joins words as "a", "a or b", or "one of a, b or c".
func orList(words []string) string {
	switch len(words) {
	case 1:
		return words[0]
	case 2:
		return words[0] + " or " + words[1]
	}
	return "one of " + strings.Join(words[:len(words)-1], ", ") + " or " + words[len(words)-1]
}

// boolWords is a boolean option written as one of two words: off clears
// the field (the default, since every bool of Options defaults to false)
// and on sets it. off may be empty for an option with no opposite word.
// String shows the current word when always is set, else only on, and only
// when set.
func boolWords(g group, off, on, help string, field func(*Options) *bool, always bool) option {
	names, syntax := []string{on}, on
	if off != "" {
		names, syntax = []string{off, on}, off+" | "+on
	}
	def := off
	if off == "" {
		def = "off"
	}
	return option{
		names: names, group: g, form: formFlag,
		syntax: syntax, def: def, help: help,
		apply: func(o *Options, name, _ string) string {
			*field(o) = name == on
			return ""
		},
		show: func(o *Options) string {
			switch {
			case *field(o):
				return on
			case always:
				return off
			}
			return ""
		},
	}
}

// choice is a pair of words, such as allow_other and noallow_other, whose
// default the caller resolves; String shows the word given last, if any.
func choice(g group, on, off, def, help string, field func(*Options) *Choice) option {
	return option{
		names: []string{on, off}, group: g, form: formFlag,
		syntax: on + " | " + off, def: def, help: help,
		apply: func(o *Options, name, _ string) string {
			*field(o) = ChoiceOff
			if name == on {
				*field(o) = ChoiceOn
			}
			return ""
		},
		show: func(o *Options) string {
			switch *field(o) {
			case ChoiceOn:
				return on
			case ChoiceOff:
				return off
			}
			return ""
		},
	}
}

// flagPair is an NFS flag pair such as hard/soft; String always shows it,
// as /proc/mounts shows hard or soft.
func flagPair(g group, off, on, help string, field func(*Options) *bool) option {
	return boolWords(g, off, on, help, field, true)
}

// mountFlag is a generic mount flag pair such as dev/nodev; String shows it
// only when set, as /proc/mounts shows nodev but never dev.
func mountFlag(g group, off, on, help string, field func(*Options) *bool) option {
	return boolWords(g, off, on, help, field, false)
}

// flag is a single word that sets a field (allow_other); String shows it
// only when set.
func flag(g group, name, help string, field func(*Options) *bool) option {
	return boolWords(g, "", name, help, field, false)
}

// fsname is the FUSE fsname=NAME option. The name ends up in a
// comma-separated mount option string and in /proc/mounts, so it can hold
// neither commas nor control characters.
func fsname() option {
	const allowed = "a non-empty name without commas or control characters"
	return option{
		names: []string{"fsname"}, group: groupFUSE, form: formValue,
		allowed: allowed,
		syntax:  "fsname=NAME", def: "unset",
		help: "source shown for the mount in /proc/mounts; unset: server:/export",
		apply: func(o *Options, _, val string) string {
			if val == "" || strings.IndexFunc(val, unicode.IsControl) >= 0 {
				return "must be " + allowed
			}
			o.FSName = val
			return ""
		},
		show: func(o *Options) string {
			if o.FSName == "" {
				return ""
			}
			return "fsname=" + o.FSName
		},
	}
}

// fixedID is uid=N or gid=N. 4294967295 is (uid_t)-1, which means "no
// change" to the kernel, so it is not a valid identity.
func fixedID(name string, field func(*Options) *FixedID) option {
	spec := numSpec{lo: 0, hi: 1<<32 - 2}
	return option{
		names: []string{name}, group: groupIdentity, form: formValue,
		allowed: spec.allowed(),
		syntax:  name + "=N", values: fmt.Sprintf("%d..%d", spec.lo, spec.hi), def: "unset",
		help: "send this " + name + " in the AUTH_SYS credential of every call; unset: the calling process's " + name,
		apply: func(o *Options, _, val string) string {
			n, ok := spec.parse(val)
			if !ok {
				return "must be " + spec.allowed()
			}
			*field(o) = FixedID{ID: uint32(n), Set: true}
			return ""
		},
		show: func(o *Options) string {
			if id := *field(o); id.Set {
				return name + "=" + strconv.FormatUint(uint64(id.ID), 10)
			}
			return ""
		},
	}
}

// atime is the access-time family of mount(8) flags.
func atime() option {
	return option{
		names:  []string{"relatime", "noatime", "strictatime", "atime", "norelatime"},
		group:  groupCompat,
		form:   formFlag,
		syntax: "relatime | noatime | strictatime | atime | norelatime",
		def:    "relatime",
		help: "when access times are updated: relatime only if the old one predates the last change or is " +
			"a day old, noatime never, strictatime always; atime undoes noatime, and norelatime alone " +
			"changes nothing (Linux defaults to relatime)",
		apply: func(o *Options, name, _ string) string {
			switch name {
			case "relatime":
				o.Atime = AtimeRelatime
			case "noatime":
				o.Atime = AtimeNoatime
			case "strictatime":
				o.Atime = AtimeStrictatime
			case "atime":
				// Clears MS_NOATIME; without it Linux uses relatime.
				if o.Atime == AtimeNoatime {
					o.Atime = AtimeRelatime
				}
			case "norelatime":
				// Clears MS_RELATIME, which Linux has implied since 2.6.30
				// unless strictatime is given: no effect.
			}
			return ""
		},
		show: func(o *Options) string { return o.Atime.String() },
	}
}

// ignored accepts names and does nothing with them.
func ignored(f form, help string, names ...string) option {
	return option{
		names: names, group: groupCompat, form: f,
		syntax: strings.Join(names, ", "), help: help,
		apply: func(*Options, string, string) string { return "" },
	}
}

// unsupported rejects options of nfs(5) that rdmafs does not implement,
// whether given a value or not; hint is appended to the error message.
func unsupported(help, hint string, names ...string) option {
	return option{
		names: names, group: groupCompat, form: formAny,
		syntax: strings.Join(names, ", "), help: help,
		apply: func(_ *Options, name, _ string) string {
			return "not supported by rdmafs" + hint
		},
	}
}
