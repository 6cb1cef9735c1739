//go:build race

package roundtrip

// raceEnabled: the race detector allocates on its own account (and makes
// sync.Pool drop items), so allocation counts mean nothing under it.
const raceEnabled = true
