// Package mountopts parses and validates the -o option list of rdmafs.
//
// The list follows nfs(5), the Linux NFS client's mount options, restricted
// to what an NFSv3 client over TCP or RPC-over-RDMA implements, and adds the
// RDMA transport tunables, the FUSE options, a fixed AUTH_SYS identity and
// the generic mount(8)/fstab words that a mount helper has to accept.
//
// One table (table.go) describes every option: its names, syntax, allowed
// values, default, help line, how it sets Options and how String renders it.
// Apply, String and Usage are all driven by that table, so an option cannot
// be parsed without also being documented and rendered.
//
// The RDMA transport's options take the types and defaults of package
// xprtrdma, which uses them (memreg= is an xprtrdma.MemReg, and
// slot_table_entries and the inline sizes default to its defaults): this
// package maps option words onto them.
//
// The package only interprets text: it never touches the network or the
// filesystem, and "not given" values (port=0, an unset fsname, ...) are left
// for the caller to resolve.
package mountopts

import (
	"fmt"
	"strconv"
	"strings"
	"unicode"

	"github.com/rdmafs/rdmafs/xprtrdma"
)

// Options is the effective set of mount options. Obtain one from Default
// and apply the -o lists to it; the zero value is not a valid set (Vers is
// 0, for one).
//
// Every bool field is false by default, so each is named after the
// non-default behaviour (Soft, NoAC, ReadOnly, ...), as the Linux client's
// NFS_MOUNT_* flags are. Options is comparable with ==.
type Options struct {
	// NFS and transport.

	Proto      Proto  // proto=: transport to the NFS server
	Port       int    // port=: NFS port; 0 = not given (portmapper for tcp, 20049 for rdma)
	MountPort  int    // mountport=: MOUNT port; 0 = not given (portmapper)
	MountProto Proto  // mountproto=: always ProtoTCP
	Vers       int    // vers=, nfsvers=: always 3
	RSize      int    // rsize=: bytes per READ, a multiple of 4096; 0 = negotiate
	WSize      int    // wsize=: bytes per WRITE, a multiple of 4096; 0 = negotiate
	Timeo      int    // timeo=: tenths of a second before the first retransmission
	Retrans    int    // retrans=: retransmissions before a soft mount gives up
	Soft       bool   // soft (true) or hard (false)
	NConnect   int    // nconnect=: transport connections to the server
	Sec        Sec    // sec=: RPC authentication flavour
	Retry      int    // retry=: minutes to keep retrying an unreachable server at mount time
	NoResvPort bool   // noresvport: connect from any source port, not a privileged one
	ACL        Choice // acl, noacl: NFSACL; auto and acl: if the server offers it

	// Attribute and lookup caching. The ac* times are in seconds.

	NoAC        bool        // noac; forces the four ac* times to 0 and Sync to true
	ACRegMin    int         // acregmin=
	ACRegMax    int         // acregmax=
	ACDirMin    int         // acdirmin=
	ACDirMax    int         // acdirmax=
	LookupCache LookupCache // lookupcache=
	NoCTO       bool        // nocto: no close-to-open consistency
	NoRdirPlus  bool        // nordirplus: READDIR instead of READDIRPLUS
	ReadOnly    bool        // ro (true) or rw (false)
	Sync        bool        // sync (true) or async (false)

	// RPC-over-RDMA tunables; accepted with any proto, used only with rdma.

	SlotTableEntries   int             // slot_table_entries=: credits to request
	MaxInlineRead      int             // max_inline_read=: bytes
	MaxInlineWrite     int             // max_inline_write=: bytes
	InlineWritePadding int             // inline_write_padding=: bytes; 0 = none
	MemReg             xprtrdma.MemReg // memreg=: memory registration strategy
	Provider           Provider        // provider=: verbs provider

	// FUSE.

	AllowOther         Choice // allow_other, noallow_other; auto: the caller decides
	DefaultPermissions Choice // default_permissions, nodefault_permissions; auto likewise
	FSName             string // fsname=; "" = not given (the caller uses server:/export)
	MaxRead            int    // max_read=: bytes; 0 = not given
	IOURing            bool   // io_uring: FUSE over io_uring where the kernel offers it; else /dev/fuse
	IOURingQDepth      int    // io_uring_q_depth=: ring entries per queue
	Debug              bool   // debug, same as -d

	// Identity: when set, every call carries this AUTH_SYS uid or gid
	// instead of the calling process's.

	FixedUID FixedID // uid=
	FixedGID FixedID // gid=

	// Generic mount flags, recorded because the FUSE mount can apply them.

	NoDev      bool  // nodev
	NoSUID     bool  // nosuid
	NoExec     bool  // noexec
	Atime      Atime // relatime, noatime or strictatime
	NoDirAtime bool  // nodiratime
	LazyTime   bool  // lazytime

	// Locking (nfs(5) lock, nolock, local_lock).

	Lock      Choice    // lock, nolock; auto: NLM if the server offers it
	LocalLock LocalLock // local_lock=: which kinds of lock stay local
}

