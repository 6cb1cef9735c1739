package fs

import "sync/atomic"

// What a directory listing keeps in memory is bounded, however large or
// hostile the directory: a server that answers READDIRPLUS with new names
// and rising cookies for ever must not grow the client without limit.
//
//   - Entries go to the kernel a page (one READDIR or READDIRPLUS reply,
//     at most dirPageMax bytes) at a time; nothing collects the listing.
//   - A listing remembers the cookies of its last dirCookiesPerListing
//     entries, to continue after a seek back (telldir/seekdir, an
//     interrupted getdents) and to find a loop at once. All listings of the
//     mount together remember at most dirCookiesTotal, each keeping at
//     least dirCookiesFloor; the oldest go first. A seek back past what a
//     listing remembers lists again from the start, and a loop longer than
//     it is found by Brent's method, which needs no memory.
//   - READDIRPLUS makes the kernel's inodes of the files it lists (each
//     costs the client its node and object, about 2 KiB of memory) only
//     while the mount holds fewer than dirPlusInodes files, and gives them
//     names only while it has given fewer than dirPlusInodes names to
//     files the mount holds (each name costs go-fuse a link from the
//     directory and one back, with the name twice: a server that answers
//     with one handle for every name makes one file and names without
//     end). Beyond either, the entries go to the kernel by name and type,
//     and a stat looks the file up, as with nordirplus. A file's names go
//     with it, when the kernel forgets it. Inodes and names the kernel
//     makes by LOOKUP are not limited: the kernel's dentry cache holds
//     them, and its shrinker frees them under memory pressure.
const (
	dirCookiesPerListing = 8192
	dirCookiesTotal      = 1 << 20
	// dirCookiesFloor is what a listing keeps however many there are:
	// seeks back by a program (telldir/seekdir) are mostly short ones.
	dirCookiesFloor = 512
	dirPlusInodes   = 16384
)

// cookieWindow remembers the cookies of a listing's last entries. Entries
// are numbered from 0 in the order the server listed them; entry i is at
// FUSE position i+3.
type cookieWindow struct {
	total   *atomic.Int64 // the cookies remembered by all the mount's listings
	first   uint64        // the number of cookies[0]
	cookies []uint64
	seen    map[uint64]struct{} // the cookies of cookies
	loop    brentLoop
}

// next returns the number the next entry will get.
func (w *cookieWindow) next() uint64 { return w.first + uint64(len(w.cookies)) }

// add remembers the cookie of the next entry. It reports false, and
// remembers nothing, when the cookie was seen before in this pass over the
// directory: the server leads the listing round in a circle.
func (w *cookieWindow) add(c uint64) bool {
	if _, dup := w.seen[c]; dup || w.loop.repeats(c) {
		return false
	}
	if w.seen == nil {
		w.seen = make(map[uint64]struct{})
	}
	w.seen[c] = struct{}{}
	w.cookies = append(w.cookies, c)
	n := len(w.cookies)
	if w.total.Add(1) > dirCookiesTotal && n > dirCookiesFloor || n > dirCookiesPerListing {
		// A quarter at once, so that the copy costs O(1) an entry.
		w.dropOldest(max(n/4, 1))
	}
	return true
}

// cookie returns the cookie of entry i, if remembered.
func (w *cookieWindow) cookie(i uint64) (uint64, bool) {
	if i < w.first || i >= w.next() {
		return 0, false
	}
	return w.cookies[i-w.first], true
}

// dropOldest forgets the n oldest cookies. The slice and the set are made
// anew at their new size: a Go map never shrinks, and a listing cut down
// to its floor must hold no more than that.
func (w *cookieWindow) dropOldest(n int) {
	kept := w.cookies[n:]
	w.cookies = append(make([]uint64, 0, 2*len(kept)), kept...)
	w.seen = make(map[uint64]struct{}, len(kept))
	for _, c := range kept {
		w.seen[c] = struct{}{}
	}
	w.first += uint64(n)
	w.total.Add(-int64(n))
}

// truncate forgets the cookies of the entries from i on, as when the
// listing goes back to continue after entry i-1. Loop detection starts
// again: the entries after i come again.
func (w *cookieWindow) truncate(i uint64) {
	if i < w.first {
		// Before all it remembers: it remembers none, and goes on
		// numbering from i.
		w.total.Add(-int64(len(w.cookies)))
		w.first, w.cookies, w.seen, w.loop = i, w.cookies[:0], nil, brentLoop{}
		return
	}
	keep := int(min(i-w.first, uint64(len(w.cookies))))
	for _, c := range w.cookies[keep:] {
		delete(w.seen, c)
	}
	w.total.Add(-int64(len(w.cookies) - keep))
	w.cookies = w.cookies[:keep]
	w.loop = brentLoop{}
}

// reset forgets everything, for a listing from the start or its end.
func (w *cookieWindow) reset() {
	w.total.Add(-int64(len(w.cookies)))
	w.first, w.cookies, w.seen, w.loop = 0, nil, nil, brentLoop{}
}

// brentLoop finds a cycle in a sequence of cookies with constant memory
// (Brent's method): it compares each cookie with a mark that moves to the
// current cookie after 1, 2, 4, ... steps. Once the sequence goes round a
// cycle of length λ, the mark is in it within a few rounds and is met
// again: the cycle is found after at most about 2(μ+λ) entries, μ being the
// entries before it.
type brentLoop struct {
	mark         uint64
	marked       bool
	steps, power uint64
}

// repeats reports whether c is the marked cookie, and moves the mark.
func (b *brentLoop) repeats(c uint64) bool {
	if b.marked && c == b.mark {
		return true
	}
	b.steps++
	if !b.marked || b.steps >= b.power {
		b.mark, b.marked, b.steps = c, true, 0
		b.power = max(2*b.power, 1)
	}
	return false
}

// mayMakeInode reports whether a READDIRPLUS entry may become an inode:
// while the mount holds fewer than dirPlusInodes files and READDIRPLUS
// gave them fewer than dirPlusInodes names. It logs the first time it says
// no.
func (f *FS) mayMakeInode() bool {
	if f.objects.count() < dirPlusInodes && f.objects.plusNames.Load() < dirPlusInodes {
		return true
	}
	if f.plusRefused.CompareAndSwap(false, true) {
		f.logf("the mount holds %d files or names of files from listings: directories are listed without making inodes of their entries (as nordirplus) while it holds that many", dirPlusInodes)
	}
	return false
}
