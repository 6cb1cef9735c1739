package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// sampleStats is a block as rdmafs writes it, with a mount point that has
// a space in it (escaped as \040, as the kernel escapes it).
const sampleStats = `device srv:/export mounted on /mnt/a\040b with fstype nfs statvers=1.1
	opts:	vers=3,proto=rdma,rsize=1048576,wsize=1048576
	age:	10
	caps:	caps=0x7,wtmult=0,dtsize=131072,bsize=0,namlen=255
	sec:	flavor=1,pseudoflavor=1
	events:	1 0 1 0 4 4 0 0 0 1 0 5 0 0 4 0 0 4 0 0 0 0 0 0 0 0 0 
	bytes:	300000 3150733 0 1048576 300000 4199309 74 771 
	RPC iostats version: 1.1  p/v: 100003/3 (nfs)
	xprt:	rdma 0 1 1 0 0 19 19 0 25 0 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19 4456448 8650752
	per-op statistics
	        NULL: 0 0 0 0 0 0 0 0 0
	        READ: 10 12 2 960 10485760 5 40 50 1
	       WRITE: 20 20 0 20971520 1920 0 60 70 0

`

func TestParseMountStats(t *testing.T) {
	ms, err := parseMountStats(sampleStats + strings.Replace(sampleStats, "/mnt/a\\040b", "/mnt/c", 1))
	if err != nil {
		t.Fatal(err)
	}
	if len(ms) != 2 || ms[0].Mountpoint != "/mnt/a b" || ms[1].Mountpoint != "/mnt/c" {
		t.Fatalf("mounts %+v", ms)
	}
	m := ms[0]
	if m.Device != "srv:/export" || m.Fstype != "nfs" || m.StatVers != "1.1" || m.Age != 10 || m.Program != "100003/3" {
		t.Errorf("header: %+v", m)
	}
	if value(m.Events, "vfsopen") != 4 || value(m.Bytes, "serverwritebytes") != 4199309 || len(m.Events) != 27 {
		t.Errorf("events %v bytes %v", m.Events, m.Bytes)
	}
	if len(m.Xprts) != 1 || m.Xprts[0].Proto != "rdma" || value(m.Xprts[0].Fields, "write_chunk_count") != 3 ||
		value(m.Xprts[0].Fields, "payload_copies") != 19 {
		t.Errorf("xprt %+v", m.Xprts)
	}
	if r := m.op("READ"); r.Fields != [9]uint64{10, 12, 2, 960, 10485760, 5, 40, 50, 1} {
		t.Errorf("READ %v", r.Fields)
	}
}

// TestParseRDMALineOfOlderRdmafs: an "xprt: rdma" line that ends after
// the kernel's fields, or after some of rdmafs's own (a mount by an older
// rdmafs), parses; the fields it lacks are absent.
func TestParseRDMALineOfOlderRdmafs(t *testing.T) {
	for _, cut := range []string{" 19 4456448 8650752", " 4456448 8650752"} {
		ms, err := parseMountStats(strings.Replace(sampleStats, cut, "", 1))
		if err != nil {
			t.Fatalf("line without%s: %v", cut, err)
		}
		if x := ms[0].Xprts[0]; hasCounter(x.Fields, "registered_bytes") || value(x.Fields, "empty_sendctx_q") != 17 {
			t.Errorf("line without%s: %v", cut, x.Fields)
		}
	}
}

func TestParseMountStatsErrors(t *testing.T) {
	for name, text := range map[string]string{
		"empty":        "",
		"no device":    "\tage:\t1\n",
		"bad age":      strings.Replace(sampleStats, "age:\t10", "age:\tten", 1),
		"short events": strings.Replace(sampleStats, "events:\t1 0 1", "events:\t1", 1),
		"short op":     strings.Replace(sampleStats, "READ: 10 12 2", "READ: 10 12", 1),
		"unknown xprt": strings.Replace(sampleStats, "xprt:\trdma", "xprt:\tudp", 1),
		"short rdma":   strings.Replace(sampleStats, " 17 18 19 4456448 8650752", "", 1),
		"unknown line": strings.Replace(sampleStats, "\tage:", "\tbogus:", 1),
		"overflow":     strings.Replace(sampleStats, "age:\t10", "age:\t99999999999999999999", 1),
		"bad device":   strings.Replace(sampleStats, "mounted on", "mounted at", 1),
	} {
		if _, err := parseMountStats(text); err == nil {
			t.Errorf("%s: no error", name)
		} else if !strings.Contains(err.Error(), "mountstats") {
			t.Errorf("%s: error %q does not say what it parsed", name, err)
		}
	}
}

func FuzzParseMountStats(f *testing.F) {
	f.Add(sampleStats)
	f.Add("device a mounted on b with fstype nfs\n\tper-op statistics\n\tX: 1 2 3 4 5 6 7 8 9\n")
	f.Add(`device \0 mounted on \\\777 with fstype nfs statvers=1`)
	f.Fuzz(func(t *testing.T, text string) {
		ms, err := parseMountStats(text)
		if err != nil {
			return
		}
		// Whatever parses can be shown both ways.
		for i := range ms {
			writeIOStat(&bytes.Buffer{}, &ms[i], &ms[i], 1)
			if err := writeJSON(&bytes.Buffer{}, &ms[i], time.Time{}); err != nil {
				t.Fatal(err)
			}
		}
	})
}

