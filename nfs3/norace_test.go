//go:build !race

package nfs3

const raceEnabled = false
