package main

import "time"

// ticksPerMicrosecond calibrates rdtsc against the wall clock.
func ticksPerMicrosecond() float64 {
	t0, c0 := time.Now(), rdtsc()
	time.Sleep(200 * time.Millisecond)
	c1, t1 := rdtsc(), time.Now()
	return float64(c1-c0) / (float64(t1.Sub(t0)) / float64(time.Microsecond))
}