// FixedID is an optional uid or gid: Set tells whether one was given, so that
// "not given" differs from ID 0 (root).
type FixedID struct {
	ID  uint32
	Set bool
}

// Default returns the options in effect when none are given.
func Default() Options {
	return Options{
		Proto:            ProtoTCP,
		MountProto:       ProtoTCP,
		Vers:             3,
		Timeo:            600,
		Retrans:          2,
		NConnect:         1,
		Sec:              SecSys,
		ACRegMin:         3,
		ACRegMax:         60,
		ACDirMin:         30,
		ACDirMax:         60,
		LookupCache:      LookupCacheAll,
		SlotTableEntries: xprtrdma.DefaultCredits,
		MaxInlineRead:    xprtrdma.DefaultMaxInline,
		MaxInlineWrite:   xprtrdma.DefaultMaxInline,
		MemReg:           xprtrdma.MemRegMW,
		Provider:         ProviderIBVerbs,
		Atime:            AtimeRelatime,
		IOURingQDepth:    16, // fuseuring.DefaultQueueDepth
	}
}

// Apply parses the option list s on top of o, as a further -o flag does:
// within s and across calls a later option overrides an earlier one.
// Empty items are ignored and whitespace around items, names and values is
// trimmed.
//
// Apply is all or nothing: on error it returns an *Error for the first bad
// item and leaves o unchanged. After the items are applied, Apply enforces
// what holds between options: noac zeroes the ac* times and turns on sync
// (regardless of where it stands in s, as on Linux), and a minimum ac* time
// may not exceed its maximum. Because each call settles its own list, a
// minimum raised above the current maximum must come in the same list as the
// new maximum, and ac in a later list than noac finds the ac* times at 0 and
// sync on (give them again in that list).
func (o *Options) Apply(s string) error {
	n := *o
	for item := range strings.SplitSeq(s, ",") {
		if err := n.applyItem(strings.TrimSpace(item)); err != nil {
			return err
		}
	}
	if err := n.settle(); err != nil {
		return err
	}
	*o = n
	return nil
}

// applyItem applies one trimmed item of a list.
func (o *Options) applyItem(item string) error {
	if item == "" {
		return nil // ",," and trailing commas, as mount(8) allows
	}
	name, val, hasVal := strings.Cut(item, "=")
	name, val = strings.TrimSpace(name), strings.TrimSpace(val)
	opt := lookup(name)
	if opt == nil {
		return &Error{Option: item, Msg: msgUnknown}
	}
	var msg string
	switch {
	case hasVal && opt.form == formFlag:
		msg = "takes no value (write just " + name + ")"
	case !hasVal && opt.form == formValue:
		msg = "needs a value: " + opt.allowed
	default:
		msg = opt.apply(o, name, val)
	}
	if msg != "" {
		return &Error{Option: item, Msg: msg}
	}
	return nil
}

// settle applies the implications between options and checks the
// constraints that involve more than one option.
func (o *Options) settle() error {
	// nfs(5): noac turns attribute caching off and makes writes synchronous.
	if o.NoAC {
		o.ACRegMin, o.ACRegMax, o.ACDirMin, o.ACDirMax = 0, 0, 0, 0
		o.Sync = true
	}
	if o.ACRegMin > o.ACRegMax {
		return minMaxError("acregmin", o.ACRegMin, "acregmax", o.ACRegMax)
	}
	if o.ACDirMin > o.ACDirMax {
		return minMaxError("acdirmin", o.ACDirMin, "acdirmax", o.ACDirMax)
	}
	return nil
}

func minMaxError(minName string, minVal int, maxName string, maxVal int) error {
	return &Error{
		Option: fmt.Sprintf("%s=%d", minName, minVal),
		Msg:    fmt.Sprintf("must not be greater than %s=%d", maxName, maxVal),
	}
}

// String renders the options as an nfs(5)-style list in a fixed order, the
// way /proc/mounts shows an NFS mount: every option with a value, the
// current word of each NFS flag pair (hard or soft, ac or noac, ...), and
// the FUSE and generic mount flags only when set. Options that are not
// given (port=0, an unset fsname, uid, ...) are left out. Parsing the
// result gives back the same Options.
func (o Options) String() string {
	var items []string
	for i := range table {
		if show := table[i].show; show != nil {
			if s := show(&o); s != "" {
				items = append(items, s)
			}
		}
	}
	return strings.Join(items, ",")
}

// Error reports one bad item of an option list.
type Error struct {
	Option string // the item as written, e.g. "rsize=abc"
	Msg    string // what is wrong and what is allowed
}

// msgUnknown is the Msg of an *Error for an option name nobody knows.
const msgUnknown = "unknown option"

// Error returns one line such as
//
//	option rsize=abc: must be 0 or a number from 4096 to 1048576
//	unknown option "foo" (rdmafs -h lists the options)
func (e *Error) Error() string {
	if e.Msg == msgUnknown {
		return fmt.Sprintf("unknown option %q (rdmafs -h lists the options)", e.Option)
	}
	return "option " + oneLine(e.Option) + ": " + e.Msg
}

