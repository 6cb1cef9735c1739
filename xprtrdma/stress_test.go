package xprtrdma

import (
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/rdmafs/rdmafs/nfs3"
	"github.com/rdmafs/rdmafs/rpcrdma"
	"github.com/rdmafs/rdmafs/svcrdma"
	"github.com/rdmafs/rdmafs/test/seed"
	"github.com/rdmafs/rdmafs/verbs"
)

// TestStressFaults runs many CREATEs, WRITEs and READs at once through a
// transport with few chunk buffers (calls wait for them) while the soft
// provider breaks connections and fails completions at random. Every
// call must end with the right data on a later connection, in bounded
// time: a lock held across a wait, or taken in the wrong order, shows
// as a hang here (and the race detector watches the rest). The seed is
// printed; RDMAFS_STRESS_SEED replays it.
func TestStressFaults(t *testing.T) {
	s := seed.New(t, "RDMAFS_STRESS_SEED")
	for _, m := range []MemReg{MemRegMW, MemRegRegister, MemRegPersistent} {
		t.Run(m.String(), func(t *testing.T) {
			stress(t, m, rand.New(rand.NewPCG(s, uint64(m))))
		})
	}
}

func stress(t *testing.T, m MemReg, rnd *rand.Rand) {
	b := newTestBed(t, svcrdma.Config{Credits: 8})
	c, tr := b.client(t, Config{MemReg: m, Credits: 16, ChunkBuffers: 1, MaxIO: 256 << 10})
	// Each worker goes on for this long, through many faults.
	const workers, size, duration = 12, 40 << 10, 3 * time.Second
	end := time.Now().Add(duration)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	context.AfterFunc(ctx, func() {
		if ctx.Err() == context.DeadlineExceeded {
			buf := make([]byte, 1<<20)
			t.Logf("calls still waiting after a minute; goroutines:\n%s", buf[:runtime.Stack(buf, true)])
		}
	})

	stop := make(chan struct{})
	var faults sync.WaitGroup
	faults.Add(1)
	go func() {
		defer faults.Done()
		// One fault per connection, once it has carried a reply: a
		// connection that worked is redialled at once, while one that
		// fails before any reply backs off (seconds), which a fault
		// injected into every new connection would turn into a
		// livelock of the test's making.
		ops := []verbs.CompletionOp{verbs.CompRecv, verbs.CompSend}
		var seenConn, seenRecvs uint64
		hit := ^uint64(0)
		for {
			select {
			case <-stop:
				return
			case <-time.After(time.Duration(20+rnd.IntN(150)) * time.Millisecond):
			}
			conn, recvs := tr.stats.ConnectCount.Load(), tr.stats.Recvs.Load()
			if conn != seenConn {
				seenConn, seenRecvs = conn, recvs
				continue
			}
			if conn == hit || recvs == seenRecvs {
				continue
			}
			hit = conn
			if rnd.IntN(3) > 0 {
				b.prov.DropConnections()
			} else {
				b.prov.FailNextCompletion(ops[rnd.IntN(len(ops))], verbs.StatusGeneralErr)
			}
		}
	}()

	var wg sync.WaitGroup
	errs := make(chan error, workers)
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			data := bytes.Repeat([]byte{byte(w + 1)}, size)
			// A new file each round: a WRITE retried on a new
			// connection may also run late on the server from the
			// old one (as with any NFS server), which must not
			// overwrite a later round's data.
			for r := 0; r < 3 || time.Now().Before(end); r++ {
				data[r%size] = byte(r)
				name := fmt.Sprintf("w%d-r%d", w, r)
				var cres nfs3.CreateResult
				if err := c.Create(ctx, root, &b.root, name, nfs3.Unchecked, &nfs3.Sattr{SetMode: true, Mode: 0o644}, nfs3.Verf{}, &cres); err != nil {
					errs <- fmt.Errorf("worker %d round %d: CREATE: %w", w, r, err)
					return
				}
				var wres nfs3.WriteResult
				if err := c.Write(ctx, root, &cres.FH, 0, data, nfs3.FileSync, &wres); err != nil {
					errs <- fmt.Errorf("worker %d round %d: WRITE: %w", w, r, err)
					return
				}
				var rres nfs3.ReadResult
				err := c.Read(ctx, root, &cres.FH, 0, size, &rres)
				same := err == nil && bytes.Equal(rres.Data, data)
				rres.Release()
				if err != nil {
					errs <- fmt.Errorf("worker %d round %d: READ: %w", w, r, err)
					return
				}
				if !same {
					errs <- fmt.Errorf("worker %d round %d: read back differs", w, r)
					return
				}
			}
		}()
	}
	wg.Wait()
	close(stop)
	faults.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	t.Logf("memreg=%v: %d connections, %d credit waits", m, tr.stats.ConnectCount.Load(), tr.stats.creditWaits.Load())
	// Every buffer comes back once the calls are done.
	deadline := time.Now().Add(10 * time.Second)
	for inUse(tr.chunks) != 0 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if n := inUse(tr.chunks); n != 0 {
		t.Errorf("%d chunk buffers still in use after every call ended", n)
	}
}

// inUse is how many blocks of the arena are handed out.
func inUse(a *rpcrdma.Arena) int { return a.Out() }
