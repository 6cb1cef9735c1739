package main

import (
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestMetricsHandlerAnswersOnlyMetrics: GET and HEAD of /metrics answer
// in the text format's content type; every other path is 404 and every
// other method 405. A host without rdmafs mounts gets an empty page.
func TestMetricsHandlerAnswersOnlyMetrics(t *testing.T) {
	mountinfo := filepath.Join(t.TempDir(), "mountinfo")
	os.WriteFile(mountinfo, []byte("22 1 0:21 / /proc rw - proc proc rw\n"), 0o644)
	srv := httptest.NewServer(&metricsHandler{mountinfo: mountinfo, warn: io.Discard})
	defer srv.Close()
	for _, c := range []struct {
		method, path string
		code         int
	}{
		{"GET", "/metrics", 200},
		{"HEAD", "/metrics", 200},
		{"GET", "/", 404},
		{"GET", "/metrics/", 404},
		{"GET", "/debug/pprof/", 404},
		{"POST", "/metrics", 405},
		{"PUT", "/metrics", 405},
	} {
		req, _ := http.NewRequest(c.method, srv.URL+c.path, strings.NewReader(""))
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != c.code {
			t.Errorf("%s %s: %d, want %d", c.method, c.path, resp.StatusCode, c.code)
		}
		if c.code == 200 {
			if ct := resp.Header.Get("Content-Type"); ct != promContentType {
				t.Errorf("%s %s: Content-Type %q", c.method, c.path, ct)
			}
			if len(body) != 0 {
				t.Errorf("%s %s: no mounts, but %q", c.method, c.path, body)
			}
		}
	}
}

// TestMetricsHandlerNamedMountMissing: a mount point named on the command
// line that is not an rdmafs mount makes the scrape fail, saying which.
func TestMetricsHandlerNamedMountMissing(t *testing.T) {
	dir := t.TempDir()
	srv := httptest.NewServer(&metricsHandler{dirs: []string{dir}, warn: io.Discard})
	defer srv.Close()
	resp, err := http.Get(srv.URL + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 500 || !strings.Contains(string(body), dir+" is not an rdmafs mount") {
		t.Errorf("%d %q", resp.StatusCode, body)
	}
}

// TestStatsArgsFormats: one output format at a time, -i not with the
// Prometheus ones, and -listen needs HOST:PORT.
func TestStatsArgsFormats(t *testing.T) {
	for _, args := range [][]string{
		{"-json", "-prometheus"},
		{"-prometheus", "-listen", "127.0.0.1:9000"},
		{"-prometheus", "-i", "1"},
		{"-listen", "127.0.0.1:9000", "-i", "1"},
		{"-listen"},
		{"-listen", "9000"},
	} {
		if _, err := parseStatsArgs(args); err == nil {
			t.Errorf("%q: no error", args)
		}
	}
	a, err := parseStatsArgs([]string{"-listen", "127.0.0.1:9000", "/mnt/a"})
	if err != nil || a.listen != "127.0.0.1:9000" || len(a.dirs) != 1 {
		t.Errorf("-listen: %+v, %v", a, err)
	}
	if a, err := parseStatsArgs([]string{"-prometheus"}); err != nil || !a.prometheus {
		t.Errorf("-prometheus: %+v, %v", a, err)
	}
}
