//go:build race

package nfs3

// raceEnabled: the race detector makes sync.Pool drop items on purpose, so
// allocation counts of code that pools its buffers mean nothing.
const raceEnabled = true
