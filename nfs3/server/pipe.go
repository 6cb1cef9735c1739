package server

import (
	"encoding/binary"
	"io"
	"net"
	"sync"
	"time"
)

// pipeConn is the in-memory connection between a worker and its go-nfs
// connection goroutine. The worker puts one record-marked call at a time in;
// go-nfs reads it, serves it, and writes the record-marked reply, possibly in
// several Writes; the worker gets back whole reply records.
//
// The two ends close differently: go-nfs calls Close (net.Conn) when it
// gives up on the connection or sees the end of input; the worker calls
// shutdown. Each is observable on its own channel, so the worker can tell
// "go-nfs died" from "I am stopping" and can wait for go-nfs to be done.
type pipeConn struct {
	calls   chan []byte // record-marked calls, to go-nfs
	replies chan []byte // reply records without marks, to the worker
	stop    chan struct{}
	gone    chan struct{} // closed when go-nfs closed its end

	stopOnce, goneOnce sync.Once

	// Used only by go-nfs's reading goroutine.
	pending []byte
	// Used only by go-nfs's writing goroutine.
	inbuf, record []byte
}

func newPipeConn() *pipeConn {
	return &pipeConn{
		calls:   make(chan []byte, 1),
		replies: make(chan []byte, 1),
		stop:    make(chan struct{}),
		gone:    make(chan struct{}),
	}
}

// Read hands go-nfs the current call; io.EOF once the worker shut down.
func (c *pipeConn) Read(p []byte) (int, error) {
	if len(c.pending) == 0 {
		select {
		case rec := <-c.calls:
			c.pending = rec
		case <-c.stop:
			return 0, io.EOF
		case <-c.gone:
			return 0, net.ErrClosed
		}
	}
	n := copy(p, c.pending)
	c.pending = c.pending[n:]
	return n, nil
}

// Write takes go-nfs's reply bytes and passes each complete record on.
func (c *pipeConn) Write(p []byte) (int, error) {
	select {
	case <-c.stop:
		return 0, net.ErrClosed
	case <-c.gone:
		return 0, net.ErrClosed
	default:
	}
	c.inbuf = append(c.inbuf, p...)
	for len(c.inbuf) >= 4 {
		mark := binary.BigEndian.Uint32(c.inbuf)
		n := int(mark &^ lastFragment)
		if len(c.inbuf)-4 < n {
			break
		}
		c.record = append(c.record, c.inbuf[4:4+n]...)
		c.inbuf = c.inbuf[:copy(c.inbuf, c.inbuf[4+n:])]
		if mark&lastFragment == 0 {
			continue
		}
		rec := c.record
		c.record = nil
		select {
		case c.replies <- rec:
		case <-c.stop:
			return 0, net.ErrClosed
		}
	}
	return len(p), nil
}

// Close is go-nfs's end closing.
func (c *pipeConn) Close() error {
	c.goneOnce.Do(func() { close(c.gone) })
	return nil
}

// shutdown is the worker's end closing: go-nfs reads EOF and stops.
func (c *pipeConn) shutdown() { c.stopOnce.Do(func() { close(c.stop) }) }

func (c *pipeConn) LocalAddr() net.Addr              { return pipeAddr{} }
func (c *pipeConn) RemoteAddr() net.Addr             { return pipeAddr{} }
func (c *pipeConn) SetDeadline(time.Time) error      { return nil }
func (c *pipeConn) SetReadDeadline(time.Time) error  { return nil }
func (c *pipeConn) SetWriteDeadline(time.Time) error { return nil }

type pipeAddr struct{}

func (pipeAddr) Network() string { return "pipe" }
func (pipeAddr) String() string  { return "rdmafs-worker" }

// pipeListener gives go-nfs's Serve its one connection, then blocks until
// the worker shuts down, which ends Serve.
type pipeListener struct {
	conn *pipeConn
	once sync.Once
}

func (l *pipeListener) Accept() (net.Conn, error) {
	var c net.Conn
	l.once.Do(func() { c = l.conn })
	if c != nil {
		return c, nil
	}
	<-l.conn.stop
	return nil, net.ErrClosed
}

func (l *pipeListener) Close() error   { return nil }
func (l *pipeListener) Addr() net.Addr { return pipeAddr{} }
