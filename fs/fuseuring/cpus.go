package fuseuring

import (
	"fmt"
	"os"
	"strconv"
	"strings"
)

// The kernel's lists of CPUs (Documentation/ABI/testing/sysfs-devices-system-cpu).
const (
	possibleCPUs = "/sys/devices/system/cpu/possible"
	onlineCPUs   = "/sys/devices/system/cpu/online"
)

// readCPUList reads a CPU list file such as possibleCPUs.
func readCPUList(path string) (map[int]bool, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("fuseuring: %w", err)
	}
	cpus, err := parseCPUList(string(b))
	if err != nil {
		return nil, fmt.Errorf("fuseuring: %s: %w", path, err)
	}
	return cpus, nil
}

// parseCPUList parses the kernel's CPU list format, "0-3,5,7-8": the set
// of CPU numbers it names.
func parseCPUList(s string) (map[int]bool, error) {
	cpus := map[int]bool{}
	s = strings.TrimSpace(s)
	if s == "" {
		return cpus, nil
	}
	for _, r := range strings.Split(s, ",") {
		lo, hi, isRange := strings.Cut(r, "-")
		a, err := strconv.Atoi(lo)
		if err != nil || a < 0 {
			return nil, fmt.Errorf("bad CPU list %q", s)
		}
		z := a
		if isRange {
			if z, err = strconv.Atoi(hi); err != nil || z < a {
				return nil, fmt.Errorf("bad CPU list %q", s)
			}
		}
		for c := a; c <= z; c++ {
			cpus[c] = true
		}
	}
	return cpus, nil
}
