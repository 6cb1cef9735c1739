package main

import (
	"os"
	"runtime/pprof"
)

// profileEnv names a file to write a CPU profile of the whole run to, for
// finding where time goes (bench/ uses it).
const profileEnv = "RDMAFS_CPUPROFILE"

// startProfile starts the CPU profile RDMAFS_CPUPROFILE asks for and
// returns the function that ends it.
func startProfile(suffix string) func() {
	path := os.Getenv(profileEnv)
	if path == "" {
		return func() {}
	}
	f, err := os.Create(path + suffix)
	if err != nil {
		return func() {}
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		return func() {}
	}
	return func() {
		pprof.StopCPUProfile()
		f.Close()
	}
}
