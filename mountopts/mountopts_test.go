package mountopts

import (
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"unicode"

	"github.com/rdmafs/rdmafs/xprtrdma"
)

// TestDefault spells out every default, so that a change to one is
// deliberate.
func TestDefault(t *testing.T) {
	want := Options{
		Proto:              ProtoTCP,
		Port:               0,
		MountPort:          0,
		MountProto:         ProtoTCP,
		Vers:               3,
		RSize:              0,
		WSize:              0,
		Timeo:              600,
		Retrans:            2,
		Soft:               false,
		NConnect:           1,
		Sec:                SecSys,
		Retry:              0,
		NoAC:               false,
		ACRegMin:           3,
		ACRegMax:           60,
		ACDirMin:           30,
		ACDirMax:           60,
		LookupCache:        LookupCacheAll,
		NoCTO:              false,
		NoRdirPlus:         false,
		ReadOnly:           false,
		Sync:               false,
		SlotTableEntries:   128,
		MaxInlineRead:      4096,
		MaxInlineWrite:     4096,
		InlineWritePadding: 0,
		MemReg:             xprtrdma.MemRegMW,
		Provider:           ProviderIBVerbs,
		AllowOther:         ChoiceAuto,
		DefaultPermissions: ChoiceAuto,
		FSName:             "",
		MaxRead:            0,
		IOURing:            false,
		IOURingQDepth:      16,
		Debug:              false,
		FixedUID:           FixedID{},
		FixedGID:           FixedID{},
		NoDev:              false,
		NoSUID:             false,
		NoExec:             false,
		Atime:              AtimeRelatime,
		NoDirAtime:         false,
		LazyTime:           false,
	}
	if got := Default(); got != want {
		t.Errorf("Default() = %+v\nwant        %+v", got, want)
	}
	for _, s := range []string{"", ",", " , ,, ", "defaults"} {
		got, err := parse(s)
		if err != nil || got != want {
			t.Errorf("parse(%q) = %+v, %v; want the defaults", s, got, err)
		}
	}
}

