package host

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/rdmafs/rdmafs/test/e2e/e2etest"
	"github.com/rdmafs/rdmafs/test/e2e/workload"
)

// The RDMA options over the soft provider, as the guest's TestRDMAMatrix
// runs them over rxe against knfsd: every memreg strategy, the smallest,
// default and largest slot table, 1 KiB and 4 KiB inline thresholds; then
// the server killed in the middle of a WRITE and of a READ, under a hard
// and a soft mount, for every strategy. And the server side, as the guest
// runs the kernel NFS/RDMA client against `rdmafs serve`: serve over RDMA
// with each of its options (rdma_serve_test.go).

var memregs = []string{"mw", "register", "persistent"}

func TestRDMAMatrix(t *testing.T) {
	needHost(t)
	s := startServer(t, "", 0, append(rdmaServe, "no_root_squash")...)
	check := workload.DirChecker(s.dir)
	for _, memreg := range memregs {
		for _, slots := range []int{4, 128, 16384} {
			for _, inline := range []int{1024, 4096} {
				t.Run(fmt.Sprintf("%s/slots=%d/inline=%d", memreg, slots, inline), func(t *testing.T) {
					mnt := s.mount(t, fmt.Sprintf("memreg=%s,slot_table_entries=%d,max_inline_read=%d,max_inline_write=%d",
						memreg, slots, inline, inline))
					workload.RunSmall(t, mnt, check)
					f := checkRDMAStats(t, mnt)
					if f["connect_count"] != 1 {
						t.Errorf("%d connections: a call broke the connection", f["connect_count"])
					}
					calls := float64(f["sends"])
					t.Logf("memreg=%s: %d calls, %d chunks; per call %.3f binds, %.3f registrations, %.3f local invalidations",
						memreg, f["sends"], f["read_chunk_count"]+f["write_chunk_count"]+f["reply_chunk_count"],
						float64(f["mrs_recycled"]+f["mrs_allocated"])/calls, float64(f["hardway_register_count"])/calls,
						float64(f["local_inv_needed"])/calls)
				})
			}
		}
	}
	testServeOptions(t)
}

// TestRDMAMountErrors: proto=rdma pointed at what is not an RDMA listener
// fails at once, saying what answered there.
func TestRDMAMountErrors(t *testing.T) {
	needHost(t)
	s := startServer(t, "", 0)
	free := freePort(t)
	for _, c := range []struct{ name, port, want string }{
		{"tcp-service", strconv.Itoa(s.port), "is a TCP service, not rdmafs's software RDMA"},
		{"nothing", strconv.Itoa(free), "nothing listens on 127.0.0.1:" + strconv.Itoa(free)},
	} {
		t.Run(c.name, func(t *testing.T) {
			wantMountError(t, fmt.Sprintf("proto=rdma,provider=soft,port=%s,mountport=%d", c.port, s.port), c.want)
		})
	}
}

// freePort returns a loopback TCP port nothing listens on.
func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// TestRDMAServerKilled kills `rdmafs serve` in the middle of a WRITE and
// of a READ and starts it again, for every memreg strategy. Under a hard
// mount the program goes on and nothing is lost; under a soft mount it
// gets EIO, and the first call after the server is back succeeds.
func TestRDMAServerKilled(t *testing.T) {
	needHost(t)
	for _, memreg := range memregs {
		for _, mode := range []string{"hard", "soft"} {
			for _, op := range []string{"write", "read"} {
				t.Run(memreg+"/"+mode+"/"+op, func(t *testing.T) {
					testServerKilled(t, memreg, mode, op)
				})
			}
		}
	}
}

