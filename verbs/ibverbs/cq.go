//go:build cgo && linux

package ibverbs

// #include "helpers.h"
import "C"

import (
	"context"
	"errors"
	"fmt"
	"os"
	"syscall"
	"time"
	"unsafe"

	"github.com/rdmafs/rdmafs/verbs"
)

// debug, set by RDMAFS_IBVERBS_DEBUG=1 in the environment, traces every
// work completion and drain to standard error: what a device did, for a
// fault that only shows on hardware or rxe.
var debug = os.Getenv("RDMAFS_IBVERBS_DEBUG") != ""

// spinsPerCall is how many times a polling Wait polls the CQ in C before
// it comes back to Go to look at its context. A cgo call that lasts
// longer than the scheduler's sysmon tick (20 µs) has its P handed to
// another thread, which then competes with the spinning ones for CPUs.
const spinsPerCall = 64

var statuses = map[C.uint32_t]verbs.Status{
	C.IBV_WC_SUCCESS:           verbs.StatusSuccess,
	C.IBV_WC_LOC_LEN_ERR:       verbs.StatusLocLenErr,
	C.IBV_WC_LOC_PROT_ERR:      verbs.StatusLocProtErr,
	C.IBV_WC_WR_FLUSH_ERR:      verbs.StatusWRFlushErr,
	C.IBV_WC_REM_ACCESS_ERR:    verbs.StatusRemAccessErr,
	C.IBV_WC_REM_OP_ERR:        verbs.StatusRemOpErr,
	C.IBV_WC_RETRY_EXC_ERR:     verbs.StatusRetryExcErr,
	C.IBV_WC_RNR_RETRY_EXC_ERR: verbs.StatusRNRRetryExcErr,
	C.IBV_WC_REM_INV_REQ_ERR:   verbs.StatusRemInvReqErr,
	C.IBV_WC_MW_BIND_ERR:       verbs.StatusMWBindErr,
}

var compOps = [...]verbs.CompletionOp{
	verbs.OpSend:        verbs.CompSend,
	verbs.OpSendWithInv: verbs.CompSend,
	verbs.OpRDMAWrite:   verbs.CompRDMAWrite,
	verbs.OpRDMARead:    verbs.CompRDMARead,
	verbs.OpBindMW:      verbs.CompBindMW,
	verbs.OpLocalInv:    verbs.CompLocalInv,
}

// pollLocked polls up to 32 completions from the CQ onto c.pending. It
// returns how many, and the error an error completion means for the
// connection (the caller ends it).
func (c *conn) pollLocked() (int, error, error) {
	k := C.rdmafs_poll(c.cq, 32, c.wcs)
	if k < 0 {
		return 0, &verbs.VerbError{Verb: "ibv_poll_cq", Err: syscall.Errno(-k)}, nil
	}
	return c.takeLocked(int(k))
}

// pollArmLocked is pollLocked that, finding the CQ empty, arms it for a
// completion event and polls again, in one call into C. armed reports
// whether it armed the CQ.
func (c *conn) pollArmLocked() (n int, armed bool, err, failure error) {
	var arm C.int
	k := C.rdmafs_poll_arm(c.cq, 32, c.wcs, &arm)
	if k < 0 {
		verb := "ibv_poll_cq"
		if arm < 0 {
			verb = "ibv_req_notify_cq"
		}
		return 0, false, &verbs.VerbError{Verb: verb, Err: syscall.Errno(-k)}, nil
	}
	n, err, failure = c.takeLocked(int(k))
	return n, arm > 0, err, failure
}

// takeLocked converts the k completions C left in c.wcs onto c.pending.
func (c *conn) takeLocked(k int) (int, error, error) {
	var failure error
	raw := unsafe.Slice(c.wcs, int(k))
	n := 0
	for i := range raw {
		wc, ok, f := c.convert(&raw[i])
		if f != nil && failure == nil {
			failure = f
		}
		if ok {
			c.pending = append(c.pending, wc)
			n++
		}
	}
	return n, nil, failure
}