// acceptCases are lists that parse; want changes Default() into the result.
var acceptCases = []struct {
	in   string
	want func(o *Options)
}{
	// Whitespace and empty items.
	{" soft , port = 2049 ,", func(o *Options) { o.Soft = true; o.Port = 2049 }},
	{",,rw,,", func(o *Options) {}},

	// NFS and transport.
	{"proto=tcp", func(o *Options) {}},
	{"proto=rdma", func(o *Options) { o.Proto = ProtoRDMA }},
	{"rdma", func(o *Options) { o.Proto = ProtoRDMA }},
	{"tcp", func(o *Options) {}},
	{"proto=rdma,tcp", func(o *Options) {}},
	{"tcp,proto=rdma", func(o *Options) { o.Proto = ProtoRDMA }},
	{"port=0", func(o *Options) {}},
	{"port=20049", func(o *Options) { o.Port = 20049 }},
	{"port=65535", func(o *Options) { o.Port = 65535 }},
	{"mountport=0", func(o *Options) {}},
	{"mountport=65535", func(o *Options) { o.MountPort = 65535 }},
	{"mountproto=tcp", func(o *Options) {}},
	{"vers=3", func(o *Options) {}},
	{"nfsvers=3", func(o *Options) {}},
	{"rsize=0", func(o *Options) {}},
	{"rsize=4096", func(o *Options) { o.RSize = 4096 }},
	{"rsize=4097", func(o *Options) { o.RSize = 4096 }},
	{"rsize=65535", func(o *Options) { o.RSize = 61440 }},
	{"rsize=1048575", func(o *Options) { o.RSize = 1044480 }},
	{"rsize=1048576", func(o *Options) { o.RSize = 1048576 }},
	{"rsize=01048576", func(o *Options) { o.RSize = 1048576 }},
	{"wsize=0", func(o *Options) {}},
	{"wsize=4096", func(o *Options) { o.WSize = 4096 }},
	{"wsize=8191", func(o *Options) { o.WSize = 4096 }},
	{"wsize=1048576", func(o *Options) { o.WSize = 1048576 }},
	{"timeo=1", func(o *Options) { o.Timeo = 1 }},
	{"timeo=6000", func(o *Options) { o.Timeo = 6000 }},
	{"retrans=0", func(o *Options) { o.Retrans = 0 }},
	{"retrans=100", func(o *Options) { o.Retrans = 100 }},
	{"hard", func(o *Options) {}},
	{"soft", func(o *Options) { o.Soft = true }},
	{"noresvport", func(o *Options) { o.NoResvPort = true }},
	{"noresvport,resvport", func(o *Options) {}},
	{"soft,hard", func(o *Options) {}},
	{"hard,soft", func(o *Options) { o.Soft = true }},
	{"nconnect=1", func(o *Options) {}},
	{"nconnect=16", func(o *Options) { o.NConnect = 16 }},
	{"sec=sys", func(o *Options) {}},
	{"sec=none", func(o *Options) { o.Sec = SecNone }},
	{"retry=0", func(o *Options) {}},
	{"retry=10000", func(o *Options) { o.Retry = 10000 }},

	// Caching.
	{"ac", func(o *Options) {}},
	{"noac", func(o *Options) { o.NoAC = true; zeroAC(o); o.Sync = true }},
	{"noac,async", func(o *Options) { o.NoAC = true; zeroAC(o); o.Sync = true }},
	{"noac,acregmin=5,actimeo=9", func(o *Options) { o.NoAC = true; zeroAC(o); o.Sync = true }},
	{"acregmin=5,noac", func(o *Options) { o.NoAC = true; zeroAC(o); o.Sync = true }},
	{"noac,ac", func(o *Options) {}},
	{"noac,ac,acregmin=7", func(o *Options) { o.ACRegMin = 7 }},
	{"acregmin=0", func(o *Options) { o.ACRegMin = 0 }},
	{"acregmin=60", func(o *Options) { o.ACRegMin = 60 }},
	{"acregmax=3", func(o *Options) { o.ACRegMax = 3 }},
	{"acregmax=3600", func(o *Options) { o.ACRegMax = 3600 }},
	{"acdirmin=0", func(o *Options) { o.ACDirMin = 0 }},
	{"acdirmax=3600", func(o *Options) { o.ACDirMax = 3600 }},
	{"acregmax=3600,acregmin=3600", func(o *Options) { o.ACRegMin, o.ACRegMax = 3600, 3600 }},
	{"actimeo=0", func(o *Options) { zeroAC(o) }},
	{"actimeo=3600", func(o *Options) { o.ACRegMin, o.ACRegMax, o.ACDirMin, o.ACDirMax = 3600, 3600, 3600, 3600 }},
	{"actimeo=10,acregmax=20", func(o *Options) { o.ACRegMin, o.ACRegMax, o.ACDirMin, o.ACDirMax = 10, 20, 10, 10 }},
	{"acregmax=20,actimeo=10", func(o *Options) { o.ACRegMin, o.ACRegMax, o.ACDirMin, o.ACDirMax = 10, 10, 10, 10 }},
	{"lookupcache=all", func(o *Options) {}},
	{"lookupcache=none", func(o *Options) { o.LookupCache = LookupCacheNone }},
	{"lookupcache=pos", func(o *Options) { o.LookupCache = LookupCachePositive }},
	{"lookupcache=positive", func(o *Options) { o.LookupCache = LookupCachePositive }},
	{"cto", func(o *Options) {}},
	{"nocto", func(o *Options) { o.NoCTO = true }},
	{"rdirplus", func(o *Options) {}},
	{"nordirplus", func(o *Options) { o.NoRdirPlus = true }},
	{"rw", func(o *Options) {}},
	{"ro", func(o *Options) { o.ReadOnly = true }},
	{"ro,rw", func(o *Options) {}},
	{"async", func(o *Options) {}},
	{"sync", func(o *Options) { o.Sync = true }},

	// RDMA transport.
	{"slot_table_entries=4", func(o *Options) { o.SlotTableEntries = 4 }},
	{"slot_table_entries=16384", func(o *Options) { o.SlotTableEntries = 16384 }},
	{"max_inline_read=1024", func(o *Options) { o.MaxInlineRead = 1024 }},
	{"max_inline_read=65536", func(o *Options) { o.MaxInlineRead = 65536 }},
	{"max_inline_write=1024", func(o *Options) { o.MaxInlineWrite = 1024 }},
	{"max_inline_write=65536", func(o *Options) { o.MaxInlineWrite = 65536 }},
	{"inline_write_padding=0", func(o *Options) {}},
	{"inline_write_padding=4096", func(o *Options) { o.InlineWritePadding = 4096 }},
	{"memreg=mw", func(o *Options) {}},
	{"memreg=register", func(o *Options) { o.MemReg = xprtrdma.MemRegRegister }},
	{"memreg=persistent", func(o *Options) { o.MemReg = xprtrdma.MemRegPersistent }},
	{"provider=ibverbs", func(o *Options) {}},
	{"provider=soft", func(o *Options) { o.Provider = ProviderSoft }},
	{"proto=tcp,memreg=persistent", func(o *Options) { o.MemReg = xprtrdma.MemRegPersistent }},

	{"acl", func(o *Options) { o.ACL = ChoiceOn }},
	{"noacl", func(o *Options) { o.ACL = ChoiceOff }},
	{"noacl,acl", func(o *Options) { o.ACL = ChoiceOn }},

	// FUSE.
	{"allow_other", func(o *Options) { o.AllowOther = ChoiceOn }},
	{"noallow_other", func(o *Options) { o.AllowOther = ChoiceOff }},
	{"allow_other,noallow_other", func(o *Options) { o.AllowOther = ChoiceOff }},
	{"default_permissions", func(o *Options) { o.DefaultPermissions = ChoiceOn }},
	{"nodefault_permissions", func(o *Options) { o.DefaultPermissions = ChoiceOff }},
	{"fsname=srv:/export", func(o *Options) { o.FSName = "srv:/export" }},
	{"fsname=a=b", func(o *Options) { o.FSName = "a=b" }},
	{"fsname= two words ", func(o *Options) { o.FSName = "two words" }},
	{"max_read=4096", func(o *Options) { o.MaxRead = 4096 }},
	{"max_read=1048576", func(o *Options) { o.MaxRead = 1048576 }},
	{"io_uring", func(o *Options) { o.IOURing = true }},
	{"noio_uring", func(o *Options) {}},
	{"io_uring_q_depth=1", func(o *Options) { o.IOURingQDepth = 1 }},
	{"io_uring_q_depth=1024", func(o *Options) { o.IOURingQDepth = 1024 }},
	{"debug", func(o *Options) { o.Debug = true }},

	// Identity.
	{"uid=0", func(o *Options) { o.FixedUID = FixedID{ID: 0, Set: true} }},
	{"uid=4294967294", func(o *Options) { o.FixedUID = FixedID{ID: 4294967294, Set: true} }},
	{"gid=0", func(o *Options) { o.FixedGID = FixedID{ID: 0, Set: true} }},
	{"uid=1000,gid=100", func(o *Options) { o.FixedUID = FixedID{1000, true}; o.FixedGID = FixedID{100, true} }},

	// Compatibility.
	{"defaults,auto,noauto,user,nouser,users,_netdev,nofail,silent,loud,intr,nointr", func(o *Options) {}},
	{"nolock", func(o *Options) { o.Lock = ChoiceOff }},
	{"lock", func(o *Options) { o.Lock = ChoiceOn }},
	{"nolock,lock", func(o *Options) { o.Lock = ChoiceOn }},
	{"local_lock=none", func(o *Options) {}},
	{"local_lock=all", func(o *Options) { o.LocalLock = LocalLockAll }},
	{"local_lock=flock", func(o *Options) { o.LocalLock = LocalLockFlock }},
	{"local_lock=posix", func(o *Options) { o.LocalLock = LocalLockPosix }},
	{"nodev", func(o *Options) { o.NoDev = true }},
	{"nodev,dev", func(o *Options) {}},
	{"nosuid", func(o *Options) { o.NoSUID = true }},
	{"nosuid,suid", func(o *Options) {}},
	{"noexec", func(o *Options) { o.NoExec = true }},
	{"noexec,exec", func(o *Options) {}},
	{"noatime", func(o *Options) { o.Atime = AtimeNoatime }},
	{"strictatime", func(o *Options) { o.Atime = AtimeStrictatime }},
	{"noatime,relatime", func(o *Options) {}},
	{"noatime,atime", func(o *Options) {}},
	{"strictatime,atime", func(o *Options) { o.Atime = AtimeStrictatime }},
	{"norelatime", func(o *Options) {}},
	{"noatime,norelatime", func(o *Options) { o.Atime = AtimeNoatime }},
	{"nodiratime", func(o *Options) { o.NoDirAtime = true }},
	{"nodiratime,diratime", func(o *Options) {}},
	{"lazytime", func(o *Options) { o.LazyTime = true }},
	{"lazytime,nolazytime", func(o *Options) {}},
	{"x-systemd.automount,x-systemd.mount-timeout=30,x-", func(o *Options) {}},
	{"comment=anything at all,comment=", func(o *Options) {}},

	// A later option wins.
	{"port=1,port=2", func(o *Options) { o.Port = 2 }},
	{"fsname=a,fsname=b", func(o *Options) { o.FSName = "b" }},
	{"uid=5,uid=6", func(o *Options) { o.FixedUID = FixedID{6, true} }},
}