func testServerKilled(t *testing.T, memreg, mode, op string) {
	s := startServer(t, "", 0, append(rdmaServe, "no_root_squash")...)
	opts := "memreg=" + memreg + ",hard,timeo=20"
	if mode == "soft" {
		opts = "memreg=" + memreg + ",soft,timeo=5,retrans=1"
	}
	mnt := s.mount(t, opts)
	const size = 64 << 20
	name := filepath.Join(mnt, "f")
	if op == "read" {
		writeRandom(t, filepath.Join(s.dir, "f"), 5, size)
		e2etest.DropCaches(t)
	}
	var out bytes.Buffer
	var prog *exec.Cmd
	if op == "write" {
		prog = exec.Command(testBin, "-test.run=^$", "write-random", name)
		prog.Env = append(os.Environ(), asUserEnv+"=1", "RDMAFS_TEST_SIZE="+strconv.Itoa(size), "RDMAFS_TEST_SEED=9")
	} else {
		prog = exec.Command("sha256sum", name)
	}
	prog.Stdout, prog.Stderr = &out, &out
	if err := prog.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- prog.Wait() }()
	// Kill the server once a quarter has gone through.
	for deadline := time.Now().Add(time.Minute); progress(prog.Process.Pid, op) < size/4; {
		if time.Now().After(deadline) {
			t.Fatalf("the %s did not get going", op)
		}
		select {
		case err := <-done:
			t.Fatalf("the %s ended before the server was killed: %v: %s", op, err, out.String())
		case <-time.After(5 * time.Millisecond):
		}
	}
	s.kill()
	t.Logf("server killed mid-%s", op)
	restart := func() {
		startServer(t, s.dir, s.port, "proto=rdma", "provider=soft", "rdmaport="+strconv.Itoa(s.rdmaPort), "no_root_squash")
	}
	var want string
	if op == "read" {
		sum, _ := e2etest.FileSum(t, filepath.Join(s.dir, "f"))
		want = hex.EncodeToString(sum[:])
	}

	if mode == "hard" {
		time.Sleep(2 * time.Second)
		restart()
		select {
		case err := <-done:
			if err != nil {
				t.Fatalf("%s across the restart: %v: %s", op, err, out.String())
			}
		case <-time.After(2 * time.Minute):
			prog.Process.Kill()
			t.Fatalf("the %s did not finish after the server came back", op)
		}
		got := strings.Fields(out.String())
		if op == "write" {
			sum, n := e2etest.FileSum(t, filepath.Join(s.dir, "f"))
			want = hex.EncodeToString(sum[:])
			if n != size {
				t.Fatalf("server copy has %d bytes, want %d", n, size)
			}
		}
		if len(got) == 0 || got[0] != want {
			t.Fatalf("%s: sha256 %q, server's copy %s", op, got, want)
		}
		return
	}

	// soft: the program fails with EIO
	select {
	case <-done:
	case <-time.After(time.Minute):
		prog.Process.Kill()
		t.Fatalf("the %s on a soft mount of a dead server did not fail in a minute", op)
	}
	o := out.String()
	if !(op == "write" && strings.TrimSpace(o) == strconv.Itoa(int(syscall.EIO))) && !(op == "read" && strings.Contains(o, "Input/output error")) {
		t.Fatalf("%s on a soft mount of a dead server: %q, want EIO", op, o)
	}
	restart()
	start := time.Now()
	after := filepath.Join(mnt, "after")
	if err := os.WriteFile(after, []byte("back"), 0o644); err != nil {
		t.Fatalf("the first call after the server came back: %v", err)
	}
	if b, err := os.ReadFile(filepath.Join(s.dir, "after")); err != nil || string(b) != "back" {
		t.Fatalf("server copy of a file written after the restart: %q, %v", b, err)
	}
	if d := time.Since(start); d > 2*time.Second {
		t.Errorf("the first call after the server came back took %v", d)
	} else {
		t.Logf("first call after the restart done in %v", d.Round(time.Millisecond))
	}
	if op == "read" {
		got, err := os.ReadFile(name)
		if err != nil {
			t.Fatalf("read after the restart: %v", err)
		}
		if s := sha256.Sum256(got); hex.EncodeToString(s[:]) != want {
			t.Fatal("read after the restart differs from the server's copy")
		}
	}
}

// progress is how far the program pid has come: bytes it wrote or read.
func progress(pid int, op string) int64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/io", pid))
	if err != nil {
		return 0
	}
	key := "rchar: "
	if op == "write" {
		key = "wchar: "
	}
	for l := range strings.SplitSeq(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, key); ok {
			n, _ := strconv.ParseInt(v, 10, 64)
			return n
		}
	}
	return 0
}
