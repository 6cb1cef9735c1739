//go:build !race

package roundtrip

const raceEnabled = false