func zeroAC(o *Options) { o.ACRegMin, o.ACRegMax, o.ACDirMin, o.ACDirMax = 0, 0, 0, 0 }

// parse is what rdmafs does with one -o list: the defaults, then Apply.
func parse(s string) (Options, error) {
	o := Default()
	err := o.Apply(s)
	return o, err
}

func TestAccept(t *testing.T) {
	for _, tc := range acceptCases {
		want := Default()
		tc.want(&want)
		got, err := parse(tc.in)
		if err != nil {
			t.Errorf("parse(%q): %v", tc.in, err)
			continue
		}
		if got != want {
			t.Errorf("parse(%q):\n got %+v\nwant %+v", tc.in, got, want)
		}
	}
}

// TestEveryFieldSettable checks that acceptCases set every field of Options
// to something other than its default, except the fields that have only one
// valid value, so that no field lacks an option or a test.
func TestEveryFieldSettable(t *testing.T) {
	def := reflect.ValueOf(Default())
	changed := map[string]bool{"Vers": true, "MountProto": true}
	for _, tc := range acceptCases {
		o, err := parse(tc.in)
		if err != nil {
			continue // TestAccept reports it
		}
		v := reflect.ValueOf(o)
		for i := range v.NumField() {
			if !v.Field(i).Equal(def.Field(i)) {
				changed[v.Type().Field(i).Name] = true
			}
		}
	}
	for f := range reflect.TypeFor[Options]().Fields() {
		if !changed[f.Name] {
			t.Errorf("no accepted test case changes Options.%s", f.Name)
		}
	}
}