// oneLine quotes s if it holds anything but printable characters, so that
// an error message stays on one line whatever the user typed.
func oneLine(s string) string {
	if strings.IndexFunc(s, func(r rune) bool { return !unicode.IsPrint(r) }) >= 0 {
		return strconv.Quote(s)
	}
	return s
}

// Proto is the transport of the NFS or MOUNT protocol.
type Proto int

const (
	ProtoTCP  Proto = iota // tcp
	ProtoRDMA              // rdma: RPC-over-RDMA (RFC 8166)
)

func (p Proto) String() string {
	switch p {
	case ProtoTCP:
		return "tcp"
	case ProtoRDMA:
		return "rdma"
	}
	return "Proto(" + strconv.Itoa(int(p)) + ")"
}

// Sec is the RPC authentication flavour.
type Sec int

const (
	SecSys  Sec = iota // sys: AUTH_SYS, the caller's (or the fixed) uid and gids
	SecNone            // none: AUTH_NONE
)

func (s Sec) String() string {
	switch s {
	case SecSys:
		return "sys"
	case SecNone:
		return "none"
	}
	return "Sec(" + strconv.Itoa(int(s)) + ")"
}

// Choice is an option whose default depends on more than the option list
// (who mounts, which identity the calls carry): the caller resolves
// ChoiceAuto.
type Choice int

const (
	ChoiceAuto Choice = iota // neither word given
	ChoiceOn                 // the option's word given last
	ChoiceOff                // its no- word given last
)

// Resolve returns whether the option is in effect, given what auto means.
func (c Choice) Resolve(auto bool) bool {
	switch c {
	case ChoiceOn:
		return true
	case ChoiceOff:
		return false
	}
	return auto
}

// LookupCache says which LOOKUP results are cached.
type LookupCache int

const (
	LookupCacheAll      LookupCache = iota // all: positive and negative results
	LookupCacheNone                        // none: every lookup goes to the server
	LookupCachePositive                    // positive (or pos): only names that exist
)

func (c LookupCache) String() string {
	switch c {
	case LookupCacheAll:
		return "all"
	case LookupCacheNone:
		return "none"
	case LookupCachePositive:
		return "positive"
	}
	return "LookupCache(" + strconv.Itoa(int(c)) + ")"
}

// LocalLock is which kinds of lock stay local to this client rather than
// going to the server's lock manager (nfs(5) local_lock).
type LocalLock int

const (
	LocalLockNone  LocalLock = iota // none: fcntl and flock locks go to the server
	LocalLockFlock                  // flock: flock(2) locks stay local
	LocalLockPosix                  // posix: fcntl(2) locks stay local
	LocalLockAll                    // all: every lock stays local, as with nolock
)

func (l LocalLock) String() string {
	switch l {
	case LocalLockNone:
		return "none"
	case LocalLockFlock:
		return "flock"
	case LocalLockPosix:
		return "posix"
	case LocalLockAll:
		return "all"
	}
	return "LocalLock(" + strconv.Itoa(int(l)) + ")"
}

// Remote reports whether locks of the kind flock (flock(2)) or not
// (fcntl(2), OFD) go to the server's lock manager, given whether the mount
// uses one at all.
func (l LocalLock) Remote(nlm, flock bool) bool {
	if !nlm || l == LocalLockAll {
		return false
	}
	if flock {
		return l != LocalLockFlock
	}
	return l != LocalLockPosix
}

// Provider is the verbs provider used for proto=rdma.
type Provider int

const (
	ProviderIBVerbs Provider = iota // ibverbs: RDMA hardware through libibverbs
	ProviderSoft                    // soft: software RDMA
)

func (p Provider) String() string {
	switch p {
	case ProviderIBVerbs:
		return "ibverbs"
	case ProviderSoft:
		return "soft"
	}
	return "Provider(" + strconv.Itoa(int(p)) + ")"
}

// providers are the verbs providers, in the order Usage lists them.
var providers = []Provider{ProviderIBVerbs, ProviderSoft}

// ParseProvider returns the provider that word names (as String writes
// it), for commands that take a provider outside the mount options.
func ParseProvider(word string) (Provider, bool) {
	for _, p := range providers {
		if p.String() == word {
			return p, true
		}
	}
	return 0, false
}

// Atime is the access-time update policy of the mount.
type Atime int

const (
	AtimeRelatime    Atime = iota // relatime: Linux's default
	AtimeNoatime                  // noatime: never update
	AtimeStrictatime              // strictatime: update on every access
)

func (a Atime) String() string {
	switch a {
	case AtimeRelatime:
		return "relatime"
	case AtimeNoatime:
		return "noatime"
	case AtimeStrictatime:
		return "strictatime"
	}
	return "Atime(" + strconv.Itoa(int(a)) + ")"
}
