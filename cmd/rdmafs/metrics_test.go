package main

import (
	"bytes"
	"fmt"
	"os/exec"
	"regexp"
	"strings"
	"testing"

	"github.com/rdmafs/rdmafs/xprtrdma"
)

// sampleLatency is the latency histograms of sampleStats' mount, as
// fs.LatencyXattr holds them: READ's 10 calls (one an error, so 9 round
// trips) and WRITE's 20.
var sampleLatency = "bounds_ns: 5000 10000 25000 50000 100000 250000 500000 1000000 2500000 5000000 10000000 25000000 50000000 100000000 250000000 500000000 1000000000 2500000000 5000000000 10000000000\n" +
	"rtt NULL:" + strings.Repeat(" 0", 22) + "\n" +
	"execute NULL:" + strings.Repeat(" 0", 22) + "\n" +
	"rtt READ: 0 0 0 0 0 0 0 2 7" + strings.Repeat(" 0", 12) + " 40123456\n" +
	"execute READ: 0 0 0 0 0 0 0 2 7 1" + strings.Repeat(" 0", 11) + " 50987654\n" +
	"rtt WRITE: 0 0 0 0 0 0 0 0 20" + strings.Repeat(" 0", 12) + " 60000000\n" +
	"execute WRITE: 0 0 0 0 0 0 0 0 19 0 0 0 0 0 0 0 0 0 0 0 1 70000000\n"

// sampleTCPStats is a TCP mount's block, with a source that needs
// escaping in a label value.
const sampleTCPStats = `device 10.0.0.2:/a"b\134c mounted on /mnt/t with fstype nfs statvers=1.1
	opts:	vers=3,proto=tcp
	age:	5
	caps:	caps=0x7,wtmult=0,dtsize=131072,bsize=0,namlen=255
	sec:	flavor=1,pseudoflavor=1
	events:	1 0 1 0 4 4 0 0 0 1 0 5 0 0 4 0 0 4 0 0 0 0 0 0 0 0 0 
	bytes:	1 2 3 4 5 6 7 8 
	RPC iostats version: 1.1  p/v: 100003/3 (nfs)
	xprt:	tcp 700 1 2 0 3 40 40 0 41 0 16 0 2
	per-op statistics
	     GETATTR: 40 40 0 4000 4800 1 2 3 0

`

// sampleMounts parses sampleStats (twice, as two mounts of one export)
// and sampleTCPStats.
func sampleMounts(t *testing.T) []mountMetrics {
	t.Helper()
	lat, err := parseLatencyStats(sampleLatency)
	if err != nil {
		t.Fatal(err)
	}
	var out []mountMetrics
	for _, text := range []string{sampleStats, strings.Replace(sampleStats, `/mnt/a\040b`, "/mnt/second", 1), sampleTCPStats} {
		ms, err := parseMountStats(text)
		if err != nil {
			t.Fatal(err)
		}
		m := mountMetrics{stats: ms[0]}
		if ms[0].Xprts[0].Proto == "rdma" {
			m.latency = lat
		}
		out = append(out, m)
	}
	return out
}

func promText(t *testing.T, mounts []mountMetrics) string {
	t.Helper()
	var b bytes.Buffer
	if err := promMetrics(mounts).write(&b); err != nil {
		t.Fatal(err)
	}
	return b.String()
}

// promtool is Debian's prometheus package's checker of the format.
const promtool = "promtool"

// needPromtool fails the test (make test installs the package; a skip
// would hide that the format went unchecked) when promtool is missing.
func needPromtool(t *testing.T) string {
	t.Helper()
	p, err := exec.LookPath(promtool)
	if err != nil {
		t.Fatalf("%s is missing: install Debian's prometheus package (make deps does): %v", promtool, err)
	}
	return p
}