func TestReject(t *testing.T) {
	const unknownHint = " (rdmafs -h lists the options)"
	tests := []struct {
		in, want string
	}{
		// Unknown options, including case and near misses.
		{"foo", `unknown option "foo"` + unknownHint},
		{"foo=bar", `unknown option "foo=bar"` + unknownHint},
		{"Soft", `unknown option "Soft"` + unknownHint},
		{"=5", `unknown option "=5"` + unknownHint},
		{"nodefaults", `unknown option "nodefaults"` + unknownHint},
		{"soft,bogus,port=x", `unknown option "bogus"` + unknownHint}, // the first error wins
		{"fsname=x,a\nb", `unknown option "a\nb"` + unknownHint},

		// Bad values and values out of range, at both ends.
		{"rsize=abc", "option rsize=abc: must be 0 or a number from 4096 to 1048576"},
		{"rsize=", "option rsize=: must be 0 or a number from 4096 to 1048576"},
		{"rsize=-1", "option rsize=-1: must be 0 or a number from 4096 to 1048576"},
		{"rsize=+4096", "option rsize=+4096: must be 0 or a number from 4096 to 1048576"},
		{"rsize=0x1000", "option rsize=0x1000: must be 0 or a number from 4096 to 1048576"},
		{"rsize=4095", "option rsize=4095: must be 0 or a number from 4096 to 1048576"},
		{"rsize=1048577", "option rsize=1048577: must be 0 or a number from 4096 to 1048576"},
		{"rsize=99999999999999999999", "option rsize=99999999999999999999: must be 0 or a number from 4096 to 1048576"},
		{"wsize=4095", "option wsize=4095: must be 0 or a number from 4096 to 1048576"},
		{"wsize=1048577", "option wsize=1048577: must be 0 or a number from 4096 to 1048576"},
		{"port=65536", "option port=65536: must be a number from 0 to 65535"},
		{"port=-1", "option port=-1: must be a number from 0 to 65535"},
		{"mountport=65536", "option mountport=65536: must be a number from 0 to 65535"},
		{"timeo=0", "option timeo=0: must be a number from 1 to 6000"},
		{"timeo=6001", "option timeo=6001: must be a number from 1 to 6000"},
		{"retrans=101", "option retrans=101: must be a number from 0 to 100"},
		{"nconnect=0", "option nconnect=0: must be a number from 1 to 16"},
		{"nconnect=17", "option nconnect=17: must be a number from 1 to 16"},
		{"retry=10001", "option retry=10001: must be a number from 0 to 10000"},
		{"acregmin=3601", "option acregmin=3601: must be a number from 0 to 3600"},
		{"acregmax=3601", "option acregmax=3601: must be a number from 0 to 3600"},
		{"acdirmin=3601", "option acdirmin=3601: must be a number from 0 to 3600"},
		{"acdirmax=3601", "option acdirmax=3601: must be a number from 0 to 3600"},
		{"actimeo=3601", "option actimeo=3601: must be a number from 0 to 3600"},
		{"slot_table_entries=3", "option slot_table_entries=3: must be a number from 4 to 16384"},
		{"slot_table_entries=16385", "option slot_table_entries=16385: must be a number from 4 to 16384"},
		{"max_inline_read=1023", "option max_inline_read=1023: must be a number from 1024 to 65536"},
		{"max_inline_read=65537", "option max_inline_read=65537: must be a number from 1024 to 65536"},
		{"max_inline_write=1023", "option max_inline_write=1023: must be a number from 1024 to 65536"},
		{"max_inline_write=65537", "option max_inline_write=65537: must be a number from 1024 to 65536"},
		{"inline_write_padding=4097", "option inline_write_padding=4097: must be a number from 0 to 4096"},
		{"max_read=0", "option max_read=0: must be a number from 4096 to 1048576"},
		{"io_uring_q_depth=0", "option io_uring_q_depth=0: must be a number from 1 to 1024"},
		{"max_read=4095", "option max_read=4095: must be a number from 4096 to 1048576"},
		{"max_read=1048577", "option max_read=1048577: must be a number from 4096 to 1048576"},
		{"uid=4294967295", "option uid=4294967295: must be a number from 0 to 4294967294"},
		{"uid=abc", "option uid=abc: must be a number from 0 to 4294967294"},
		{"gid=-1", "option gid=-1: must be a number from 0 to 4294967294"},
		{"gid=4294967295", "option gid=4294967295: must be a number from 0 to 4294967294"},

		// Bad words.
		{"proto=foo", "option proto=foo: must be tcp or rdma"},
		{"proto=TCP", "option proto=TCP: must be tcp or rdma"},
		{"sec=foo", "option sec=foo: must be sys or none"},
		{"lookupcache=neg", "option lookupcache=neg: must be one of all, none, positive or pos"},
		{"memreg=fmr", "option memreg=fmr: must be one of mw, register or persistent"},
		{"provider=rxe", "option provider=rxe: must be ibverbs or soft"},
		{"local_lock=bsd", "option local_lock=bsd: must be one of none, all, flock or posix"},
		{"fsname=", "option fsname=: must be a non-empty name without commas or control characters"},
		{"fsname=a\tb", `option "fsname=a\tb": must be a non-empty name without commas or control characters`},

		// Version and protocol.
		{"vers=4", "option vers=4: only NFS version 3 is supported"},
		{"vers=2", "option vers=2: only NFS version 3 is supported"},
		{"vers=4.1", "option vers=4.1: only NFS version 3 is supported"},
		{"nfsvers=4", "option nfsvers=4: only NFS version 3 is supported"},
		{"mountproto=udp", "option mountproto=udp: only tcp is supported"},
		{"mountproto=rdma", "option mountproto=rdma: only tcp is supported"},

		// Flags given a value, values given none.
		{"soft=1", "option soft=1: takes no value (write just soft)"},
		{"noac=", "option noac=: takes no value (write just noac)"},
		{"defaults=yes", "option defaults=yes: takes no value (write just defaults)"},
		{"nolock=1", "option nolock=1: takes no value (write just nolock)"},
		{"rdma=1", "option rdma=1: takes no value (write just rdma)"},
		{"port", "option port: needs a value: a number from 0 to 65535"},
		{"rsize", "option rsize: needs a value: 0 or a number from 4096 to 1048576"},
		{"proto", "option proto: needs a value: tcp or rdma"},
		{"vers", "option vers: needs a value: 3 (only NFS version 3 is supported)"},
		{"fsname", "option fsname: needs a value: a non-empty name without commas or control characters"},
		{"uid", "option uid: needs a value: a number from 0 to 4294967294"},
		{"comment", "option comment: needs a value: any text without commas"},
		{"local_lock", "option local_lock: needs a value: one of none, all, flock or posix"},

		// Not supported.
		{"proto=udp", "option proto=udp: udp is not supported by rdmafs; must be tcp or rdma"},
		{"proto=tcp6", "option proto=tcp6: tcp6 is not supported by rdmafs; must be tcp or rdma"},
		{"udp", "option udp: not supported by rdmafs (use proto=tcp or proto=rdma)"},
		{"sec=krb5p", "option sec=krb5p: krb5p is not supported by rdmafs; must be sys or none"},
		{"fsc", "option fsc: not supported by rdmafs"},
		{"fsc=tag", "option fsc=tag: not supported by rdmafs"},
		{"nosharecache", "option nosharecache: not supported by rdmafs"},
		{"bg", "option bg: not supported by rdmafs"},
		{"mountvers=3", "option mountvers=3: not supported by rdmafs"},

		// Minimum above maximum, named with both options.
		{"acregmin=61", "option acregmin=61: must not be greater than acregmax=60"},
		{"acregmax=2", "option acregmin=3: must not be greater than acregmax=2"},
		{"acdirmin=61", "option acdirmin=61: must not be greater than acdirmax=60"},
		{"acdirmax=29", "option acdirmin=30: must not be greater than acdirmax=29"},
		{"actimeo=10,acregmin=20", "option acregmin=20: must not be greater than acregmax=10"},
	}
	for _, tc := range tests {
		o, err := parse(tc.in)
		if err == nil {
			t.Errorf("parse(%q) = %v, want error %q", tc.in, o, tc.want)
			continue
		}
		if err.Error() != tc.want {
			t.Errorf("parse(%q) error\n got %q\nwant %q", tc.in, err, tc.want)
		}
		checkError(t, tc.in, err)
		if o != Default() {
			t.Errorf("parse(%q) failed but changed the defaults to %+v", tc.in, o)
		}
	}
}

