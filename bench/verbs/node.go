package main

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"log"
	"net"
	"time"

	"github.com/rdmafs/rdmafs/verbs"
)

// node is one end: a device, a PD and a registered region.
type node struct {
	dev  verbs.Device
	pd   verbs.PD
	mem  *verbs.Memory
	mr   verbs.MR
	caps verbs.Caps
}

func open(p verbs.Provider) (*node, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	dev, err := p.Open(ctx, *device, *addr)
	if err != nil {
		return nil, err
	}
	n := &node{dev: dev, caps: dev.Caps()}
	if n.pd, err = dev.AllocPD(); err != nil {
		return nil, err
	}
	if n.mem, err = verbs.AllocMemory(*regionSize); err != nil {
		return nil, err
	}
	n.mr, err = n.pd.Register(n.mem, 0, *regionSize, verbs.AccessLocalWrite|verbs.AccessRemoteWrite|verbs.AccessRemoteRead)
	return n, err
}

func (n *node) close() {
	n.mr.Deregister()
	n.mem.Free()
	n.pd.Close()
	n.dev.Close()
}

// The client's connect request says what it measures; the server's
// accept gives its region's address and rkey.
const (
	testLatency   = 'L'
	testBandwidth = 'B'
)

type request struct {
	test    byte
	polling bool
	size    uint32
}

func (r request) encode() []byte {
	b := []byte{r.test, 0}
	if r.polling {
		b[1] = 1
	}
	return binary.BigEndian.AppendUint32(b, r.size)
}

func decodeRequest(b []byte) (request, error) {
	if len(b) < 6 {
		return request{}, fmt.Errorf("connect request with %d bytes of private data", len(b))
	}
	return request{test: b[0], polling: b[1] == 1, size: binary.BigEndian.Uint32(b[2:])}, nil
}

// latencyConfig and bandwidthConfig size the connections of the tests,
// the same at both ends.
func latencyConfig(polling bool) verbs.ConnConfig {
	return verbs.ConnConfig{SendDepth: 128, RecvDepth: recvs, MaxSendSGE: 1, MaxRecvSGE: 1, Polling: polling}
}

func (n *node) bandwidthConfig(depth int, polling bool) verbs.ConnConfig {
	rd := uint8(min(n.caps.MaxQPRdAtom, n.caps.MaxQPInitRdAtom, 255))
	return verbs.ConnConfig{SendDepth: depth, RecvDepth: 1, MaxSendSGE: 1, MaxRecvSGE: 1,
		ResponderResources: rd, InitiatorDepth: rd, Polling: polling}
}

// serve accepts the client's connections at addr until killed (ready nil)
// or for ever in a goroutine (ready gets the address).
func (n *node) serve(addr string, ready chan<- string) error {
	ln, err := n.pd.Listen(addr)
	if err != nil {
		return err
	}
	defer ln.Close()
	if ready != nil {
		ready <- ln.Addr()
	} else {
		log.Printf("serving at %s; kill to stop", ln.Addr())
		go func() {
			waitSignal()
			ln.Close()
		}()
	}
	pdata := binary.BigEndian.AppendUint64(nil, n.mr.Addr())
	pdata = binary.BigEndian.AppendUint32(pdata, n.mr.RKey())
	for {
		r, err := ln.Accept(context.Background())
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return nil
			}
			return err
		}
		req, err := decodeRequest(r.PrivateData())
		if err != nil {
			r.Reject(nil)
			continue
		}
		var cfg verbs.ConnConfig
		switch req.test {
		case testLatency:
			cfg = latencyConfig(req.polling)
		case testBandwidth:
			cfg = n.bandwidthConfig(1, req.polling)
		default:
			r.Reject(nil)
			continue
		}
		cfg.PrivateData = pdata
		c, err := r.Accept(cfg)
		if err != nil {
			log.Printf("accept: %v", err)
			continue
		}
		// One test at a time, as perftest's server.
		if req.test == testLatency {
			if err := n.pong(c, int(req.size)); err != nil && !errors.Is(err, verbs.ErrDisconnected) {
				log.Printf("latency server: %v", err)
			}
		} else {
			<-c.Done() // one-sided: the client disconnects when done
		}
		c.Close()
	}
}

// dial connects to the server for a test and returns the server region's
// address and rkey.
func (n *node) dial(server string, req request, cfg verbs.ConnConfig) (verbs.Conn, uint64, uint32, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cfg.PrivateData = req.encode()
	c, err := n.pd.Dial(ctx, server, cfg)
	if err != nil {
		return nil, 0, 0, err
	}
	p := c.PeerPrivateData()
	if len(p) < 12 {
		c.Close()
		return nil, 0, 0, fmt.Errorf("server's accept has %d bytes of private data", len(p))
	}
	return c, binary.BigEndian.Uint64(p), binary.BigEndian.Uint32(p[8:]), nil
}

// poller takes completions from a connection, one at a time.
type poller struct {
	c   verbs.Conn
	buf []verbs.Completion
	n   int
	i   int
}

func newPoller(c verbs.Conn) *poller { return &poller{c: c, buf: make([]verbs.Completion, 16)} }

func (p *poller) next(ctx context.Context) (verbs.Completion, error) {
	for p.i == p.n {
		n, err := p.c.Poll(p.buf)
		if err != nil {
			return verbs.Completion{}, err
		}
		p.n, p.i = n, 0
		if n == 0 {
			if err := p.c.Wait(ctx); err != nil {
				return verbs.Completion{}, err
			}
		}
	}
	wc := p.buf[p.i]
	p.i++
	if wc.Status != verbs.StatusSuccess {
		return wc, wc.Err()
	}
	return wc, nil
}
