// Command smallfiles times the small-file metadata workload of the
// benchmark in a directory: create N files of SIZE bytes (each written and
// closed), stat each, unlink each.
//
//	smallfiles [-n 10000] [-size 4096] DIR
package main

import (
	"flag"
	"fmt"
	"log"
	"os"
	"path/filepath"
	"time"
)

func main() {
	n := flag.Int("n", 10000, "number of files")
	size := flag.Int("size", 4096, "bytes per file")
	flag.Parse()
	if flag.NArg() != 1 {
		log.Fatal("usage: smallfiles [-n N] [-size BYTES] DIR")
	}
	dir := filepath.Join(flag.Arg(0), fmt.Sprintf("smallfiles-%d", os.Getpid()))
	if err := os.Mkdir(dir, 0o755); err != nil {
		log.Fatal(err)
	}
	data := make([]byte, *size)
	name := func(i int) string { return filepath.Join(dir, fmt.Sprintf("f%06d", i)) }
	start := time.Now()
	for i := range *n {
		if err := os.WriteFile(name(i), data, 0o644); err != nil {
			log.Fatal(err)
		}
	}
	created := time.Now()
	for i := range *n {
		if _, err := os.Stat(name(i)); err != nil {
			log.Fatal(err)
		}
	}
	statted := time.Now()
	for i := range *n {
		if err := os.Remove(name(i)); err != nil {
			log.Fatal(err)
		}
	}
	done := time.Now()
	if err := os.Remove(dir); err != nil {
		log.Fatal(err)
	}
	rate := func(d time.Duration) float64 { return float64(*n) / d.Seconds() }
	// One line a script can read: total files/s, then each phase's.
	fmt.Printf("files/s %.0f create %.0f stat %.0f unlink %.0f\n",
		float64(3**n)/done.Sub(start).Seconds(), rate(created.Sub(start)), rate(statted.Sub(created)), rate(done.Sub(statted)))
}
