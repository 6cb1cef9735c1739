package fs

import (
	"context"
	"sync"
)

// dirtyLimit bounds the written data that write-behind holds for all files,
// whether not yet sent or sent but not committed: a writer waits above the
// limit while COMMITs free memory.
type dirtyLimit struct {
	limit int64

	mu    sync.Mutex
	freed *sync.Cond // broadcast when held shrinks
	held  int64      // bytes, all files
	files map[*writeback]int64
}

func newDirtyLimit(limit int64) *dirtyLimit {
	d := &dirtyLimit{limit: limit, files: make(map[*writeback]int64)}
	d.freed = sync.NewCond(&d.mu)
	return d
}

// hold accounts n more (or, negative, fewer) bytes held by wb.
func (d *dirtyLimit) hold(wb *writeback, n int64) {
	if n == 0 {
		return
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	d.held += n
	d.files[wb] += n
	if d.files[wb] == 0 {
		delete(d.files, wb)
	}
	if n < 0 {
		d.freed.Broadcast()
	}
}

// holdings returns the files holding data and how much each holds.
func (d *dirtyLimit) holdings() map[*writeback]int64 {
	d.mu.Lock()
	defer d.mu.Unlock()
	m := make(map[*writeback]int64, len(d.files))
	for wb, n := range d.files {
		m[wb] = n
	}
	return m
}

// commitThreshold is how much unstable data one file holds before a
// background COMMIT frees it.
func (d *dirtyLimit) commitThreshold() int64 { return min(d.limit/4, 64<<20) }

// over reports whether write-behind holds more than the limit.
func (d *dirtyLimit) over() bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.held > d.limit
}

// waitForRoom makes a writer wait while write-behind holds more than the
// limit, committing what every file holds so that it shrinks. Every WRITE
// that completes meanwhile starts a COMMIT too (writeback.maybeCommit), so
// the wait ends once the server has the data.
func (d *dirtyLimit) waitForRoom(ctx context.Context) error {
	if !d.over() {
		return nil
	}
	for wb := range d.holdings() {
		wb.commitInBackground()
	}
	stop := context.AfterFunc(ctx, func() {
		d.mu.Lock()
		d.freed.Broadcast()
		d.mu.Unlock()
	})
	defer stop()
	d.mu.Lock()
	defer d.mu.Unlock()
	for d.held > d.limit {
		if err := ctx.Err(); err != nil {
			return err
		}
		d.freed.Wait()
	}
	return nil
}
