package main

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/rdmafs/rdmafs/verbs"
)

type latencies struct{ median, p99 float64 }

const (
	recvs       = 64 // receives kept posted
	signalEvery = 16 // sends and RDMA operations: one signaled in so many
)

// sender posts SENDs of n bytes from the start of mr, reusing its work
// request (the provider copies what it needs); one in signalEvery is
// signaled, which is what frees the send queue's slots.
type sender struct {
	c   verbs.Conn
	wr  verbs.SendWR
	sge [1]verbs.SGE
}

func newSender(c verbs.Conn, mr verbs.MR, n int) *sender {
	s := &sender{c: c}
	s.sge[0] = verbs.SGE{MR: mr, Length: n}
	s.wr = verbs.SendWR{Opcode: verbs.OpSend, SGL: s.sge[:]}
	if n == 0 {
		s.wr.SGL = nil
	}
	return s
}

func (s *sender) send(i int) error {
	s.wr.ID = uint64(i)
	s.wr.Signaled = i%signalEvery == signalEvery-1
	return s.c.PostSend(&s.wr)
}

// receiver posts receives into slots of mr, reusing its work request.
type receiver struct {
	c   verbs.Conn
	wr  verbs.RecvWR
	sge [1]verbs.SGE
}

func newReceiver(c verbs.Conn, mr verbs.MR, n int) *receiver {
	r := &receiver{c: c}
	r.sge[0] = verbs.SGE{MR: mr, Length: max(n, 1)}
	r.wr.SGL = r.sge[:]
	return r
}

func (r *receiver) post(i int) error {
	r.wr.ID = uint64(i)
	r.sge[0].Offset = 4096 * (1 + i%recvs)
	return r.c.PostRecv(&r.wr)
}

// pong is the server of the latency test: it answers every SEND with one
// until the client disconnects.
func (n *node) pong(c verbs.Conn, size int) error {
	recv, send := newReceiver(c, n.mr, size), newSender(c, n.mr, size)
	for i := range recvs {
		if err := recv.post(i); err != nil {
			return err
		}
	}
	p := newPoller(c)
	for r := 0; ; {
		wc, err := p.next(context.Background())
		if wc.Status == verbs.StatusWRFlushErr {
			return nil // the client is done
		}
		if err != nil {
			return err
		}
		if wc.Op != verbs.CompRecv {
			continue
		}
		if err := recv.post(int(wc.ID)); err != nil {
			return err
		}
		if err := send.send(r); err != nil {
			return err
		}
		r++
	}
}

// latency times SEND round trips with the server.
func (n *node) latency(server string) (latencies, error) {
	size := *latSize
	c, _, _, err := n.dial(server, request{test: testLatency, polling: *polling, size: uint32(size)}, latencyConfig(*polling))
	if err != nil {
		return latencies{}, err
	}
	defer c.Close()
	recv, send := newReceiver(c, n.mr, size), newSender(c, n.mr, size)
	for i := range recvs {
		if err := recv.post(i); err != nil {
			return latencies{}, err
		}
	}
	// Wait until the server has posted its receives too.
	time.Sleep(100 * time.Millisecond)
	// A stall (SoftRoCE under emulation has shown some) fails the test
	// rather than hanging it.
	ctx, cancel := context.WithTimeout(context.Background(), time.Duration(*latIters)*10*time.Millisecond+time.Minute)
	defer cancel()
	iters := *latIters
	warm := min(iters/10, 1000)
	perUS := ticksPerMicrosecond()
	p := newPoller(c)
	samples := make([]uint64, 0, iters)
	for i := range warm + iters {
		start := rdtsc()
		if err := send.send(i); err != nil {
			return latencies{}, err
		}
		for {
			wc, err := p.next(ctx)
			if err != nil {
				return latencies{}, err
			}
			if wc.Op == verbs.CompRecv {
				if err := recv.post(int(wc.ID)); err != nil {
					return latencies{}, err
				}
				break
			}
		}
		if i >= warm {
			samples = append(samples, rdtsc()-start)
		}
	}
	slices.Sort(samples)
	us := func(ticks uint64) float64 { return float64(ticks) / 2 / perUS }
	if *dist {
		fmt.Printf("SEND latency %d B, one way, µs:", size)
		for _, q := range []float64{0, 0.5, 0.9, 0.95, 0.99, 0.999} {
			fmt.Printf(" p%g %.1f", 100*q, us(samples[int(q*float64(len(samples)-1))]))
		}
		fmt.Printf(" max %.1f\n", us(samples[len(samples)-1]))
	}
	return latencies{median: us(samples[len(samples)/2]), p99: us(samples[len(samples)*99/100])}, nil
}