// checkError checks what every error of Apply must be: an *Error with both
// fields set, whose message is one line without a program-name prefix.
func checkError(t *testing.T, in string, err error) {
	t.Helper()
	var e *Error
	if !errors.As(err, &e) {
		t.Errorf("parse(%q) error %v is a %T, want *Error", in, err, err)
		return
	}
	if e.Option == "" || e.Msg == "" {
		t.Errorf("parse(%q) error %#v has an empty field", in, e)
	}
	msg := err.Error()
	if strings.IndexFunc(msg, func(r rune) bool { return !unicode.IsPrint(r) }) >= 0 {
		t.Errorf("parse(%q) error %q is not one printable line", in, msg)
	}
	if strings.HasPrefix(msg, "rdmafs") {
		t.Errorf("parse(%q) error %q carries a program name", in, msg)
	}
}

func TestErrorFields(t *testing.T) {
	_, err := parse("soft, rsize = abc ")
	want := &Error{Option: "rsize = abc", Msg: "must be 0 or a number from 4096 to 1048576"}
	var e *Error
	if !errors.As(err, &e) || *e != *want {
		t.Errorf("parse error = %#v, want %#v", err, want)
	}
}

func TestApply(t *testing.T) {
	o := Default()
	for _, s := range []string{"proto=rdma,port=1", "soft", "port=2,nconnect=4"} {
		if err := o.Apply(s); err != nil {
			t.Fatalf("Apply(%q): %v", s, err)
		}
	}
	want := Default()
	want.Proto, want.Port, want.Soft, want.NConnect = ProtoRDMA, 2, true, 4
	if o != want {
		t.Errorf("after three Applies: %+v\nwant %+v", o, want)
	}

	// A failed Apply changes nothing, not even the items before the bad one.
	for _, bad := range []string{"port=3,nconnect=99", "port=3,foo", "acregmin=100"} {
		if err := o.Apply(bad); err == nil {
			t.Fatalf("Apply(%q) succeeded", bad)
		}
		if o != want {
			t.Errorf("Apply(%q) failed but changed the options to %+v", bad, o)
		}
	}

	// A minimum raised above the current maximum needs the new maximum in
	// the same list.
	if err := o.Apply("acregmin=100,acregmax=200"); err != nil || o.ACRegMin != 100 || o.ACRegMax != 200 {
		t.Errorf("Apply(acregmin=100,acregmax=200) = %v; acregmin=%d acregmax=%d", err, o.ACRegMin, o.ACRegMax)
	}
}

