package xprtrdma

import (
	"sync"

	"github.com/rdmafs/rdmafs/verbs"
)

// The Sends in flight: most are posted unsignaled, and the completion of
// a signaled one tells that every Send posted before it is done too, as
// a queue pair completes its send queue in order (the kernel's sendctx
// ring, rpcrdma_sendctx_put_locked, which signals one Send in
// re_send_batch). A signaled Send per call would be a second completion,
// and a second wake-up of the caller sleeping on the completion queue
// (reaper.go), next to its reply's Receive.

// sendQueue is the requests whose Sends are posted and not yet known to
// be complete, in the order they were posted.
type sendQueue struct {
	mu         sync.Mutex
	posted     []*request
	unsignaled int // Sends posted unsignaled since the last signaled one
	batch      int // every batch-th Send is signaled
}

// sendBatch is how many Sends share one signaled completion for a table
// of credits requests: an eighth of them, as the kernel's re_send_batch.
// A request waits for its Send's completion before it is free, so at
// most batch-1 requests wait on an idle connection for a Send that is
// never posted: the others always suffice for the next call.
func sendBatch(credits int) int { return max(1, credits/8) }

// post posts r's chain, whose last work request is r's Send, signaled
// if its turn has come, and keeps r until a completion says its Send is
// done. The caller has counted the Send in r.waiting.
func (q *sendQueue) post(conn verbs.Conn, r *request) error {
	q.mu.Lock()
	defer q.mu.Unlock()
	signaled := q.unsignaled+1 >= q.batch
	r.sendWR.Signaled = signaled
	if err := conn.PostSend(r.chain()); err != nil {
		return err
	}
	q.posted = append(q.posted, r)
	if signaled {
		q.unsignaled = 0
	} else {
		q.unsignaled++
	}
	return nil
}

// completed takes out r and every request posted before it, whose Sends
// a completion of r's (its success, or a flush) has shown done, and
// calls done for each, in order.
func (q *sendQueue) completed(r *request, done func(*request)) {
	q.mu.Lock()
	defer q.mu.Unlock()
	n := -1
	for i, p := range q.posted {
		if p == r {
			n = i + 1
			break
		}
	}
	if n < 0 {
		return // not posted through the queue (a local invalidation's)
	}
	for _, p := range q.posted[:n] {
		done(p)
	}
	rest := copy(q.posted, q.posted[n:])
	clear(q.posted[rest:])
	q.posted = q.posted[:rest]
}

// drain takes out every request, once the queue pair is gone and nothing
// more completes, and calls done for each.
func (q *sendQueue) drain(done func(*request)) {
	q.mu.Lock()
	defer q.mu.Unlock()
	for _, p := range q.posted {
		done(p)
	}
	clear(q.posted)
	q.posted = q.posted[:0]
}
