package main

import (
	"fmt"
	"os"
	"os/signal"
	"runtime/pprof"
	"sync"
	"syscall"
)

// profileEnv names a file to write a CPU profile of the whole run to, for
// finding where time goes (bench/ uses it).
const profileEnv = "RDMAFS_CPUPROFILE"

// profileSignaledEnv names the files of CPU profiles of parts of a run:
// SIGUSR1 starts one, SIGUSR2 ends it and writes it as PATH.N (N = 1, 2,
// ...; the file appears complete, under its name, when the profile is
// done). bench-e2e profiles each workload so.
const profileSignaledEnv = "RDMAFS_CPUPROFILE_SIGNALED"

// startProfile starts the CPU profile RDMAFS_CPUPROFILE asks for, or the
// signaled profiles of RDMAFS_CPUPROFILE_SIGNALED, and returns the
// function that ends it.
func startProfile(suffix string) func() {
	if path := os.Getenv(profileSignaledEnv); path != "" {
		return startSignaledProfiles(path + suffix)
	}
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

// signaledProfile is the profile of part of a run that SIGUSR1 started.
type signaledProfile struct {
	path string // PATH, to which .N is added

	mu   sync.Mutex
	n    int      // profiles started
	file *os.File // the one being written, nil if none
}

func startSignaledProfiles(path string) func() {
	p := &signaledProfile{path: path}
	signals := make(chan os.Signal, 4)
	signal.Notify(signals, syscall.SIGUSR1, syscall.SIGUSR2)
	done := make(chan struct{})
	go func() {
		for {
			select {
			case sig := <-signals:
				if sig == syscall.SIGUSR1 {
					p.start()
				} else {
					p.stop()
				}
			case <-done:
				return
			}
		}
	}()
	return func() {
		signal.Stop(signals)
		close(done)
		p.stop()
	}
}

func (p *signaledProfile) start() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.file != nil {
		return // one at a time: a second start goes on with the first
	}
	p.n++
	f, err := os.Create(p.tmpName())
	if err != nil {
		return
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		os.Remove(f.Name())
		return
	}
	p.file = f
}

func (p *signaledProfile) stop() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.file == nil {
		return
	}
	pprof.StopCPUProfile()
	p.file.Close()
	p.file = nil
	// under its final name only once complete, for whoever waits for it
	os.Rename(p.tmpName(), p.name())
}

func (p *signaledProfile) name() string    { return fmt.Sprintf("%s.%d", p.path, p.n) }
func (p *signaledProfile) tmpName() string { return p.name() + ".tmp" }