func TestStringDefault(t *testing.T) {
	const want = "vers=3,proto=tcp,mountproto=tcp,timeo=600,retrans=2,hard,nconnect=1,sec=sys,resvport,retry=0," +
		"ac,acregmin=3,acregmax=60,acdirmin=30,acdirmax=60,lookupcache=all,cto,rdirplus,rw,async," +
		"slot_table_entries=128,max_inline_read=4096,max_inline_write=4096,inline_write_padding=0," +
		"memreg=mw,provider=ibverbs,noio_uring,io_uring_q_depth=16,local_lock=none,relatime"
	if got := Default().String(); got != want {
		t.Errorf("Default().String() =\n%s\nwant\n%s", got, want)
	}
}

func TestStringRoundTrip(t *testing.T) {
	lists := []string{
		"",
		"proto=rdma,port=20049,mountport=635,rsize=1048576,wsize=65537,timeo=10,retrans=0,soft,nconnect=8,sec=none,retry=5",
		"noac,lookupcache=pos,nocto,nordirplus,ro",
		"actimeo=7,sync,lookupcache=none",
		"slot_table_entries=4,max_inline_read=1024,max_inline_write=65536,inline_write_padding=64,memreg=persistent,provider=soft",
		"allow_other,default_permissions,fsname=server:/export/home,max_read=131072,debug",
		"uid=0",
		"gid=4294967294",
		"uid=1000,gid=1000",
		"nodev,nosuid,noexec,noatime,nodiratime,lazytime",
		"strictatime",
		"fsname=a=b c",
	}
	for _, s := range lists {
		o, err := parse(s)
		if err != nil {
			t.Fatalf("parse(%q): %v", s, err)
		}
		str := o.String()
		back, err := parse(str)
		if err != nil {
			t.Errorf("parse(%q).String() = %q does not parse: %v", s, str, err)
			continue
		}
		if back != o {
			t.Errorf("round trip of %q through %q:\n got %+v\nwant %+v", s, str, back, o)
		}
		if again := back.String(); again != str {
			t.Errorf("String is not stable: %q then %q", str, again)
		}
	}
	// Every accepted case survives the round trip too.
	for _, tc := range acceptCases {
		o, err := parse(tc.in)
		if err != nil {
			continue
		}
		if back, err := parse(o.String()); err != nil || back != o {
			t.Errorf("round trip of %q through %q: %+v, %v", tc.in, o.String(), back, err)
		}
	}
}