func TestIOStatRates(t *testing.T) {
	prev, err := parseMountStats(sampleStats)
	if err != nil {
		t.Fatal(err)
	}
	// Two seconds later: 10 more READs of 1 MiB, one retransmitted.
	cur, err := parseMountStats(strings.NewReplacer("age:\t10", "age:\t12",
		"READ: 10 12 2 960 10485760 5 40 50 1", "READ: 20 23 2 1920 20971520 15 80 110 1",
		"rdma 0 1 1 0 0 19 19", "rdma 0 1 1 0 0 29 29").Replace(sampleStats))
	if err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	writeIOStat(&b, &prev[0], &cur[0], 2)
	out := b.String()
	for _, want := range []string{
		"srv:/export mounted on /mnt/a b:",
		"           5.000           0.000", // 10 sends in 2 s
		// 10 calls in 2 s, (960+10485760) bytes / 1024 / 2 s, per call,
		// one retransmission of 10, RTT 40/10, execute 60/10, queue 10/10
		"                   5.000        5120.469        1024.094       1 (10.0%)           4.000           6.000           1.000        0 (0.0%)",
	} {
		if !strings.Contains(out, want+"\n") {
			t.Errorf("no line %q in:\n%s", want, out)
		}
	}
}

func TestStatsJSONForm(t *testing.T) {
	ms, err := parseMountStats(sampleStats)
	if err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	if err := writeJSON(&b, &ms[0], time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)); err != nil {
		t.Fatal(err)
	}
	var j statsJSON
	if err := json.Unmarshal(b.Bytes(), &j); err != nil {
		t.Fatal(err)
	}
	if j.Time != "2026-01-02T03:04:05Z" || j.Mountpoint != "/mnt/a b" || j.Ops["WRITE"]["bytes_sent"] != 20971520 ||
		j.Xprt[0].Counters["read_chunk_count"] != 2 || j.Events["vfsrelease"] != 4 || j.Bytes["readpages"] != 74 {
		t.Errorf("JSON %s", b.String())
	}
	if strings.Count(b.String(), "\n") != 1 {
		t.Errorf("not one line: %q", b.String())
	}
}

func TestParseStatsArgs(t *testing.T) {
	a, err := parseStatsArgs([]string{"-json", "-i", "2", "5", "/mnt/x", "/mnt/y"})
	if err != nil || !a.json || a.interval != 2*time.Second || a.count != 5 || len(a.dirs) != 2 {
		t.Errorf("%+v, %v", a, err)
	}
	a, err = parseStatsArgs([]string{"-i", "0.5", "/mnt/x"})
	if err != nil || a.interval != 500*time.Millisecond || a.count != 0 || a.dirs[0] != "/mnt/x" {
		t.Errorf("%+v, %v", a, err)
	}
	if a, err = parseStatsArgs(nil); err != nil || len(a.dirs) != 0 {
		t.Errorf("no arguments: %+v, %v", a, err)
	}
	for _, bad := range [][]string{{"-i"}, {"-i", "x"}, {"-i", "0"}, {"-i", "1", "0", "/m"}, {"-x"}} {
		if _, err := parseStatsArgs(bad); err == nil {
			t.Errorf("%q: no error", bad)
		}
	}
}

func TestRdmafsMounts(t *testing.T) {
	p := filepath.Join(t.TempDir(), "mountinfo")
	os.WriteFile(p, []byte(`22 1 8:1 / / rw,relatime shared:1 - ext4 /dev/vda rw
42 22 0:39 / /mnt/a\040b rw,relatime shared:5 - fuse.rdmafs srv:/ rw,user_id=0
43 22 0:40 / /mnt/other rw - fuse.sshfs x: rw
44 22 0:41 / /mnt/c rw - fuse.rdmafs srv:/c rw
`), 0o644)
	dirs, err := rdmafsMounts(p)
	if err != nil || strings.Join(dirs, "|") != "/mnt/a b|/mnt/c" {
		t.Errorf("%q, %v", dirs, err)
	}
}

// lockStats is the NLM block that follows a mount's block when its locks
// go to the server.
const lockStats = `per-op NLM statistics p/v: 100021/4 (nlockmgr)
	    NLM_NULL: 0 0 0 0 0 0 0 0 0
	    NLM_LOCK: 7 7 0 1400 280 0 3 4 0
	  NLM_UNLOCK: 5 5 0 1000 200 0 2 3 0

`

// TestParseMountStatsLocks: the NLM procedures of the nlm block are the
// mount's LockOps, apart from its NFS procedures, and -json names them
// lock_ops.
func TestParseMountStatsLocks(t *testing.T) {
	ms, err := parseMountStats(sampleStats + lockStats + strings.Replace(sampleStats, "/mnt/a\\040b", "/mnt/c", 1))
	if err != nil {
		t.Fatal(err)
	}
	if len(ms) != 2 || len(ms[0].Ops) != 3 || len(ms[0].LockOps) != 3 || len(ms[1].LockOps) != 0 {
		t.Fatalf("mounts %+v", ms)
	}
	if l := ms[0].LockOps[1]; l.Name != "NLM_LOCK" || l.Fields[0] != 7 {
		t.Errorf("NLM_LOCK line %+v", l)
	}
	var b bytes.Buffer
	if err := writeJSON(&b, &ms[0], time.Unix(0, 0)); err != nil {
		t.Fatal(err)
	}
	var j statsJSON
	if err := json.Unmarshal(b.Bytes(), &j); err != nil {
		t.Fatal(err)
	}
	if j.LockOps["NLM_UNLOCK"]["ops"] != 5 || j.Ops["NLM_LOCK"] != nil {
		t.Errorf("JSON lock_ops %v, ops %v", j.LockOps, j.Ops)
	}
}
