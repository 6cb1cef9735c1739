package host

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"time"
)

// The tests of this file hold `rdmafs serve` to the memory bound the
// README's resource section states, and to its fairness, against clients
// that send records and stop, over TCP and RPC-over-RDMA alike.

// Serve's memory at its defaults, as the README states it: the budget of
// large buffers shared by all connections, and per connection a fixed part
// (TCP: the first 64 KiB of a record and a 64 KiB read buffer; RDMA: its
// Send and Receive buffers and a pull and a push buffer).
const (
	serveBudget    = 64 << 20
	tcpConnBytes   = 128 << 10
	rdmaConnBytes  = 6*64*4096 + 8*4096 + 2*(1<<20+64<<10)
	maxConnections = 256
	// runtimeSlack is the Go runtime's own growth under load (stacks,
	// its metadata) on top of what clients make serve hold.
	runtimeSlack = 32 << 20
)

// peakRSS samples the RSS of pid every 20 ms until stop is called, and
// returns the largest.
func peakRSS(t *testing.T, pid int) (stop func() int64) {
	done := make(chan struct{})
	result := make(chan int64)
	go func() {
		var peak int64
		tick := time.NewTicker(20 * time.Millisecond)
		defer tick.Stop()
		for {
			peak = max(peak, vmRSS(t, pid))
			select {
			case <-done:
				result <- peak
				return
			case <-tick.C:
			}
		}
	}()
	return func() int64 { close(done); return <-result }
}

// halfSend opens n connections to addr, each sending send bytes of a
// record that claims claim, and returns them open.
func halfSend(t *testing.T, addr string, n, claim, send int, within time.Duration) []net.Conn {
	t.Helper()
	data := make([]byte, 4+send)
	copy(data, []byte{byte(claim>>24) | 0x80, byte(claim >> 16), byte(claim >> 8), byte(claim)})
	conns := make([]net.Conn, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c, err := net.Dial("tcp", addr)
			if err != nil {
				t.Error(err)
				return
			}
			conns[i] = c
			c.SetWriteDeadline(time.Now().Add(within))
			c.Write(data)
		}()
	}
	wg.Wait()
	return conns
}

// TestServeMemoryCycled: waves of connections that each send most of a
// 1 MiB record and stop, closed and replaced, keep serve within the bound
// the README states (the budget and 128 KiB per connection, at most
// max_connections of them). Before, the garbage each wave left let the
// heap grow to twice what was live: 3,000 such records took serve to
// 361 MB.
func TestServeMemoryCycled(t *testing.T) {
	needHost(t)
	s := startServer(t, "", 0, "insecure")
	pid := s.cmd.Process.Pid
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(s.port))
	mnt := s.mount(t)
	os.ReadDir(mnt)
	base := vmRSS(t, pid)
	stop := peakRSS(t, pid)
	const waves, conns = 10, 300
	for range waves {
		for _, c := range halfSend(t, addr, conns, 1<<20, 1000<<10, time.Second) {
			if c != nil {
				c.Close()
			}
		}
	}
	peak := stop()
	bound := int64(serveBudget + maxConnections*tcpConnBytes + runtimeSlack)
	t.Logf("rdmafs serve RSS: %d MiB before, peak %d MiB over %d records of 1000 KiB of 1 MiB (bound: %d MiB more)",
		base>>20, peak>>20, waves*conns, bound>>20)
	if peak-base > bound {
		t.Errorf("rdmafs serve grew by %d MiB, more than the %d MiB the README states", (peak-base)>>20, bound>>20)
	}
	if _, err := os.ReadDir(mnt); err != nil {
		t.Errorf("the mount after the attack: %v", err)
	}
}

// TestServeRDMAMemoryBounded: mounts writing over RPC-over-RDMA at once
// keep serve within the bound the README states (the budget and a fixed
// part per connection), and serve gives the buffers back once they are
// idle. Before, each RDMA connection had 128 MiB of buffers from connect
// to disconnect: five mounts writing 256 MiB took serve to 694 MB.
func TestServeRDMAMemoryBounded(t *testing.T) {
	needHost(t)
	s := startServer(t, "", 0, append(rdmaServe, "no_root_squash")...)
	pid := s.cmd.Process.Pid
	const mounts, size = 4, 96 << 20
	var mnts []string
	for range mounts {
		mnts = append(mnts, s.mount(t))
	}
	for _, m := range mnts {
		os.ReadDir(m)
	}
	base := vmRSS(t, pid)
	stop := peakRSS(t, pid)
	var wg sync.WaitGroup
	for i, m := range mnts {
		wg.Add(1)
		go func() {
			defer wg.Done()
			out, err := exec.Command("dd", "if=/dev/zero", "of="+filepath.Join(m, fmt.Sprintf("f%d", i)), "bs=1M",
				fmt.Sprintf("count=%d", size>>20), "conv=fsync").CombinedOutput()
			if err != nil {
				t.Errorf("dd to mount %d: %v: %s", i, err, out)
			}
		}()
	}
	wg.Wait()
	peak := stop()
	bound := int64(serveBudget + mounts*rdmaConnBytes + runtimeSlack)
	t.Logf("rdmafs serve RSS: %d MiB before, peak %d MiB with %d RDMA mounts each writing %d MiB (bound: %d MiB more)",
		base>>20, peak>>20, mounts, size>>20, bound>>20)
	if peak-base > bound {
		t.Errorf("rdmafs serve grew by %d MiB, more than the %d MiB the README states", (peak-base)>>20, bound>>20)
	}
	for i := range mounts {
		if fi, err := os.Stat(filepath.Join(s.dir, fmt.Sprintf("f%d", i))); err != nil || fi.Size() != size {
			t.Errorf("f%d on the server: %v", i, err)
		}
	}
	// Idle, the connections give their buffers back (5 to 10 s).
	idleBound := int64(mounts*rdmaConnBytes + runtimeSlack)
	deadline := time.Now().Add(20 * time.Second)
	for {
		rss := vmRSS(t, pid)
		if rss-base <= idleBound {
			t.Logf("idle: %d MiB", rss>>20)
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("idle for 20 s, rdmafs serve holds %d MiB more than before, more than %d MiB", (rss-base)>>20, idleBound>>20)
		}
		time.Sleep(200 * time.Millisecond)
	}
}