// TestPrometheusPassesPromtool: promtool check metrics, which parses the
// text format and lints names, types and HELP, finds nothing to say.
func TestPrometheusPassesPromtool(t *testing.T) {
	p := needPromtool(t)
	text := promText(t, sampleMounts(t))
	cmd := exec.Command(p, "check", "metrics")
	cmd.Stdin = strings.NewReader(text)
	out, err := cmd.CombinedOutput()
	if err != nil || len(bytes.TrimSpace(out)) > 0 {
		t.Errorf("promtool check metrics: %v\n%s\n--- input:\n%s", err, out, text)
	}
}

// sampleValue returns the value of the one sample of name whose labels
// include every one of want (name="value" each).
func sampleValue(t *testing.T, text, name string, want ...string) string {
	t.Helper()
	re := regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(name) + `\{([^}]*)\} (\S+)$`)
	var found []string
	for _, m := range re.FindAllStringSubmatch(text, -1) {
		labels := strings.Split(m[1], ",")
		ok := true
		for _, w := range want {
			if !contains(labels, w) {
				ok = false
			}
		}
		if ok {
			found = append(found, m[2])
		}
	}
	if len(found) != 1 {
		t.Errorf("%s{%s}: %d samples, want 1", name, strings.Join(want, ","), len(found))
		return ""
	}
	return found[0]
}

func contains(list []string, s string) bool {
	for _, l := range list {
		if l == s {
			return true
		}
	}
	return false
}

