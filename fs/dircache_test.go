package fs

import (
	"math/rand/v2"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

// TestDirCookieWindowBounds: a listing remembers the cookies of its last
// dirCookiesPerListing entries at most, whatever its length, and gives the
// cookie of each entry it remembers.
func TestDirCookieWindowBounds(t *testing.T) {
	var total atomic.Int64
	w := cookieWindow{total: &total}
	const n = 10 * dirCookiesPerListing
	for i := range uint64(n) {
		if !w.add(1000 + 7*i) {
			t.Fatalf("entry %d: a cookie never given before taken for a loop", i)
		}
		if len(w.cookies) > dirCookiesPerListing || len(w.seen) > dirCookiesPerListing {
			t.Fatalf("after %d entries the listing remembers %d cookies (%d in its set); want at most %d", i+1, len(w.cookies), len(w.seen), dirCookiesPerListing)
		}
	}
	if got := total.Load(); got != int64(len(w.cookies)) {
		t.Errorf("the mount counts %d cookies, the listing holds %d", got, len(w.cookies))
	}
	if w.next() != n {
		t.Errorf("next entry %d, want %d", w.next(), n)
	}
	for _, i := range []uint64{n - 1, n - dirCookiesPerListing/2} {
		if c, ok := w.cookie(i); !ok || c != 1000+7*i {
			t.Errorf("cookie of entry %d: %d, %v; want %d", i, c, ok, 1000+7*i)
		}
	}
	if _, ok := w.cookie(0); ok {
		t.Error("the cookie of the first of 81920 entries is still remembered")
	}
	// Back to entry n-10: the entries after it come again, and are no loop.
	w.truncate(n - 10)
	for i := uint64(n - 10); i < n; i++ {
		if !w.add(1000 + 7*i) {
			t.Fatalf("entry %d listed again after a seek back taken for a loop", i)
		}
	}
	// A failed page before all it remembers: the numbering goes on.
	w.truncate(5)
	if w.next() != 5 || total.Load() != 0 {
		t.Errorf("after forgetting from entry 5 on: next %d, %d cookies counted; want 5, 0", w.next(), total.Load())
	}
	w.reset()
	if total.Load() != 0 || len(w.cookies) != 0 {
		t.Errorf("after reset: %d cookies held, the mount counts %d", len(w.cookies), total.Load())
	}
}

// TestDirCookiesBoundedOverListings: many long listings at once remember
// at most dirCookiesTotal cookies together (each keeps its floor).
func TestDirCookiesBoundedOverListings(t *testing.T) {
	var total atomic.Int64
	const listings = 300 // 300 × 8192 would be 2.4 million
	ws := make([]cookieWindow, listings)
	for i := range ws {
		ws[i].total = &total
	}
	var peak int64
	for round := range uint64(dirCookiesPerListing + 100) {
		for i := range ws {
			ws[i].add(round<<16 | uint64(i))
		}
		peak = max(peak, total.Load())
	}
	limit := int64(max(dirCookiesTotal, listings*dirCookiesFloor) + listings)
	if peak > limit {
		t.Errorf("%d listings remembered %d cookies together; want at most %d", listings, peak, limit)
	}
	var held int64
	for i := range ws {
		held += int64(len(ws[i].cookies))
		ws[i].reset()
	}
	t.Logf("peak %d cookies, %d at the end, bound %d", peak, held, limit)
	if total.Load() != 0 {
		t.Errorf("the mount counts %d cookies after every listing ended", total.Load())
	}
}

// TestReaddirLoopLongerThanMemory: a server whose cookies go round a
// circle longer than what a listing remembers is still found out, within
// a few rounds of the circle; random distinct cookies never are.
func TestReaddirLoopLongerThanMemory(t *testing.T) {
	seed := rand.Uint64()
	t.Logf("seed %d", seed)
	r := rand.New(rand.NewPCG(seed, 0))
	var total atomic.Int64
	mu, lambda := 1+r.IntN(50000), dirCookiesPerListing+1+r.IntN(100000)
	seq := make([]uint64, mu+lambda)
	for i := range seq {
		seq[i] = r.Uint64() | 1
	}
	w := cookieWindow{total: &total}
	found := -1
	for i := 0; i < 10*(mu+lambda); i++ {
		j := i
		if j >= mu+lambda {
			j = mu + (i-mu)%lambda
		}
		c := seq[j]
		if !w.add(c) {
			found = i
			break
		}
	}
	if found < 0 || found > 3*(mu+lambda) {
		t.Fatalf("a loop of %d cookies after %d: found at entry %d; want by %d", lambda, mu, found, 3*(mu+lambda))
	}
	t.Logf("loop of %d after %d found at entry %d", lambda, mu, found)

	w.reset()
	for i := range 1 << 20 {
		if !w.add(uint64(i)*0x9e3779b97f4a7c15 | 1) {
			t.Fatalf("distinct cookie %d taken for a loop", i)
		}
	}
}

// TestReaddirSeekBackPastMemory: seekdir to a position whose cookie the
// listing no longer remembers lists from the start again, and goes on with
// the entry that followed it.
func TestReaddirSeekBackPastMemory(t *testing.T) {
	h := newHarness(t, harnessConfig{})
	const files = dirCookiesPerListing + 2000
	for i := range files {
		h.writeServerFile("f"+itoa(i), nil, 0o644)
	}
	ctx := h.ctx()
	fh, _, en := h.fs.root.OpendirHandle(ctx, 0)
	if en != 0 {
		t.Fatal(en)
	}
	d := fh.(*dirHandle)
	defer d.Releasedir(ctx, 0)
	names := map[uint64]string{}
	start := time.Now()
	for {
		e, en := d.Readdirent(ctx)
		if en != 0 {
			t.Fatal(en)
		}
		if e == nil {
			break
		}
		names[e.Off] = e.Name
	}
	t.Logf("listed %d entries in %v", len(names), time.Since(start))
	if len(names) != files+2 {
		t.Fatalf("listed %d entries, want %d", len(names), files+2)
	}
	// Remembered, remembered, forgotten, the start: a seek back forgets
	// what came after, as the listing will list it again.
	for _, off := range []uint64{files, files - 5, 40, 2} {
		if en := d.Seekdir(ctx, off); en != 0 {
			t.Fatalf("seekdir(%d): %v", off, en)
		}
		e, en := d.Readdirent(ctx)
		if en != 0 || e == nil || e.Off != off+1 || e.Name != names[off+1] {
			t.Fatalf("after seekdir(%d): entry %+v, %v; want %q at %d", off, e, en, names[off+1], off+1)
		}
	}
	if en := d.Seekdir(ctx, files); en != syscall.EINVAL {
		t.Errorf("seekdir past the entries listed since the last seek back: %v, want EINVAL", en)
	}
}