// convert maps a device completion to the user's; ok is false for the
// provider's own drain markers.
func (c *conn) convert(w *C.struct_rdmafs_wc) (wc verbs.Completion, ok bool, failure error) {
	st, known := statuses[w.status]
	if !known {
		st = verbs.StatusGeneralErr
	}
	id := uint64(w.wr_id)
	wc = verbs.Completion{Status: st, VendorErr: uint32(w.vendor_err)}
	if debug {
		fmt.Fprintf(os.Stderr, "DEBUG qp %d wc wr_id %#x status %d opcode %d vendor %#x len %d flags %#x inv %#x\n", c.qpNum, id, w.status, w.opcode, w.vendor_err, w.byte_len, w.flags, w.inv_rkey)
	}
	if id&markerBit != 0 {
		c.sqDrained = true
		return wc, false, nil
	}
	if id&recvBit != 0 {
		seq := id & seqMask
		c.recvMu.Lock()
		wc.ID = c.rq[seq%uint64(len(c.rq))]
		c.rqDone = seq + 1
		c.recvMu.Unlock()
		wc.Op = verbs.CompRecv
		wc.ByteLen = uint32(w.byte_len)
		// IBV_WC_IP_CSUM_OK is meaningless for a receive on an RC
		// queue pair: on rxe it is the invalidation (see device.rxe).
		if w.flags&C.IBV_WC_WITH_INV != 0 || c.dev.rxe && w.flags&C.IBV_WC_IP_CSUM_OK != 0 {
			wc.HasInvalidate, wc.InvalidatedRKey = true, uint32(w.inv_rkey)
		}
	} else {
		c.sendMu.Lock()
		slot := c.sq[id%uint64(len(c.sq))]
		c.sqDone = id + 1
		c.sendMu.Unlock()
		wc.ID = slot.id
		wc.Op = compOps[slot.op]
		if slot.op == verbs.OpRDMARead {
			wc.ByteLen = uint32(w.byte_len)
		}
		if slot.mw != nil && st != verbs.StatusSuccess {
			slot.mw.revert(slot.newKey, slot.oldKey)
		}
	}
	if st != verbs.StatusSuccess && st != verbs.StatusWRFlushErr {
		// As on the device: an error completion has moved the queue
		// pair to the error state.
		failure = fmt.Errorf("%w: %v (vendor error %#x): work request %d", verbs.ErrDisconnected, st, wc.VendorErr, wc.ID)
	}
	return wc, true, failure
}

func (c *conn) Poll(wcs []verbs.Completion) (int, error) {
	c.cqMu.Lock()
	if c.cqGone {
		c.cqMu.Unlock()
		return 0, &verbs.VerbError{Verb: "ibv_poll_cq", Err: syscall.EBADF}
	}
	var failure error
	// What Wait took first (no need to ask the CQ again), else what the
	// CQ has.
	for len(c.pending) == 0 {
		k, err, f := c.pollLocked()
		if err != nil {
			c.cqMu.Unlock()
			return 0, err
		}
		if f != nil && failure == nil {
			failure = f
		}
		if k == 0 {
			break
		}
	}
	n := copy(wcs, c.pending)
	c.pending = c.pending[:copy(c.pending, c.pending[n:])]
	c.cqMu.Unlock()
	if failure != nil {
		c.fail(failure, true)
	}
	return n, nil
}

