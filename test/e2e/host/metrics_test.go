package host

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/rdmafs/rdmafs/test/e2e/e2etest"
)

// The Prometheus side of rdmafs stats: -prometheus and -listen, read by
// the tools a cluster reads them with, Debian's promtool (package
// prometheus) and node_exporter (prometheus-node-exporter), which make
// deps installs. A missing tool fails the test, naming its package.

// needTool returns the path of a program of a Debian package, failing
// the test if it is missing.
func needTool(t *testing.T, prog, pkg string) string {
	t.Helper()
	p, err := exec.LookPath(prog)
	if err != nil {
		t.Fatalf("%s is missing: install Debian's %s package (make deps does): %v", prog, pkg, err)
	}
	return p
}

// promSample is one sample line of the text format.
type promSample struct {
	name   string
	labels map[string]string
	value  float64
}

var sampleLine = regexp.MustCompile(`^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})? (\S+)$`)
var labelPair = regexp.MustCompile(`([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"`)

// parseProm returns the samples of a page of the text format.
func parseProm(t *testing.T, text string) []promSample {
	t.Helper()
	var out []promSample
	for _, line := range strings.Split(text, "\n") {
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		m := sampleLine.FindStringSubmatch(line)
		if m == nil {
			t.Fatalf("not a sample: %q", line)
		}
		v, err := strconv.ParseFloat(m[3], 64)
		if err != nil {
			t.Fatalf("%q: %v", line, err)
		}
		s := promSample{name: m[1], labels: map[string]string{}, value: v}
		for _, l := range labelPair.FindAllStringSubmatch(m[2], -1) {
			s.labels[l[1]] = l[2]
		}
		out = append(out, s)
	}
	return out
}

// find returns the samples of name whose labels include want.
func find(samples []promSample, name string, want map[string]string) []promSample {
	var out []promSample
	for _, s := range samples {
		if s.name != name {
			continue
		}
		ok := true
		for k, v := range want {
			if s.labels[k] != v {
				ok = false
			}
		}
		if ok {
			out = append(out, s)
		}
	}
	return out
}

// one returns the value of the one sample of name with labels want.
func one(t *testing.T, samples []promSample, name string, want map[string]string) float64 {
	t.Helper()
	f := find(samples, name, want)
	if len(f) != 1 {
		t.Errorf("%s%v: %d samples, want 1", name, want, len(f))
		return -1
	}
	return f[0].value
}

// promtoolCheck runs promtool check metrics on text: no error, no lint.
func promtoolCheck(t *testing.T, text string) {
	t.Helper()
	cmd := exec.Command(needTool(t, "promtool", "prometheus"), "check", "metrics")
	cmd.Stdin = strings.NewReader(text)
	if out, err := cmd.CombinedOutput(); err != nil || len(bytes.TrimSpace(out)) > 0 {
		t.Errorf("promtool check metrics: %v\n%s", err, out)
	}
}

// rdmaMountWithTraffic mounts an export over RPC-over-RDMA (the soft
// provider), writes and reads back a file through it and returns the
// mount point.
func rdmaMountWithTraffic(t *testing.T) string {
	t.Helper()
	s := startServer(t, "", 0, append([]string{"no_root_squash"}, rdmaServe...)...)
	mnt := s.mount(t)
	data := strings.Repeat("rdmafs metrics ", 200_000) // 3 MB: several READs and WRITEs
	write(t, filepath.Join(mnt, "f"), data)
	e2etest.DropCaches(t)
	if got := read(t, filepath.Join(mnt, "f")); got != data {
		t.Fatalf("read back %d bytes, want %d", len(got), len(data))
	}
	return mnt
}