func TestStringShowsSetOptions(t *testing.T) {
	o, err := parse("uid=0,port=2049,rsize=65536,nodev,allow_other,noac,proto=rdma")
	if err != nil {
		t.Fatal(err)
	}
	s := "," + o.String() + ","
	for _, item := range []string{"uid=0", "port=2049", "rsize=65536", "nodev", "allow_other", "noac", "sync", "proto=rdma"} {
		if !strings.Contains(s, ","+item+",") {
			t.Errorf("String() = %q lacks %q", o.String(), item)
		}
	}
}

// TestUsageComplete checks that Usage names every option the parser knows
// and every word of every enumerated option.
func TestUsageComplete(t *testing.T) {
	usage := Usage()
	flat := strings.Join(strings.Fields(usage), " ") // undo the wrapping
	words := make(map[string]bool)
	for _, w := range strings.FieldsFunc(usage, func(r rune) bool {
		return !(unicode.IsLetter(r) || unicode.IsDigit(r) || r == '_' || r == '-' || r == '.')
	}) {
		words[w] = true
	}
	for i := range table {
		opt := &table[i]
		for _, name := range opt.names {
			if !words[name] {
				t.Errorf("Usage() does not mention %q", name)
			}
		}
		if !strings.Contains(flat, opt.syntax) {
			t.Errorf("Usage() lacks the syntax %q", opt.syntax)
		}
	}
	for g := range numGroups {
		if !strings.Contains(usage, g.title()+":\n") {
			t.Errorf("Usage() lacks the group %q", g.title())
		}
	}
	for _, line := range strings.Split(strings.TrimSuffix(usage, "\n"), "\n") {
		if len(line) > UsageWidth {
			t.Errorf("Usage() line is %d columns wide: %q", len(line), line)
		}
	}
}