func (c *conn) Wait(ctx context.Context) error {
	for {
		if c.cfg.Polling && !c.ended() {
			ready, err, failure := c.spin()
			if failure != nil {
				c.fail(failure, true)
			}
			if err != nil || ready {
				return err
			}
			if err := ctx.Err(); err != nil {
				return err
			}
			continue
		}
		// Look, and if there is nothing, arm the CQ and look again (a
		// completion that came before the arm raises no event).
		arm := !c.armed.Load()
		if arm {
			c.armed.Store(true)
		}
		ready, drained, armed, err := c.check(arm)
		if arm && !armed {
			c.armed.Store(false)
		}
		if err != nil || ready {
			return err
		}
		ended := c.ended()
		if ended && drained {
			return c.Err()
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		if ended {
			// Wait for the flushes' events: the end's interruption
			// has done its work.
			c.compFD.resume()
		}
		if err := c.sleep(ctx); err != nil {
			return err
		}
	}
}

func (c *conn) WaitUntil(deadline time.Time) error {
	for {
		if c.cfg.Polling && !c.ended() {
			ready, err, failure := c.spin()
			if failure != nil {
				c.fail(failure, true)
			}
			if err != nil || ready || !time.Now().Before(deadline) {
				return err
			}
			continue
		}
		arm := !c.armed.Load()
		if arm {
			c.armed.Store(true)
		}
		ready, _, armed, err := c.check(arm)
		if arm && !armed {
			c.armed.Store(false)
		}
		if err != nil || ready || c.ended() {
			return err
		}
		var r C.int
		err = c.compFD.waitUntil(deadline, func() bool {
			r = C.rdmafs_get_cq_event(c.comp)
			return r != 0
		})
		switch {
		case r > 0:
			c.armed.Store(false) // the event disarmed the CQ
		case err == nil && r < 0:
			return &verbs.VerbError{Verb: "ibv_get_cq_event", Err: syscall.Errno(-r)}
		case err != nil:
			// The deadline, the connection's end (interrupt), or
			// Close: the caller looks.
			return nil
		}
	}
}

// sleep waits in the netpoller for the completion channel's next event,
// in the goroutine that polls the CQ: no goroutine takes the event and
// wakes this one, which would be a hand-off between threads per
// completion. It returns early, with nil, when the connection ends (fail
// interrupts the wait); with ctx's error when ctx ends; with an error
// when Close closed the channel.
func (c *conn) sleep(ctx context.Context) error {
	var r C.int
	err := c.compFD.wait(ctx, func() bool {
		r = C.rdmafs_get_cq_event(c.comp)
		return r != 0
	})
	switch {
	case r > 0:
		c.armed.Store(false) // the event disarmed the CQ
		return nil
	case err == nil && r < 0:
		return &verbs.VerbError{Verb: "ibv_get_cq_event", Err: syscall.Errno(-r)}
	case errors.Is(err, os.ErrDeadlineExceeded) && ctx.Err() == nil:
		return nil // interrupted by the connection's end
	case err != nil && c.ended() && ctx.Err() == nil:
		return c.Err() // closed
	}
	return err
}

// check polls, and with arm arms the CQ if it found nothing: ready if
// completions are pending, drained if both drain markers came back, armed
// if it armed the CQ.
func (c *conn) check(arm bool) (ready, drained, armed bool, err error) {
	c.cqMu.Lock()
	if c.cqGone {
		c.cqMu.Unlock()
		return false, false, false, &verbs.VerbError{Verb: "ibv_poll_cq", Err: syscall.EBADF}
	}
	var failure error
	switch {
	case len(c.pending) > 0:
	case arm:
		_, armed, err, failure = c.pollArmLocked()
	default:
		_, err, failure = c.pollLocked()
	}
	c.recvMu.Lock()
	rqDrained := c.rqDone == c.rqPosted
	c.recvMu.Unlock()
	ready, drained = len(c.pending) > 0, c.sqDrained && rqDrained
	c.cqMu.Unlock()
	if failure != nil {
		c.fail(failure, true)
	}
	return ready, drained, armed, err
}

// spin polls the CQ in C for a while (ConnConfig.Polling). failure is
// what an error completion means for the connection.
func (c *conn) spin() (ready bool, err, failure error) {
	c.cqMu.Lock()
	defer c.cqMu.Unlock()
	if c.cqGone {
		return false, &verbs.VerbError{Verb: "ibv_poll_cq", Err: syscall.EBADF}, nil
	}
	if len(c.pending) > 0 {
		return true, nil, nil
	}
	k := C.rdmafs_spin_poll(c.cq, 32, c.wcs, spinsPerCall)
	if k < 0 {
		return false, &verbs.VerbError{Verb: "ibv_poll_cq", Err: syscall.Errno(-k)}, nil
	}
	for _, w := range unsafe.Slice(c.wcs, int(k)) {
		wc, ok, f := c.convert(&w)
		if f != nil && failure == nil {
			failure = f
		}
		if ok {
			c.pending = append(c.pending, wc)
		}
	}
	return len(c.pending) > 0, nil, failure
}

// cmLoop takes the connection's CM events.
func (c *conn) cmLoop() {
	defer c.wg.Done()
	for {
		ev, err := c.ech.next(context.Background())
		if err != nil {
			return // closed
		}
		switch ev.typ {
		case C.RDMA_CM_EVENT_DISCONNECTED:
			c.peerGoneOnce.Do(func() { close(c.peerGone) })
			c.fail(fmt.Errorf("%w: disconnected by the peer", verbs.ErrDisconnected), true)
		case C.RDMA_CM_EVENT_TIMEWAIT_EXIT, C.RDMA_CM_EVENT_ESTABLISHED:
		default:
			c.fail(fmt.Errorf("%w: connection manager event %s (status %d)", verbs.ErrDisconnected, eventName(ev.typ), ev.status), true)
		}
	}
}

func (c *conn) Done() <-chan struct{} { return c.done }

func (c *conn) ended() bool {
	select {
	case <-c.done:
		return true
	default:
		return false
	}
}

func (c *conn) Err() error {
	c.stateMu.Lock()
	defer c.stateMu.Unlock()
	return c.err
}

// fail ends the connection with err (wrapping verbs.ErrDisconnected):
// with disconnect, rdma_disconnect tells the peer (and answers its
// disconnect). The queue pair goes to the error state and the drain
// markers are posted.
func (c *conn) fail(err error, disconnect bool) {
	c.stateMu.Lock()
	if c.err != nil {
		c.stateMu.Unlock()
		return
	}
	c.err = err
	close(c.done)
	c.stateMu.Unlock()
	// Close waits for this (failMu) before it destroys the id.
	c.failMu.Lock()
	if disconnect && !c.idGone {
		C.rdma_disconnect(c.id)
	}
	c.failMu.Unlock()
	c.drain()
	c.compFD.interrupt() // a Wait asleep looks at the end
}

// notifyEstablished passes a COMM_EST async event to the RDMA CM.
func (c *conn) notifyEstablished() {
	c.failMu.Lock()
	defer c.failMu.Unlock()
	if !c.idGone {
		C.rdma_notify(c.id, C.IBV_EVENT_COMM_EST)
	}
}

// drain moves the queue pair to the error state, which flushes every
// work request still posted. Receives always complete, so Wait counts
// them; an unsignaled send that succeeded does not, so a marker is posted
// on the send queue (as the kernel's ib_drain_sq does): its flush comes
// after every send work request before it.
//
// Lock order: Poll holds cqMu while convert takes sendMu (and recvMu), so
// drain must not take cqMu while it holds sendMu.
func (c *conn) drain() {
	c.sendMu.Lock()
	marker := false
	if !c.qpGone {
		var attr C.struct_ibv_qp_attr
		attr.qp_state = C.IBV_QPS_ERR
		C.ibv_modify_qp(c.qp, &attr, C.IBV_QP_STATE)
		if c.sqPosted != c.sqDone {
			post := postDrainMarker
			if c.postMarker != nil {
				post = c.postMarker
			}
			marker = post(c)
		}
	}
	if debug {
		fmt.Fprintf(os.Stderr, "DEBUG qp %d drain: marker %v (posted %d done %d)\n", c.qpNum, marker, c.sqPosted, c.sqDone)
	}
	c.sendMu.Unlock()
	if !marker {
		// Nothing is outstanding, or the device took no marker:
		// nothing more will complete on the send queue.
		c.cqMu.Lock()
		c.sqDrained = true
		c.cqMu.Unlock()
	}
}

// postDrainMarker posts the send queue's drain marker; the caller holds
// sendMu. It reports whether the device took it.
func postDrainMarker(c *conn) bool {
	*c.swr = C.struct_rdmafs_send{wr_id: markerBit, opcode: C.IBV_WR_RDMA_WRITE, flags: C.IBV_SEND_SIGNALED}
	return C.rdmafs_post_send(c.qp, c.swr, 1) == 1
}

func (c *conn) Disconnect() error {
	c.fail(fmt.Errorf("%w: disconnected by this end", verbs.ErrDisconnected), true)
	return nil
}

// Close disconnects, waits (a little) for the peer's answer, stops the
// goroutines and destroys the queue pair, CQ, channels and id.
func (c *conn) Close() error {
	c.stateMu.Lock()
	if c.closed {
		c.stateMu.Unlock()
		return nil
	}
	c.closed = true
	c.stateMu.Unlock()
	c.Disconnect()
	select {
	case <-c.peerGone:
	case <-time.After(time.Second):
	}
	c.failMu.Lock()
	c.idGone = true
	c.failMu.Unlock()
	c.ech.fd.close()
	c.compFD.close()
	c.wg.Wait()
	c.sendMu.Lock()
	c.recvMu.Lock()
	c.qpGone = true
	c.recvMu.Unlock()
	c.sendMu.Unlock()
	c.cqMu.Lock()
	c.cqGone = true
	c.cqMu.Unlock()
	c.release()
	C.rdma_destroy_id(c.id)
	c.ech.destroy()
	c.pd.use(&c.pd.conns, -1)
	return nil
}