// TestStatsPrometheus: rdmafs stats -prometheus of a mount over RDMA
// passes promtool; it has node_exporter's series for the operations the
// test made, a latency histogram per operation whose counts are the
// operation's counters, and the RPC-over-RDMA counters by name.
func TestStatsPrometheus(t *testing.T) {
	needHost(t)
	mnt := rdmaMountWithTraffic(t)
	code, out := rdmafs(t, 10*time.Second, "stats", "-prometheus", mnt)
	if code != 0 {
		t.Fatalf("rdmafs stats -prometheus: exit %d: %s", code, out)
	}
	promtoolCheck(t, out)
	samples := parseProm(t, out)
	base := map[string]string{"export": "127.0.0.1:/", "mountaddr": "127.0.0.1", "protocol": "rdma"}
	info := find(samples, "node_mountstats_nfs_mountpoint_info", map[string]string{"mountpoint": mnt})
	if len(info) != 1 || info[0].labels["export"] != base["export"] || info[0].labels["protocol"] != "rdma" {
		t.Errorf("mountpoint_info: %+v", info)
	}
	ops := find(samples, "node_mountstats_nfs_operations_requests_total", base)
	if len(ops) < 10 {
		t.Fatalf("%d operations", len(ops))
	}
	for _, o := range ops {
		name := o.labels["operation"]
		l := map[string]string{"operation": name}
		for k, v := range base {
			l[k] = v
		}
		errs := one(t, samples, "rdmafs_nfs_operations_errors_total", l)
		if n := one(t, samples, "rdmafs_nfs_operation_execute_seconds_count", l); n != o.value {
			t.Errorf("%s: execute histogram counts %v calls, requests_total %v", name, n, o.value)
		}
		if n := one(t, samples, "rdmafs_nfs_operation_rtt_seconds_count", l); n != o.value-errs {
			t.Errorf("%s: rtt histogram counts %v calls, requests_total %v less errors %v", name, n, o.value, errs)
		}
		inf := map[string]string{"le": "+Inf"}
		for k, v := range l {
			inf[k] = v
		}
		if n := one(t, samples, "rdmafs_nfs_operation_execute_seconds_bucket", inf); n != o.value {
			t.Errorf("%s: +Inf bucket %v, requests_total %v", name, n, o.value)
		}
	}
	withOp := func(op string) map[string]string {
		l := map[string]string{"operation": op}
		for k, v := range base {
			l[k] = v
		}
		return l
	}
	for _, op := range []string{"WRITE", "READ", "CREATE"} {
		if n := one(t, samples, "node_mountstats_nfs_operations_requests_total", withOp(op)); n < 1 {
			t.Errorf("%s: %v requests", op, n)
		}
		if s := one(t, samples, "node_mountstats_nfs_operations_request_time_seconds_total", withOp(op)); s < 0 {
			t.Errorf("%s: request time %v", op, s)
		}
	}
	if n := one(t, samples, "node_mountstats_nfs_total_read_bytes_total", base); n != 3_000_000 {
		t.Errorf("total_read_bytes_total %v, want 3000000", n)
	}
	tr := map[string]string{"transport": "0"}
	for k, v := range base {
		tr[k] = v
	}
	for _, c := range []struct {
		name string
		min  float64
	}{
		{"node_mountstats_nfs_transport_sends_total", 5},
		{"node_mountstats_nfs_transport_connect_total", 1},
		{"rdmafs_rpcrdma_read_chunks_total", 1},  // WRITE data
		{"rdmafs_rpcrdma_write_chunks_total", 1}, // READ data
		{"rdmafs_rpcrdma_credits_granted", 1},
		{"rdmafs_rpcrdma_registered_bytes", 1},
		{"rdmafs_transport_reconnects_total", 0},
	} {
		if v := one(t, samples, c.name, tr); v < c.min {
			t.Errorf("%s = %v, want at least %v", c.name, v, c.min)
		}
	}
	if t.Failed() {
		t.Logf("%s", out)
	}
}

