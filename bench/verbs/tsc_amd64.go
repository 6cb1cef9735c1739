package main

// rdtsc reads the time stamp counter: perftest times with it too, and it
// costs far less than time.Now where the clock source is not the TSC (an
// HPET read under qemu's TCG takes microseconds).
func rdtsc() uint64
