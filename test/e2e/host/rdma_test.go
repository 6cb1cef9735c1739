package host

import (
	"fmt"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/rdmafs/rdmafs/test/e2e/e2etest"
	"github.com/rdmafs/rdmafs/test/e2e/workload"
)

// The same checks over RPC-over-RDMA, with the soft verbs provider (this
// machine has no RDMA device): client and server are rdmafs.

func TestRDMAWorkload(t *testing.T) {
	needHost(t)
	s := startServer(t, "", 0, append(rdmaServe, "no_root_squash")...)
	mnt := s.mount(t)
	workload.Run(t, mnt, workload.DirChecker(s.dir))
	checkRDMAStats(t, mnt)
}

func TestRDMAGiBFile(t *testing.T) {
	needHost(t)
	s := startServer(t, "", 0, append(rdmaServe, "no_root_squash")...)
	mnt := s.mount(t)
	const size = 1 << 30
	want := writeRandom(t, filepath.Join(mnt, "big"), 3, size)
	if got, n := e2etest.FileSum(t, filepath.Join(s.dir, "big")); got != want || n != size {
		t.Fatalf("server copy: %d bytes, sha256 %x, want %x", n, got[:8], want[:8])
	}
	e2etest.DropCaches(t)
	if got, n := e2etest.FileSum(t, filepath.Join(mnt, "big")); got != want || n != size {
		t.Fatalf("read back: %d bytes, sha256 %x, want %x", n, got[:8], want[:8])
	}
	f := checkRDMAStats(t, mnt)
	// 1 GiB of aligned 1 MiB I/O moves by chunks from and into the
	// transport's buffers: nothing is copied on the way.
	if f["pullup_copy_count"] != 0 || f["fixup_copy_count"] != 0 || f["payload_copies"] != 0 {
		t.Errorf("copies: pullup %d, fixup %d, payload %d; want 0", f["pullup_copy_count"], f["fixup_copy_count"], f["payload_copies"])
	}
	if f["read_chunk_count"] < 1024 || f["write_chunk_count"] < 1024 {
		t.Errorf("read chunks %d, write chunks %d; want at least 1024 each for 1 GiB", f["read_chunk_count"], f["write_chunk_count"])
	}
}

// TestRDMAServerRestartDuringWrite: as over TCP, a hard mount rides through
// a restart of the server in the middle of a large write.
func TestRDMAServerRestartDuringWrite(t *testing.T) {
	needHost(t)
	s := startServer(t, "", 0, append(rdmaServe, "no_root_squash")...)
	testRestartDuringWrite(t, s, func() *server {
		return startServer(t, s.dir, s.port, "proto=rdma", "provider=soft", "rdmaport="+strconv.Itoa(s.rdmaPort), "no_root_squash")
	})
}

// rdmaFields are the fields of the "xprt: rdma" line of `rdmafs stats`.
var rdmaFields = []string{"port", "bind_count", "connect_count", "connect_time", "idle_time", "sends", "recvs",
	"bad_xids", "req_u", "bklog_u", "read_chunk_count", "write_chunk_count", "reply_chunk_count",
	"total_rdma_request", "total_rdma_reply", "pullup_copy_count", "fixup_copy_count", "hardway_register_count",
	"failed_marshal_count", "bad_reply_count", "nomsg_call_count", "mrs_recycled", "mrs_orphaned", "mrs_allocated",
	"local_inv_needed", "empty_sendctx_q", "reply_waits_for_send", "payload_copies", "registered_bytes",
	"registered_peak_bytes", "credits_granted", "write_chunks_placed"}

// checkRDMAStats reads the mount's xprt line, checks it is RPC-over-RDMA
// with no failure counted, and returns its fields.
func checkRDMAStats(t *testing.T, mnt string) map[string]uint64 {
	t.Helper()
	code, out := rdmafs(t, 10*time.Second, "stats", mnt)
	if code != 0 {
		t.Fatalf("rdmafs stats: %s", out)
	}
	var line string
	for l := range strings.SplitSeq(out, "\n") {
		if strings.HasPrefix(strings.TrimSpace(l), "xprt:") {
			line = strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(l), "xprt:"))
		}
	}
	fields := strings.Fields(line)
	if len(fields) != len(rdmaFields)+1 || fields[0] != "rdma" {
		t.Fatalf("xprt line %q: want rdma and %d fields", line, len(rdmaFields))
	}
	f := make(map[string]uint64)
	for i, name := range rdmaFields {
		v, err := strconv.ParseUint(fields[i+1], 10, 64)
		if err != nil {
			t.Fatalf("field %s = %q", name, fields[i+1])
		}
		f[name] = v
	}
	if f["bad_reply_count"] != 0 || f["failed_marshal_count"] != 0 || f["bad_xids"] != 0 {
		t.Errorf("failures counted: %s", fmt.Sprint(f))
	}
	return f
}

// TestRDMANoDevice: proto=rdma with the default ibverbs provider on a host
// without an RDMA device fails the mount with an error that says so and
// names provider=soft.
func TestRDMANoDevice(t *testing.T) {
	needHost(t)
	if devs, _ := filepath.Glob("/sys/class/infiniband/*"); len(devs) > 0 {
		t.Skip("this host has an RDMA device")
	}
	s := startServer(t, "", 0)
	mnt := t.TempDir()
	code, out := rdmafs(t, time.Minute, "-o", fmt.Sprintf("proto=rdma,mountport=%d", s.port), "127.0.0.1:/", mnt)
	if code != 32 || !strings.Contains(out, "no RDMA device") || !strings.Contains(out, "provider=soft") {
		t.Errorf("exit %d, output %q: want 32 and an error naming provider=soft", code, out)
	}
	if e2etest.Mounted(mnt) {
		t.Error("left mounted")
	}
}

// TestRDMAInlineSizes: symlinks, listings and ACLs whose replies (and
// calls) fall on both sides of the 1 KiB and 4 KiB inline thresholds read
// back through an RDMA mount of serve, with the default inline size, with
// 1 KiB, and with listings by READDIR and by READDIRPLUS in replies of at
// most 4 KiB (rsize=4096).
func TestRDMAInlineSizes(t *testing.T) {
	needHost(t)
	s := startServer(t, "", 0, append(rdmaServe, "no_root_squash")...)
	for _, opts := range []string{"rdirplus", "max_inline_read=1024,max_inline_write=1024", "nordirplus", "rsize=4096"} {
		t.Run(opts, func(t *testing.T) {
			mnt := s.mount(t, opts)
			if failed := workload.RunInlineSizes(t, mnt, s.dir, true); len(failed) > 0 {
				t.Errorf("did not read back through the mount: %v", failed)
			}
			if f := checkRDMAStats(t, mnt); f["write_chunk_count"] == 0 || f["reply_chunk_count"] == 0 {
				t.Errorf("%d write chunks and %d reply chunks: the long replies did not come in chunks", f["write_chunk_count"], f["reply_chunk_count"])
			}
		})
	}
}