// freeLoopbackPort returns a TCP port free on 127.0.0.1 now.
func freeLoopbackPort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// get fetches url, waiting up to 10 s for the server to come up and 30 s
// for its answer.
func get(t *testing.T, url string) (int, string) {
	t.Helper()
	client := &http.Client{Timeout: 30 * time.Second}
	deadline := time.Now().Add(10 * time.Second)
	for {
		resp, err := client.Get(url)
		if err == nil {
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			return resp.StatusCode, string(body)
		}
		if time.Now().After(deadline) {
			t.Fatalf("GET %s: %v", url, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// startProcess starts a long-running program whose output goes to log,
// ended at the test's end.
func startProcess(t *testing.T, log *bytes.Buffer, prog string, args ...string) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	cmd := exec.CommandContext(ctx, prog, args...)
	cmd.Stdout, cmd.Stderr = log, log
	if err := cmd.Start(); err != nil {
		cancel()
		t.Fatal(err)
	}
	t.Cleanup(func() { cancel(); cmd.Wait() })
}

// listensOn reports whether a TCP socket listens on port, and on which
// local addresses, from /proc/net/tcp and tcp6.
func listensOn(t *testing.T, port int) []string {
	t.Helper()
	var addrs []string
	for _, f := range []string{"/proc/net/tcp", "/proc/net/tcp6"} {
		data, err := os.ReadFile(f)
		if err != nil {
			continue
		}
		for _, line := range strings.Split(string(data), "\n")[1:] {
			fields := strings.Fields(line)
			if len(fields) < 4 || fields[3] != "0A" { // LISTEN
				continue
			}
			host, p, _ := strings.Cut(fields[1], ":")
			if n, _ := strconv.ParseUint(p, 16, 16); int(n) == port {
				addrs = append(addrs, host)
			}
		}
	}
	return addrs
}

// TestStatsListen: rdmafs stats -listen serves the mount's metrics on
// /metrics at the address given and nowhere else, and nothing on any
// other path.
func TestStatsListen(t *testing.T) {
	needHost(t)
	mnt := rdmaMountWithTraffic(t)
	port := freeLoopbackPort(t)
	var log bytes.Buffer
	startProcess(t, &log, rdmafsBin, "stats", "-listen", fmt.Sprintf("127.0.0.1:%d", port))
	url := fmt.Sprintf("http://127.0.0.1:%d", port)
	code, body := get(t, url+"/metrics")
	if code != 200 {
		t.Fatalf("GET /metrics: %d %s\n%s", code, body, log.String())
	}
	promtoolCheck(t, body)
	samples := parseProm(t, body)
	if len(find(samples, "node_mountstats_nfs_mountpoint_info", map[string]string{"mountpoint": mnt})) != 1 {
		t.Errorf("no mountpoint_info of %s:\n%s", mnt, body)
	}
	if len(find(samples, "rdmafs_nfs_operation_rtt_seconds_count", map[string]string{"operation": "WRITE"})) == 0 {
		t.Errorf("no WRITE histogram")
	}
	for _, path := range []string{"/", "/debug/pprof/", "/metrics/x"} {
		if code, _ := get(t, url+path); code != 404 {
			t.Errorf("GET %s: %d, want 404", path, code)
		}
	}
	if addrs := listensOn(t, port); len(addrs) != 1 || addrs[0] != "0100007F" {
		t.Errorf("listening on %v (hex, /proc/net/tcp), want 127.0.0.1 (0100007F) alone", addrs)
	}
}

// TestNodeExporterTextfile: node_exporter's textfile collector reads the
// file rdmafs stats -prometheus writes and exposes its series: the
// mount's operations under node_exporter's own names, and the histograms.
func TestNodeExporterTextfile(t *testing.T) {
	needHost(t)
	exporter := needTool(t, "prometheus-node-exporter", "prometheus-node-exporter")
	mnt := rdmaMountWithTraffic(t)
	code, out := rdmafs(t, 10*time.Second, "stats", "-prometheus", mnt)
	if code != 0 {
		t.Fatalf("rdmafs stats -prometheus: exit %d: %s", code, out)
	}
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "rdmafs.prom"), []byte(out), 0o644); err != nil {
		t.Fatal(err)
	}
	port := freeLoopbackPort(t)
	var log bytes.Buffer
	startProcess(t, &log, exporter, "--collector.disable-defaults", "--collector.textfile",
		"--collector.textfile.directory="+dir, fmt.Sprintf("--web.listen-address=127.0.0.1:%d", port))
	code, body := get(t, fmt.Sprintf("http://127.0.0.1:%d/metrics", port))
	if code != 200 {
		t.Fatalf("node_exporter: %d\n%s\n%s", code, body, log.String())
	}
	got := parseProm(t, body)
	if v := one(t, got, "node_textfile_scrape_error", nil); v != 0 {
		t.Errorf("node_textfile_scrape_error %v\n%s", v, log.String())
	}
	want := parseProm(t, out)
	for _, name := range []string{"node_mountstats_nfs_operations_requests_total", "node_mountstats_nfs_transport_sends_total",
		"node_mountstats_nfs_mountpoint_info", "rdmafs_nfs_operation_rtt_seconds_bucket", "rdmafs_rpcrdma_write_chunks_total"} {
		w := find(want, name, nil)
		if len(w) == 0 {
			t.Errorf("the file has no %s", name)
		}
		for _, s := range w {
			if e := find(got, name, s.labels); len(e) != 1 || e[0].value != s.value {
				t.Errorf("node_exporter: %s%v = %+v, the file has %v", name, s.labels, e, s.value)
			}
		}
	}
	if t.Failed() {
		t.Logf("node_exporter:\n%s", log.String())
	}
}

// TestStatsSkipsStuckMount: a mount whose daemon does not answer (here:
// stopped) is left out of the host's report after a few seconds, with a
// warning, and the other mounts are reported; before, the report waited
// for it as long as it stayed stuck, and a scrape timed out.
func TestStatsSkipsStuckMount(t *testing.T) {
	needHost(t)
	if strings.Contains(os.Getenv(mountOptsEnv), "io_uring") {
		// The kernel cannot take back a request it has put in a ring
		// entry: the report's read of the stopped daemon's mount, and
		// the report with it, would wait until the daemon goes on.
		t.Skip("through FUSE over io_uring a stopped daemon's mount cannot be left out (README)")
	}
	good := rdmaMountWithTraffic(t)
	s := startServer(t, "", 0, "no_root_squash")
	stuck := s.mount(t)
	pid := daemonOf(t, stuck)
	if err := syscall.Kill(pid, syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	// Go on before the mount's cleanup unmounts it (cleanups run last
	// registered first).
	t.Cleanup(func() { syscall.Kill(pid, syscall.SIGCONT) })
	start := time.Now()
	code, out := rdmafs(t, 30*time.Second, "stats", "-prometheus")
	took := time.Since(start)
	if code != 0 || took > 15*time.Second {
		t.Fatalf("stats -prometheus with a stuck mount: exit %d after %v\n%s", code, took, out)
	}
	// The warning comes on stderr, which rdmafs() mixes in: take it out.
	var report, warnings []string
	for _, line := range strings.Split(out, "\n") {
		if strings.HasPrefix(line, "rdmafs stats: ") {
			warnings = append(warnings, line)
		} else {
			report = append(report, line)
		}
	}
	if !slices.ContainsFunc(warnings, func(w string) bool { return strings.Contains(w, stuck) }) {
		t.Errorf("no warning names the stuck mount %s: %q", stuck, warnings)
	}
	samples := parseProm(t, strings.Join(report, "\n"))
	if len(find(samples, "node_mountstats_nfs_mountpoint_info", map[string]string{"mountpoint": good})) != 1 {
		t.Errorf("the answering mount %s is not in the report:\n%s", good, out)
	}
	if len(find(samples, "node_mountstats_nfs_mountpoint_info", map[string]string{"mountpoint": stuck})) != 0 {
		t.Errorf("the stuck mount %s is in the report", stuck)
	}
}
