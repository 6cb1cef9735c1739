package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"
)

// metricsPath is the one path rdmafs stats -listen answers.
const metricsPath = "/metrics"

// metricsHandler answers GET and HEAD of /metrics with the metrics of the
// mounts at dirs (none: every rdmafs mount of mountinfo, found afresh for
// each scrape), and every other request with 404 or 405: it serves
// nothing else.
type metricsHandler struct {
	dirs      []string
	mountinfo string
	warn      io.Writer
}

var _ http.Handler = (*metricsHandler)(nil)

func (h *metricsHandler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path != metricsPath {
		http.NotFound(w, r)
		return
	}
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		w.Header().Set("Allow", "GET, HEAD")
		http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
		return
	}
	mounts, err := gatherMetrics(h.dirs, h.mountinfo, h.warn)
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	var b bytes.Buffer
	if err := promMetrics(mounts).write(&b); err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", promContentType)
	w.Write(b.Bytes())
}

// serveMetrics serves the metrics on HTTP at addr, the address given
// (HOST:PORT; an empty HOST is every address of the host), until SIGINT
// or SIGTERM.
func serveMetrics(addr string, dirs []string) error {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("stats -listen: %w", err)
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	srv := &http.Server{
		Handler:           &metricsHandler{dirs: dirs, mountinfo: "/proc/self/mountinfo", warn: os.Stderr},
		ReadHeaderTimeout: 10 * time.Second,
		WriteTimeout:      30 * time.Second,
		IdleTimeout:       2 * time.Minute,
		MaxHeaderBytes:    16 << 10,
	}
	fmt.Fprintf(os.Stderr, "rdmafs stats: serving metrics on http://%s%s\n", ln.Addr(), metricsPath)
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ln) }()
	select {
	case err := <-done:
		return fmt.Errorf("stats -listen: %w", err)
	case <-ctx.Done():
		shut, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := srv.Shutdown(shut); err != nil && !errors.Is(err, context.DeadlineExceeded) {
			return err
		}
		return nil
	}
}
