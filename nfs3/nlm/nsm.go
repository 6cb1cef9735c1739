package nlm

import "github.com/rdmafs/rdmafs/sunrpc/xdr"

// NSM, the Network Status Monitor (statd): program 100024, version 1. A
// host's lock manager asks its local statd to monitor each peer it shares
// locks with (SM_MON), naming a callback (my_id: program, version and
// procedure, ProcSMNotify for Linux's lockd) and 16 private bytes statd
// gives back. When a host restarts, its statd bumps the host's state
// number and sends SM_NOTIFY to every peer it had recorded; each peer's
// statd then calls the callback of every local lock manager that monitors
// the restarted host, with SMStatus.
const (
	NSMProgram = 100024
	NSMVersion = 1
)

// The NSM procedures.
const (
	NSMProcNull      = 0 // void
	NSMProcStat      = 1 // SMName → SMStatRes: the local state number (mon_name is ignored by Linux's statd)
	NSMProcMon       = 2 // SMMon → SMStatRes
	NSMProcUnmon     = 3 // SMMonID → SMStat
	NSMProcUnmonAll  = 4 // SMMyID → SMStat
	NSMProcSimuCrash = 5 // void → void: act as if this host had restarted
	NSMProcNotify    = 6 // SMStatChange → void: the sender restarted
)

// NSMProcNames names the NSM procedures by number.
var NSMProcNames = []string{"NULL", "STAT", "MON", "UNMON", "UNMON_ALL", "SIMU_CRASH", "NOTIFY"}

// NSM limits.
const (
	SMMaxStrLen = 1024 // SM_MAXSTRLEN: the longest host name
	SMPrivSize  = 16   // the private bytes of SM_MON and of the callback
)

// SMResult is res: whether statd did what SM_STAT or SM_MON asked.
type SMResult uint32

// The NSM results.
const (
	SMSuccess SMResult = 0 // stat_succ
	SMFail    SMResult = 1 // stat_fail
)

func getSMName(d *xdr.Decoder, dst []byte, field string) []byte {
	return getOpaque(d, dst, field, SMMaxStrLen, "SM_MAXSTRLEN")
}

// SMName is sm_name: the arguments of SM_STAT.
type SMName struct {
	MonName []byte
}

var _ Message = (*SMName)(nil)

// Encode appends n as sm_name.
func (n *SMName) Encode(e *xdr.Encoder) { e.Opaque(n.MonName) }

// Decode reads sm_name into n.
func (n *SMName) Decode(d *xdr.Decoder) { n.MonName = getSMName(d, n.MonName, "mon_name") }

// SMMyID is my_id: the local lock manager statd calls back (the arguments
// of SM_UNMON_ALL, which stops every monitoring it asked for).
type SMMyID struct {
	MyName []byte // the host to call; Linux's lockd names itself by its node name
	Prog   uint32
	Vers   uint32
	Proc   uint32
}

var _ Message = (*SMMyID)(nil)

// Encode appends m as my_id.
func (m *SMMyID) Encode(e *xdr.Encoder) {
	e.Opaque(m.MyName)
	e.Uint32(m.Prog)
	e.Uint32(m.Vers)
	e.Uint32(m.Proc)
}

// Decode reads my_id into m.
func (m *SMMyID) Decode(d *xdr.Decoder) {
	m.MyName = getSMName(d, m.MyName, "my_name")
	m.Prog = d.Uint32()
	m.Vers = d.Uint32()
	m.Proc = d.Uint32()
}

// SMMonID is mon_id: a host to monitor and whom to tell (the arguments of
// SM_UNMON).
type SMMonID struct {
	MonName []byte
	MyID    SMMyID
}

var _ Message = (*SMMonID)(nil)

// Encode appends m as mon_id.
func (m *SMMonID) Encode(e *xdr.Encoder) {
	e.Opaque(m.MonName)
	m.MyID.Encode(e)
}

// Decode reads mon_id into m.
func (m *SMMonID) Decode(d *xdr.Decoder) {
	m.MonName = getSMName(d, m.MonName, "mon_name")
	m.MyID.Decode(d)
}

// SMMon is mon: the arguments of SM_MON.
type SMMon struct {
	MonID SMMonID
	// Priv comes back unchanged in the callback's SMStatus.
	Priv [SMPrivSize]byte
}

var _ Message = (*SMMon)(nil)

// Encode appends m as mon.
func (m *SMMon) Encode(e *xdr.Encoder) {
	m.MonID.Encode(e)
	e.Fixed(m.Priv[:])
}

// Decode reads mon into m.
func (m *SMMon) Decode(d *xdr.Decoder) {
	m.MonID.Decode(d)
	copy(m.Priv[:], d.Fixed(SMPrivSize))
}

// SMStatRes is sm_stat_res: the result of SM_STAT and SM_MON.
type SMStatRes struct {
	Result SMResult
	State  int32 // the local host's state number: odd while it is up
}

var _ Message = (*SMStatRes)(nil)

// Encode appends r as sm_stat_res.
func (r *SMStatRes) Encode(e *xdr.Encoder) {
	e.Uint32(uint32(r.Result))
	e.Uint32(uint32(r.State))
}

// Decode reads sm_stat_res into r.
func (r *SMStatRes) Decode(d *xdr.Decoder) {
	r.Result = SMResult(getEnum(d, "res", uint32(SMFail)))
	r.State = int32(d.Uint32())
}

// SMStat is sm_stat: the result of SM_UNMON and SM_UNMON_ALL.
type SMStat struct {
	State int32
}

var _ Message = (*SMStat)(nil)

// Encode appends s as sm_stat.
func (s *SMStat) Encode(e *xdr.Encoder) { e.Uint32(uint32(s.State)) }

// Decode reads sm_stat into s.
func (s *SMStat) Decode(d *xdr.Decoder) { s.State = int32(d.Uint32()) }

// SMStatChange is stat_chge: the arguments of SM_NOTIFY, which a host's
// statd sends each peer after the host restarts.
type SMStatChange struct {
	MonName []byte // the host that restarted
	State   int32  // its new state number
}

var _ Message = (*SMStatChange)(nil)

// Encode appends c as stat_chge.
func (c *SMStatChange) Encode(e *xdr.Encoder) {
	e.Opaque(c.MonName)
	e.Uint32(uint32(c.State))
}

// Decode reads stat_chge into c.
func (c *SMStatChange) Decode(d *xdr.Decoder) {
	c.MonName = getSMName(d, c.MonName, "mon_name")
	c.State = int32(d.Uint32())
}

// SMStatus is sm_status (Linux's nlm_reboot): the arguments statd gives
// the callback of SM_MON, NLM's ProcSMNotify, when a monitored host
// restarts.
type SMStatus struct {
	MonName []byte
	State   int32
	Priv    [SMPrivSize]byte // as SM_MON gave them
}

var _ Message = (*SMStatus)(nil)

// Encode appends s as sm_status.
func (s *SMStatus) Encode(e *xdr.Encoder) {
	e.Opaque(s.MonName)
	e.Uint32(uint32(s.State))
	e.Fixed(s.Priv[:])
}

// Decode reads sm_status into s.
func (s *SMStatus) Decode(d *xdr.Decoder) {
	s.MonName = getSMName(d, s.MonName, "mon_name")
	s.State = int32(d.Uint32())
	copy(s.Priv[:], d.Fixed(SMPrivSize))
}
