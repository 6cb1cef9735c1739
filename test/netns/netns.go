// Package netns runs the module's tests that need an rpcbind (lock
// managers, statd, serve's registrations) inside a network and mount
// namespace of their own: loopback only, a private /run, and an rpcbind
// started for them, so the host's services are neither used nor touched.
package netns

import (
	"bytes"
	"os"
	"os/exec"
	"strings"
	"testing"
)

// Tools are the programs every namespace needs.
var Tools = []string{"unshare", "ip", "rpcbind", "rpcinfo"}

// Script returns a shell script that brings loopback up, mounts a tmpfs on
// /run and on each of private, starts rpcbind, waits until it answers and
// then runs body; rpcbind is killed when the script ends, and so is every
// process whose pid body adds to $pids, after the commands body adds to
// $atexit have run.
func Script(body string, private ...string) string {
	var s strings.Builder
	s.WriteString("set -e\nip link set lo up\nmount -t tmpfs rdmafs-test-run /run\n")
	for _, dir := range private {
		s.WriteString("mount -t tmpfs rdmafs-test-private " + dir + "\n")
	}
	s.WriteString(`rpcbind -f -w & pids=$! atexit=:
trap 'eval "$atexit" || true; kill $pids 2>/dev/null || true' EXIT
for i in $(seq 100); do rpcinfo -p 127.0.0.1 >/dev/null 2>&1 && break; sleep 0.05; done
`)
	s.WriteString(body)
	return s.String()
}

// Command returns the command that runs script (see Script) in a network
// and mount namespace of its own, with args as $0, $1, ...
func Command(script string, args ...string) *exec.Cmd {
	return exec.Command("unshare", append([]string{"-n", "-m", "sh", "-c", script}, args...)...)
}

// Need skips t unless it runs as root with tools (beyond Tools) installed.
func Need(t testing.TB, tools ...string) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root: it runs rpcbind in a network namespace of its own")
	}
	for _, tool := range append(append([]string(nil), Tools...), tools...) {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("%s is not installed (make deps installs it)", tool)
		}
	}
}

// Rerun runs the calling test again inside a namespace of its own (see
// Script), with the environment variable env set there, and returns
// false; inside, where env is set, it returns true and the test goes on.
// setup runs before the test inside (say, another service beside
// rpcbind), private are more directories the namespace has a tmpfs on.
func Rerun(t *testing.T, env, setup string, private ...string) bool {
	t.Helper()
	if os.Getenv(env) != "" {
		return true
	}
	Need(t)
	script := Script(setup+`"$0" -test.run "^$1\$" -test.count=1 -test.v`+"\n", private...)
	cmd := Command(script, os.Args[0], t.Name())
	cmd.Env = append(os.Environ(), env+"=1")
	out, err := cmd.CombinedOutput()
	t.Logf("in its namespace:\n%s", out)
	if err != nil {
		t.Fatalf("%v", err)
	}
	if !bytes.Contains(out, []byte("--- PASS: "+t.Name())) {
		t.Fatalf("the test did not pass in its namespace")
	}
	return false
}
