package nlm

import "fmt"

// The NLM program and the version this package speaks. Version 4 is the
// one that goes with NFSv3: 64-bit offsets and lengths, and file handles of
// up to 1024 bytes.
const (
	Program = 100021
	Version = 4
)

// The NLM4 procedures. Each synchronous procedure from TEST to GRANTED has
// an asynchronous pair: its _MSG form (procedure + 5) carries the same
// arguments and returns nothing, and the peer sends the result back later
// as the arguments of the _RES form (procedure + 10), which returns nothing
// either. A server calls GRANTED (or GRANTED_MSG) on the client's lockd when
// a blocked lock is granted.
const (
	ProcNull       = 0  // void
	ProcTest       = 1  // TestArgs → TestRes
	ProcLock       = 2  // LockArgs → Res
	ProcCancel     = 3  // CancelArgs → Res
	ProcUnlock     = 4  // UnlockArgs → Res
	ProcGranted    = 5  // TestArgs → Res (server to client)
	ProcTestMsg    = 6  // TestArgs → void
	ProcLockMsg    = 7  // LockArgs → void
	ProcCancelMsg  = 8  // CancelArgs → void
	ProcUnlockMsg  = 9  // UnlockArgs → void
	ProcGrantedMsg = 10 // TestArgs → void (server to client)
	ProcTestRes    = 11 // TestRes → void
	ProcLockRes    = 12 // Res → void
	ProcCancelRes  = 13 // Res → void
	ProcUnlockRes  = 14 // Res → void
	ProcGrantedRes = 15 // Res → void (client to server)

	// ProcSMNotify is not in the protocol: it is the procedure Linux's
	// lockd registers with its local statd (SM_MON's my_id) to hear of a
	// monitored peer's reboot. statd calls it with SMStatus, returns void,
	// and calls NLM version 3, not 4: the procedure is the same in both.
	ProcSMNotify = 16

	ProcShare   = 20 // ShareArgs → ShareRes (DOS share reservations)
	ProcUnshare = 21 // ShareArgs → ShareRes
	ProcNMLock  = 22 // LockArgs → Res: a lock of a client that NSM does not monitor
	ProcFreeAll = 23 // Notify → void: a client rebooted, drop its locks
)

// ProcNames names the NLM4 procedures by number, as Linux's lockd does.
var ProcNames = []string{"NULL", "TEST", "LOCK", "CANCEL", "UNLOCK", "GRANTED",
	"TEST_MSG", "LOCK_MSG", "CANCEL_MSG", "UNLOCK_MSG", "GRANTED_MSG",
	"TEST_RES", "LOCK_RES", "CANCEL_RES", "UNLOCK_RES", "GRANTED_RES",
	"SM_NOTIFY", "UNUSED", "UNUSED", "UNUSED", "SHARE", "UNSHARE", "NM_LOCK", "FREE_ALL"}

// The protocol's limits on lengths, which every decoder enforces.
const (
	// MaxStrLen is LM_MAXSTRLEN: the longest caller_name, and the longest
	// name of FREE_ALL (Linux's bound; the specification's LM_MAXNAMELEN
	// is one more).
	MaxStrLen = 1024
	// MaxNetobjLen is MAXNETOBJ_SZ: the longest cookie, file handle or
	// owner handle. Linux's lockd is stricter for two of them: it refuses
	// cookies of more than 32 bytes and file handles of more than 128.
	MaxNetobjLen = 1024
)

// Stat is nlm4_stats, the outcome of an NLM4 request.
type Stat uint32

// The NLM4 statuses.
const (
	StatGranted           Stat = 0 // the request succeeded
	StatDenied            Stat = 1 // a conflicting lock is held
	StatDeniedNoLocks     Stat = 2 // the server is out of resources
	StatBlocked           Stat = 3 // queued: the server calls GRANTED later
	StatDeniedGracePeriod Stat = 4 // the server restarted and accepts only reclaims
	StatDeadlock          Stat = 5
	StatROFS              Stat = 6 // write lock on a read-only filesystem
	StatStaleFH           Stat = 7
	StatFBig              Stat = 8 // offset or length out of the server's range
	StatFailed            Stat = 9
)

var statNames = [...]string{"NLM4_GRANTED", "NLM4_DENIED", "NLM4_DENIED_NOLOCKS", "NLM4_BLOCKED",
	"NLM4_DENIED_GRACE_PERIOD", "NLM4_DEADLCK", "NLM4_ROFS", "NLM4_STALE_FH", "NLM4_FBIG", "NLM4_FAILED"}

func (s Stat) String() string {
	if int(s) < len(statNames) {
		return statNames[s]
	}
	return fmt.Sprintf("nlm4_stats %d", uint32(s))
}

// ShareMode is fsh4_mode: what a SHARE denies others.
type ShareMode uint32

// The share modes.
const (
	DenyNone      ShareMode = 0 // fsm_DN
	DenyRead      ShareMode = 1 // fsm_DR
	DenyWrite     ShareMode = 2 // fsm_DW
	DenyReadWrite ShareMode = 3 // fsm_DRW
)

// ShareAccess is fsh4_access: what a SHARE's holder means to do.
type ShareAccess uint32

// The share accesses.
const (
	AccessNone      ShareAccess = 0 // fsa_NONE
	AccessRead      ShareAccess = 1 // fsa_R
	AccessWrite     ShareAccess = 2 // fsa_W
	AccessReadWrite ShareAccess = 3 // fsa_RW
)
