// Package host tests rdmafs end to end on this machine: the rdmafs binary
// mounts, through a real FUSE mount, exports that `rdmafs serve` serves on
// loopback, and the tests check through the mount what a user would check,
// and on the server's directory what the server got.
//
// The tests need root and /dev/fuse (as CI has); elsewhere they skip.
package host

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/rdmafs/rdmafs/sunrpc/xdr"
	"github.com/rdmafs/rdmafs/test/e2e/e2etest"
)

// rdmafsBin is the binary under test, built once by TestMain.
var rdmafsBin string

// testBin is a copy of this test binary that every user may run.
var testBin string

func copyFile(from, to string) error {
	data, err := os.ReadFile(from)
	if err != nil {
		return err
	}
	return os.WriteFile(to, data, 0o755)
}

// skipReason is why the tests cannot run here, if they cannot.
var skipReason string

func TestMain(m *testing.M) {
	if as := os.Getenv(asUserEnv); as != "" {
		os.Exit(runAsUser(as, os.Args[len(os.Args)-2:]))
	}
	switch {
	case os.Geteuid() != 0:
		skipReason = "the host tests mount FUSE file systems and need root"
	default:
		if _, err := os.Stat("/dev/fuse"); err != nil {
			skipReason = "no /dev/fuse: " + err.Error()
		}
	}
	dir, err := os.MkdirTemp("", "rdmafs-host-test")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	if skipReason == "" {
		// Other users run the test binary too (asUser): give them a copy
		// they can reach.
		os.Chmod(dir, 0o755)
		testBin = filepath.Join(dir, "host.test")
		if err := copyFile(os.Args[0], testBin); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		rdmafsBin = filepath.Join(dir, "rdmafs")
		build := []string{"build", "-o", rdmafsBin}
		if xdr.Scrubbing {
			// Tests built to find views of receive buffers kept
			// past their call (make test) look in rdmafs too.
			build = append(build, "-tags", "rdmafs_scrub")
		}
		out, err := exec.Command("go", append(build, "github.com/rdmafs/rdmafs/cmd/rdmafs")...).CombinedOutput()
		if err != nil {
			fmt.Fprintf(os.Stderr, "building rdmafs: %v\n%s", err, out)
			os.Exit(1)
		}
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

func needHost(t *testing.T) {
	t.Helper()
	if skipReason != "" {
		t.Skip(skipReason)
	}
}

// server is a running `rdmafs serve`.
type server struct {
	t        *testing.T
	dir      string
	port     int
	rdmaPort int // when serving NFS over RDMA (soft provider) too
	cmd      *exec.Cmd
	log      *bytes.Buffer
}

var (
	portLine     = regexp.MustCompile(`as .* on port (\d+) `)
	rdmaPortLine = regexp.MustCompile(`over RDMA .* on port (\d+)`)
)

// startServer serves dir (a new temporary directory if "") on a free
// loopback port, or on port if it is not 0.
func startServer(t *testing.T, dir string, port int, extra ...string) *server {
	t.Helper()
	if dir == "" {
		dir = t.TempDir()
	}
	opts := fmt.Sprintf("port=%d", port)
	for _, o := range extra {
		opts += "," + o
	}
	s := &server{t: t, dir: dir, log: new(bytes.Buffer)}
	s.cmd = exec.Command(rdmafsBin, "serve", "-o", opts, dir)
	stdout, err := s.cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	s.cmd.Stderr = s.log
	if err := s.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	wantRDMA := strings.Contains(opts, "proto=rdma")
	sc := bufio.NewScanner(stdout)
	for sc.Scan() {
		if m := portLine.FindStringSubmatch(sc.Text()); m != nil {
			fmt.Sscan(m[1], &s.port)
		}
		if m := rdmaPortLine.FindStringSubmatch(sc.Text()); m != nil {
			fmt.Sscan(m[1], &s.rdmaPort)
		}
		if s.port != 0 && (!wantRDMA || s.rdmaPort != 0) {
			break
		}
	}
	if s.port == 0 || wantRDMA && s.rdmaPort == 0 {
		s.cmd.Process.Kill()
		s.cmd.Wait()
		t.Fatalf("rdmafs serve did not start: %s", s.log)
	}
	go func() {
		for sc.Scan() {
		}
	}()
	t.Cleanup(s.stop)
	return s
}

// export is what the tests that do not depend on the server's kind
// mount: serve's (server) or NFS-Ganesha's (ganeshaExport).
type export interface {
	// exportDir is the exported directory, as the server sees it.
	exportDir() string
	// source is what a mount of it shows as its source (SERVER:/PATH).
	source() string
	// mount mounts the export on a new directory and returns it; the
	// test's cleanup unmounts it.
	mount(t *testing.T, opts ...string) string
}

var _ export = (*server)(nil)

func (s *server) exportDir() string { return s.dir }
func (s *server) source() string    { return "127.0.0.1:/" }

// stop ends the server with SIGTERM.
func (s *server) stop() {
	if s.cmd.ProcessState != nil {
		return
	}
	s.cmd.Process.Signal(syscall.SIGTERM)
	done := make(chan struct{})
	go func() { s.cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		s.cmd.Process.Kill()
		<-done
		s.t.Errorf("rdmafs serve did not stop on SIGTERM")
	}
}

// kill ends the server at once, as a crash does.
func (s *server) kill() {
	s.cmd.Process.Kill()
	s.cmd.Wait()
}

// mountOpts are the options that reach this server without a portmapper:
// over RDMA (the soft provider) when it serves it.
func (s *server) mountOpts() string {
	if s.rdmaPort != 0 {
		return fmt.Sprintf("proto=rdma,provider=soft,port=%d,mountport=%d", s.rdmaPort, s.port)
	}
	return fmt.Sprintf("port=%d,mountport=%d", s.port, s.port)
}

// rdmaServe are the serve options of an RDMA server on free ports.
var rdmaServe = []string{"proto=rdma", "provider=soft", "rdmaport=0"}

// mountOptsEnv names mount options that server.mount adds to every mount:
// a test runs another test's mounts with them (TestIOURingSignalledLockWaiter).
const mountOptsEnv = "RDMAFS_HOST_MOUNT_OPTS"

// mount mounts the server's export on a new directory and returns it;
// the test's cleanup unmounts it.
func (s *server) mount(t *testing.T, opts ...string) string {
	t.Helper()
	mnt := t.TempDir()
	all := append([]string{s.mountOpts()}, opts...)
	if more := os.Getenv(mountOptsEnv); more != "" {
		all = append(all, more)
	}
	out, err := exec.Command(rdmafsBin, "-o", strings.Join(all, ","), "127.0.0.1:/", mnt).CombinedOutput()
	if err != nil {
		t.Fatalf("mount: %v: %s", err, out)
	}
	t.Cleanup(func() { e2etest.Unmount(t, mnt) })
	return mnt
}

// tmpfsExport mounts a new 16 MiB tmpfs (which keeps POSIX ACLs, and
// whose space a test can see) for a test's export; the test's end
// unmounts it.
func tmpfsExport(t *testing.T) string {
	t.Helper()
	export := t.TempDir()
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size=16m,mode=0777", "rdmafs-test", export).CombinedOutput(); err != nil {
		t.Fatalf("mount tmpfs: %v: %s", err, out)
	}
	t.Cleanup(func() { exec.Command("umount", "-l", export).Run() })
	return export
}

// rdmafs runs the binary and returns its exit status and output.
func rdmafs(t *testing.T, timeout time.Duration, args ...string) (int, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	out, err := exec.CommandContext(ctx, rdmafsBin, args...).CombinedOutput()
	var ee *exec.ExitError
	switch {
	case err == nil:
		return 0, string(out)
	case errors.As(err, &ee):
		return ee.ExitCode(), string(out)
	}
	t.Fatalf("rdmafs %v: %v", args, err)
	return 0, ""
}
