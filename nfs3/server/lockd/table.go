package lockd

import "math"

// Owner is who holds a lock: a process (Svid) of a client host, as
// Linux's lockd keys a lock owner (nlmsvc_find_lockowner: host and pid);
// the Server names a host by its caller_name and address (hostKey).
// The owner handle (oh) is not part of it: Linux's client writes the
// calling process's pid into oh, so the UNLOCK of a lock can carry
// another oh than its LOCK (a child closing a file its parent locked);
// oh is only kept to name the holder of a conflicting lock.
type Owner struct {
	Host string // the client host
	Svid int32
}

// Range is a byte range, both ends included; End is math.MaxUint64 for a
// lock that runs to the end of the file however long it grows.
type Range struct {
	Start, End uint64
}

// ToEOF is the End of a range that runs to the end of the file.
const ToEOF = math.MaxUint64

// RangeOf turns an NLM4 offset and length (0: to the end of the file) into
// a Range; a range past 2^64 is clamped to the end, as Linux clamps to
// OFFSET_MAX.
func RangeOf(offset, length uint64) Range {
	if length == 0 || offset+length-1 < offset {
		return Range{offset, ToEOF}
	}
	return Range{offset, offset + length - 1}
}

// Length is the NLM4 length of r: 0 for a range to the end of the file.
func (r Range) Length() uint64 {
	if r.End == ToEOF {
		return 0
	}
	return r.End - r.Start + 1
}

func (r Range) overlaps(o Range) bool { return r.Start <= o.End && o.Start <= r.End }

// touches: r and o overlap or are adjacent, so that one lock may cover both.
func (r Range) touches(o Range) bool {
	return r.overlaps(o) || (r.End != ToEOF && r.End+1 == o.Start) || (o.End != ToEOF && o.End+1 == r.Start)
}

// Lock is one held byte-range lock.
type Lock struct {
	Owner     Owner
	OH        string // the owner handle the LOCK carried, for TEST's holder
	Exclusive bool
	Range
}

// conflicts: l keeps another owner from taking r (exclusive or not).
func (l *Lock) conflicts(o Owner, exclusive bool, r Range) bool {
	return l.Owner != o && (l.Exclusive || exclusive) && l.Range.overlaps(r)
}

// Table holds the byte-range locks of every file, with POSIX semantics
// (fs/locks.c's posix_lock_file, which Linux's lockd calls): an owner's
// locks on a file never overlap one another; a lock replaces what the
// same owner held in its range, merging with the owner's locks of the
// same kind that it overlaps or touches; an unlock trims or splits them.
// It counts locks per host and in all, and refuses (ErrNoLocks) a change
// that would take either beyond its bound.
//
// Table is not safe for concurrent use: its user holds a lock around it.
type Table struct {
	files   map[string][]Lock // by file handle
	perHost map[string]int    // locks held, by host
	total   int

	MaxPerHost, MaxTotal int
}

// NewTable returns an empty table with the given bounds.
func NewTable(maxPerHost, maxTotal int) *Table {
	return &Table{files: make(map[string][]Lock), perHost: make(map[string]int), MaxPerHost: maxPerHost, MaxTotal: maxTotal}
}

// Test returns a lock of another owner that keeps o from taking r on fh,
// or nil.
func (t *Table) Test(fh string, o Owner, exclusive bool, r Range) *Lock {
	for i := range t.files[fh] {
		if l := &t.files[fh][i]; l.conflicts(o, exclusive, r) {
			c := *l
			return &c
		}
	}
	return nil
}

// Result is the outcome of Lock and Unlock.
type Result int

const (
	Granted  Result = iota
	Conflict        // another owner holds a conflicting lock
	NoLocks         // the change would exceed a bound
)

// Lock gives o a lock on r of fh unless another owner's lock conflicts or
// the bounds forbid.
func (t *Table) Lock(fh string, o Owner, oh string, exclusive bool, r Range) Result {
	if t.Test(fh, o, exclusive, r) != nil {
		return Conflict
	}
	nl := Lock{Owner: o, OH: oh, Exclusive: exclusive, Range: r}
	return t.replace(fh, o, r, &nl)
}

// Unlock drops what o holds in r of fh. Splitting a lock in two can take
// a host beyond its bound: that unlock is refused (NoLocks), as
// posix_lock_file fails with ENOLCK.
func (t *Table) Unlock(fh string, o Owner, r Range) Result {
	return t.replace(fh, o, r, nil)
}

// replace removes o's locks from r on fh and, if nl is not nil, puts nl
// there, merged with o's locks of its kind that touch it.
func (t *Table) replace(fh string, o Owner, r Range, nl *Lock) Result {
	old := t.files[fh]
	next := make([]Lock, 0, len(old)+2)
	mine := 0 // o's locks on fh before
	for _, l := range old {
		if l.Owner != o {
			next = append(next, l)
			continue
		}
		mine++
		switch {
		case nl != nil && l.Exclusive == nl.Exclusive && l.Range.touches(nl.Range):
			// Same kind: the new lock absorbs it.
			nl.Start, nl.End = min(nl.Start, l.Start), max(nl.End, l.End)
		case !l.Range.overlaps(r):
			next = append(next, l)
		default:
			// Keep what lies outside r.
			if l.Start < r.Start {
				left := l
				left.End = r.Start - 1
				next = append(next, left)
			}
			if l.End > r.End {
				right := l
				right.Start = r.End + 1
				next = append(next, right)
			}
		}
	}
	if nl != nil {
		next = append(next, *nl)
	}
	after := len(next) - (len(old) - mine)
	if grow := after - mine; grow > 0 &&
		(t.perHost[o.Host]+grow > t.MaxPerHost || t.total+grow > t.MaxTotal) {
		return NoLocks
	}
	t.count(o.Host, after-mine)
	if len(next) == 0 {
		delete(t.files, fh)
	} else {
		t.files[fh] = next
	}
	return Granted
}

func (t *Table) count(host string, delta int) {
	t.total += delta
	if n := t.perHost[host] + delta; n > 0 {
		t.perHost[host] = n
	} else {
		delete(t.perHost, host)
	}
}

// DropHost drops every lock of host, as FREE_ALL and a reboot do.
func (t *Table) DropHost(host string) {
	for fh, locks := range t.files {
		next := locks[:0]
		for _, l := range locks {
			if l.Owner.Host != host {
				next = append(next, l)
			}
		}
		if len(next) == 0 {
			delete(t.files, fh)
		} else {
			t.files[fh] = next
		}
	}
	t.total -= t.perHost[host]
	delete(t.perHost, host)
}

// Held is the number of locks host holds; Total the number in all.
func (t *Table) Held(host string) int { return t.perHost[host] }

// Total is the number of locks held by every host.
func (t *Table) Total() int { return t.total }

// Locks returns a copy of the locks on fh.
func (t *Table) Locks(fh string) []Lock { return append([]Lock(nil), t.files[fh]...) }

// filesOf returns the files on which host holds locks.
func (t *Table) filesOf(host string) []string {
	var fhs []string
	for fh, locks := range t.files {
		for _, l := range locks {
			if l.Owner.Host == host {
				fhs = append(fhs, fh)
				break
			}
		}
	}
	return fhs
}
