package lockd

import "sort"

// Range is a byte range of a lock: from Start to End inclusive, End
// MaxOffset meaning to the end of the file however long it grows (FUSE's
// and the kernel's convention).
type Range struct {
	Start, End uint64
}

// MaxOffset is OFFSET_MAX, the End of a lock to the end of the file.
const MaxOffset = 1<<63 - 1

// segment is a range held with a type.
type segment struct {
	Range
	Exclusive bool
}

// heldSet is what one owner holds on one file, with POSIX's rules: a new
// lock replaces whatever the owner held in its range, an unlock removes
// it, and the server does the same with its copy. Segments are sorted and
// do not overlap.
type heldSet []segment

// set applies a lock (ex tells which kind) or, with unlock, an unlock of r.
func (h heldSet) set(r Range, ex, unlock bool) heldSet {
	var out heldSet
	for _, s := range h {
		if s.End < r.Start || s.Start > r.End {
			out = append(out, s)
			continue
		}
		if s.Start < r.Start {
			out = append(out, segment{Range{s.Start, r.Start - 1}, s.Exclusive})
		}
		if s.End > r.End {
			out = append(out, segment{Range{r.End + 1, s.End}, s.Exclusive})
		}
	}
	if !unlock {
		out = append(out, segment{r, ex})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Start < out[j].Start })
	// Merge neighbours of one kind, as the kernel's lock table does.
	merged := out[:0]
	for _, s := range out {
		if n := len(merged); n > 0 && merged[n-1].Exclusive == s.Exclusive && merged[n-1].End != MaxOffset && merged[n-1].End+1 >= s.Start {
			merged[n-1].End = max(merged[n-1].End, s.End)
			continue
		}
		merged = append(merged, s)
	}
	return merged
}
