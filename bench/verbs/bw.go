package main

import (
	"context"
	"time"

	"github.com/rdmafs/rdmafs/verbs"
)

// bandwidth keeps RDMA operations of bwSize bytes on the server's region
// in flight for the duration and returns MiB/s.
func (n *node) bandwidth(server string, op verbs.Opcode) (float64, error) {
	depth := *bwDepth
	if op == verbs.OpRDMARead {
		depth = min(depth, n.caps.MaxQPInitRdAtom, n.caps.MaxQPRdAtom)
	}
	depth = max(depth/signalEvery*signalEvery, signalEvery)
	c, raddr, rkey, err := n.dial(server, request{test: testBandwidth, polling: *polling}, n.bandwidthConfig(depth, *polling))
	if err != nil {
		return 0, err
	}
	defer c.Close()
	size := *bwSize
	slots := *regionSize / size
	ctx, cancel := context.WithTimeout(context.Background(), *duration+time.Minute)
	defer cancel()
	p := newPoller(c)
	sge := []verbs.SGE{{MR: n.mr, Length: size}}
	wr := verbs.SendWR{Opcode: op, SGL: sge, RKey: rkey}
	posted, done := 0, 0
	// Warm up for a tenth of the time, then measure.
	var start time.Time
	startDone := 0
	deadline := time.Now().Add(*duration / 10)
	measuring := false
	for {
		for posted-done < depth {
			off := (posted % slots) * size
			wr.ID, wr.Signaled = uint64(posted), posted%signalEvery == signalEvery-1
			sge[0].Offset, wr.RemoteAddr = off, raddr+uint64(off)
			if err := c.PostSend(&wr); err != nil {
				return 0, err
			}
			posted++
		}
		if _, err := p.next(ctx); err != nil {
			return 0, err
		}
		done += signalEvery
		now := time.Now()
		if now.After(deadline) {
			if measuring {
				return float64(done-startDone) * float64(size) / now.Sub(start).Seconds() / (1 << 20), nil
			}
			measuring, start, startDone = true, now, done
			deadline = now.Add(*duration)
		}
	}
}