// TestPrometheusNodeExporterNames: the counters of mountstats come out
// under node_exporter's mountstats names, labels and units, two mounts of
// one export added up, and the RDMA counters and histograms under rdmafs's.
func TestPrometheusNodeExporterNames(t *testing.T) {
	text := promText(t, sampleMounts(t))
	rdma := []string{`export="srv:/export"`, `mountaddr="srv"`, `protocol="rdma"`}
	tcp := []string{`export="10.0.0.2:/a\"b\\c"`, `mountaddr="10.0.0.2"`, `protocol="tcp"`}
	op := func(base []string, name string) []string { return append(base[:3:3], `operation="`+name+`"`) }
	tr := func(base []string, n int) []string { return append(base[:3:3], fmt.Sprintf(`transport="%d"`, n)) }
	for _, c := range []struct {
		name   string
		labels []string
		want   string
	}{
		// Two mounts of srv:/export: their counters added.
		{"node_mountstats_nfs_operations_requests_total", op(rdma, "READ"), "20"},
		{"node_mountstats_nfs_operations_transmissions_total", op(rdma, "READ"), "24"},
		{"node_mountstats_nfs_operations_major_timeouts_total", op(rdma, "READ"), "4"},
		{"node_mountstats_nfs_operations_sent_bytes_total", op(rdma, "READ"), "1920"},
		{"node_mountstats_nfs_operations_received_bytes_total", op(rdma, "READ"), "20971520"},
		{"node_mountstats_nfs_operations_queue_time_seconds_total", op(rdma, "READ"), "0.01"},
		{"node_mountstats_nfs_operations_response_time_seconds_total", op(rdma, "READ"), "0.08"},
		{"node_mountstats_nfs_operations_request_time_seconds_total", op(rdma, "READ"), "0.1"},
		{"rdmafs_nfs_operations_errors_total", op(rdma, "READ"), "2"},
		{"node_mountstats_nfs_age_seconds_total", rdma, "10"},
		{"node_mountstats_nfs_read_bytes_total", rdma, "600000"},
		{"node_mountstats_nfs_direct_write_bytes_total", rdma, "2097152"},
		{"node_mountstats_nfs_total_write_bytes_total", rdma, "8398618"},
		{"node_mountstats_nfs_event_vfs_open_total", rdma, "8"},
		{"node_mountstats_nfs_event_vfs_write_pages_total", rdma, "10"},
		{"node_mountstats_nfs_mountpoint_info", append(rdma[:3:3], `mountpoint="/mnt/a b"`), "1"},
		{"node_mountstats_nfs_mountpoint_info", append(rdma[:3:3], `mountpoint="/mnt/second"`), "1"},
		// Their transports one after the other.
		{"node_mountstats_nfs_transport_sends_total", tr(rdma, 0), "19"},
		{"node_mountstats_nfs_transport_sends_total", tr(rdma, 1), "19"},
		{"node_mountstats_nfs_transport_connect_total", tr(rdma, 1), "1"},
		{"node_mountstats_nfs_transport_idle_time_seconds", tr(rdma, 0), "0"},
		{"node_mountstats_nfs_transport_maximum_rpc_slots", tr(rdma, 0), "0"},
		{"rdmafs_rpcrdma_write_chunks_total", tr(rdma, 0), "3"},
		{"rdmafs_rpcrdma_local_invalidations_total", tr(rdma, 0), "16"},
		{"rdmafs_rpcrdma_credit_waits_total", tr(rdma, 0), "17"},
		{"rdmafs_rpcrdma_registered_bytes", tr(rdma, 1), "4456448"},
		{"rdmafs_transport_reconnects_total", tr(rdma, 0), "0"},
		// The histograms: cumulative buckets, counts that match the
		// operation's requests (execute) and its replies (rtt).
		{"rdmafs_nfs_operation_execute_seconds_count", op(rdma, "READ"), "20"},
		{"rdmafs_nfs_operation_rtt_seconds_count", op(rdma, "READ"), "18"},
		{"rdmafs_nfs_operation_execute_seconds_bucket", append(op(rdma, "READ"), `le="0.001"`), "4"},
		{"rdmafs_nfs_operation_execute_seconds_bucket", append(op(rdma, "READ"), `le="0.0025"`), "18"},
		{"rdmafs_nfs_operation_execute_seconds_bucket", append(op(rdma, "READ"), `le="+Inf"`), "20"},
		{"rdmafs_nfs_operation_execute_seconds_sum", op(rdma, "READ"), "0.101975308"},
		{"rdmafs_nfs_operation_execute_seconds_bucket", append(op(rdma, "WRITE"), `le="10"`), "38"},
		{"rdmafs_nfs_operation_execute_seconds_count", op(rdma, "WRITE"), "40"},
		// The TCP mount: its own series, its source escaped.
		{"node_mountstats_nfs_operations_requests_total", op(tcp, "GETATTR"), "40"},
		{"node_mountstats_nfs_transport_maximum_rpc_slots", tr(tcp, 0), "16"},
		{"node_mountstats_nfs_transport_pending_queue_total", tr(tcp, 0), "2"},
		{"node_mountstats_nfs_transport_bind_total", tr(tcp, 0), "1"},
		{"rdmafs_transport_reconnects_total", tr(tcp, 0), "1"},
	} {
		if got := sampleValue(t, text, c.name, c.labels...); got != c.want {
			t.Errorf("%s{%s} = %s, want %s", c.name, strings.Join(c.labels, ","), got, c.want)
		}
	}
	// A mount without histograms (an older rdmafs) has none.
	if strings.Contains(text, `rdmafs_nfs_operation_rtt_seconds_count{`+strings.Join(tcp, ",")) {
		t.Errorf("histograms for the TCP mount, which has none")
	}
	if t.Failed() {
		t.Logf("%s", text)
	}
}

// TestPrometheusHasEveryRDMAField: each field of the "xprt: rdma" line is
// a series, or one rdmafs does not count (always 0 in the line) and so
// leaves out; a field added to the line must be given a name here.
func TestPrometheusHasEveryRDMAField(t *testing.T) {
	leftOut := map[string]bool{"port": true, "fixup_copy_count": true, "mrs_orphaned": true, "reply_waits_for_send": true}
	named := map[string]bool{}
	for _, m := range append(append([]namedMetric(nil), transportMetrics...), transportExtras...) {
		named[m.field] = true
	}
	for _, f := range xprtrdma.StatNames() {
		if !named[f] && !leftOut[f] {
			t.Errorf("the rdma field %s has no metric", f)
		}
	}
}
