// Command verbs benchmarks the verbs layer (package verbs) of one
// provider: SEND latency (ping-pong of small messages; median and 99th
// percentile of the one-way time, RTT/2, as perftest reports it) and RDMA
// WRITE and READ bandwidth (64 KiB messages, many in flight).
//
// Like perftest, it has a server and a client: -role server serves until
// it is killed, -role client runs the tests against it, and -role both
// (the default) runs the server in the same process. With -perftest the
// client also runs perftest's ib_send_lat, ib_write_bw and ib_read_bw on
// the same device (rdma_cm, -R) with the same sizes and prints one table
// with the ratios. Bandwidth is in MiB/s, which perftest calls MB/sec;
// latency is timed with the TSC, as perftest times it.
//
//	bench-verbs -provider ibverbs -device rxe0 -addr 10.11.0.1 -role server &
//	bench-verbs -provider ibverbs -device rxe0 -addr 10.11.0.1 -role client -perftest   # in the SoftRoCE guest
//	go run ./bench/verbs -provider soft                                                   # on any host
//
// `make bench-verbs` runs it with -provider soft here and with -perftest on
// rxe0 in the e2e guest (test/e2e/lab.sh bench-verbs).
package main

import (
	"flag"
	"fmt"
	"log"
	"net"
	"os"
	"os/signal"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/rdmafs/rdmafs/verbs"
	"github.com/rdmafs/rdmafs/verbs/ibverbs"
	"github.com/rdmafs/rdmafs/verbs/soft"
)

var (
	providerName = flag.String("provider", "soft", "verbs provider: ibverbs or soft")
	device       = flag.String("device", "", "device name (default: the one that reaches -addr)")
	addr         = flag.String("addr", "127.0.0.1", "IP address of the server")
	port         = flag.Int("port", 18600, "port of the server (-role both: any)")
	role         = flag.String("role", "both", "server, client, or both in this process")
	latSize      = flag.Int("latsize", 2, "bytes per SEND of the latency test")
	latIters     = flag.Int("iters", 10000, "round trips of the latency test")
	bwSize       = flag.Int("bwsize", 65536, "bytes per RDMA WRITE and READ of the bandwidth tests")
	bwDepth      = flag.Int("depth", 128, "RDMA WRITEs in flight (READs: at most the device's initiator depth)")
	duration     = flag.Duration("duration", 5*time.Second, "length of each bandwidth test")
	polling      = flag.Bool("polling", true, "poll the completion queues (as perftest does) rather than sleep on the completion channel")
	perftest     = flag.Bool("perftest", false, "also run perftest's ib_send_lat, ib_write_bw and ib_read_bw on the device and compare")
	tests        = flag.String("tests", "lat,write,read", "tests to run: lat, write, read")
	dist         = flag.Bool("dist", false, "print the distribution of the latencies")
	regionSize   = flag.Int("region", 64<<20, "bytes of the registered region each end has")
)

func main() {
	flag.Parse()
	log.SetFlags(0)
	log.SetPrefix("bench-verbs: ")
	var p verbs.Provider
	switch *providerName {
	case "soft":
		p = soft.New()
	case "ibverbs":
		p = ibverbs.Provider{}
	default:
		log.Fatalf("unknown provider %q", *providerName)
	}
	n, err := open(p)
	if err != nil {
		log.Fatal(err)
	}
	defer n.close()

	server := net.JoinHostPort(*addr, strconv.Itoa(*port))
	switch *role {
	case "server":
		if err := n.serve(server, nil); err != nil {
			log.Fatal(err)
		}
		return
	case "both":
		ready := make(chan string, 1)
		go func() {
			if err := n.serve(net.JoinHostPort(*addr, "0"), ready); err != nil {
				log.Fatal(err)
			}
		}()
		server = <-ready
	case "client":
	default:
		log.Fatalf("unknown role %q", *role)
	}

	want := func(t string) bool { return slices.Contains(strings.Split(*tests, ","), t) }
	var rows []row
	if want("lat") {
		lat, err := n.latency(server)
		if err != nil {
			log.Fatalf("latency: %v", err)
		}
		rows = append(rows,
			row{name: fmt.Sprintf("SEND latency %d B, median", *latSize), unit: "µs", ours: lat.median, lat: true, perftest: "ib_send_lat", col: 4},
			row{name: fmt.Sprintf("SEND latency %d B, p99", *latSize), unit: "µs", ours: lat.p99, lat: true, perftest: "ib_send_lat", col: 7})
	}
	for _, t := range []struct {
		name, tool string
		op         verbs.Opcode
	}{{"write", "ib_write_bw", verbs.OpRDMAWrite}, {"read", "ib_read_bw", verbs.OpRDMARead}} {
		if !want(t.name) {
			continue
		}
		bw, err := n.bandwidth(server, t.op)
		if err != nil {
			log.Fatalf("%v bandwidth: %v", t.op, err)
		}
		rows = append(rows, row{name: fmt.Sprintf("%v bandwidth %d KiB", t.op, *bwSize>>10), unit: "MiB/s", ours: bw, perftest: t.tool, col: 3})
	}
	if *perftest {
		if err := runPerftest(n.dev.Name(), rows); err != nil {
			log.Printf("perftest: %v", err)
		}
	}
	printTable(n.dev.Name(), rows)
}

// waitSignal waits for SIGINT or SIGTERM.
func waitSignal() {
	ch := make(chan os.Signal, 1)
	signal.Notify(ch, syscall.SIGINT, syscall.SIGTERM)
	<-ch
}

type row struct {
	name, unit string
	ours, ref  float64 // ref: perftest's, 0 when not run
	lat        bool
	perftest   string // the perftest tool of the row
	col        int    // the column of its result line
}

func printTable(dev string, rows []row) {
	fmt.Printf("\nverbs provider %s on device %s (%s), role %s, polling=%v; latency: %d round trips; bandwidth: %v per test, %d in flight\n",
		*providerName, dev, *addr, *role, *polling, *latIters, *duration, *bwDepth)
	tw := tabwriter.NewWriter(os.Stdout, 2, 0, 2, ' ', 0)
	fmt.Fprintf(tw, "test\trdmafs verbs\tperftest\tratio\tdifference\n")
	for _, r := range rows {
		ref, ratio, diff := "-", "-", "-"
		if r.ref > 0 {
			ref = fmt.Sprintf("%.2f %s", r.ref, r.unit)
			ratio = fmt.Sprintf("%.2f", r.ours/r.ref)
			if r.lat {
				diff = fmt.Sprintf("%+.2f µs", r.ours-r.ref)
			} else {
				diff = fmt.Sprintf("%+.1f%%", 100*(r.ours/r.ref-1))
			}
		}
		fmt.Fprintf(tw, "%s\t%.2f %s\t%s\t%s\t%s\n", r.name, r.ours, r.unit, ref, ratio, diff)
	}
	tw.Flush()
}