// TestTable checks the option table itself.
func TestTable(t *testing.T) {
	seen := make(map[string]bool)
	for i := range table {
		opt := &table[i]
		if len(opt.names) == 0 || opt.syntax == "" || opt.help == "" || opt.apply == nil {
			t.Errorf("table[%d] %q is incomplete", i, opt.names)
		}
		if opt.form == formValue && opt.allowed == "" {
			t.Errorf("option %q takes a value but does not say which", opt.names)
		}
		for _, name := range opt.names {
			if seen[name] {
				t.Errorf("option %q is in the table twice", name)
			}
			seen[name] = true
			if lookup(name) != opt {
				t.Errorf("lookup(%q) does not find its entry", name)
			}
		}
	}
}

func TestEnumStrings(t *testing.T) {
	tests := []struct {
		v    fmt.Stringer
		want string
	}{
		{ProtoTCP, "tcp"}, {ProtoRDMA, "rdma"}, {Proto(9), "Proto(9)"},
		{SecSys, "sys"}, {SecNone, "none"}, {Sec(9), "Sec(9)"},
		{LookupCacheAll, "all"}, {LookupCacheNone, "none"}, {LookupCachePositive, "positive"},
		{LookupCache(9), "LookupCache(9)"},
		{xprtrdma.MemRegMW, "mw"}, {xprtrdma.MemRegRegister, "register"}, {xprtrdma.MemRegPersistent, "persistent"}, {xprtrdma.MemReg(9), "MemReg(9)"},
		{ProviderIBVerbs, "ibverbs"}, {ProviderSoft, "soft"}, {Provider(9), "Provider(9)"},
		{AtimeRelatime, "relatime"}, {AtimeNoatime, "noatime"}, {AtimeStrictatime, "strictatime"}, {Atime(9), "Atime(9)"},
	}
	for _, tc := range tests {
		if got := tc.v.String(); got != tc.want {
			t.Errorf("%T(%v).String() = %q, want %q", tc.v, tc.v, got, tc.want)
		}
	}
}

func FuzzApply(f *testing.F) {
	for _, tc := range acceptCases {
		f.Add(tc.in)
	}
	for _, s := range []string{
		"foo", "soft=1", "port", "vers=4", "mountproto=udp", "lock=1", "acregmin=61",
		"x-a=b,comment=c", "fsname=\x00", "fsname=\u0085x\u0085", "rsize=18446744073709551616",
		Default().String(),
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		o, err := parse(s)
		if err != nil {
			checkError(t, s, err)
			return
		}
		str := o.String()
		back, err := parse(str)
		if err != nil {
			t.Fatalf("parse(%q) ok, but its String %q fails: %v", s, str, err)
		}
		if back != o {
			t.Fatalf("parse(%q) = %+v\nbut parse(%q) = %+v", s, o, str, back)
		}
	})
}

func ExampleOptions_Apply() {
	o := Default()
	if err := o.Apply("proto=rdma,rsize=1000000,soft,noac"); err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(o.Proto, o.RSize, o.Soft, o.ACRegMax, o.Sync)

	fmt.Println(o.Apply("vers=4"))
	// Output:
	// rdma 999424 true 0 true
	// option vers=4: only NFS version 3 is supported
}

// TestLocalLockRemote: which locks go to the server's lock manager, for
// each local_lock= and with or without NLM, as nfs(5) describes them.
func TestLocalLockRemote(t *testing.T) {
	for _, tc := range []struct {
		l                 LocalLock
		nlm               bool
		wantFlock, wantFc bool
	}{
		{LocalLockNone, true, true, true},
		{LocalLockFlock, true, false, true},
		{LocalLockPosix, true, true, false},
		{LocalLockAll, true, false, false},
		{LocalLockNone, false, false, false},
	} {
		if got := tc.l.Remote(tc.nlm, true); got != tc.wantFlock {
			t.Errorf("local_lock=%v, nlm %v: flock remote = %v, want %v", tc.l, tc.nlm, got, tc.wantFlock)
		}
		if got := tc.l.Remote(tc.nlm, false); got != tc.wantFc {
			t.Errorf("local_lock=%v, nlm %v: fcntl remote = %v, want %v", tc.l, tc.nlm, got, tc.wantFc)
		}
	}
}
