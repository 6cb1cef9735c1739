package guest

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// mountstatsBlock returns the block of mount point mnt in a mountstats
// text (/proc/self/mountstats or rdmafs stats), from its device line to
// the next device line, or to the NLM block that rdmafs stats shows after
// it for a mount with lock (the kernel has none per mount).
func mountstatsBlock(text, mnt string) []string {
	var block []string
	in := false
	for _, line := range strings.Split(text, "\n") {
		if strings.HasPrefix(line, "device ") {
			f := strings.Fields(line)
			in = len(f) > 4 && f[4] == mnt
		}
		if strings.HasPrefix(line, "per-op NLM statistics") {
			in = false
		}
		if in && strings.TrimSpace(line) != "" {
			block = append(block, line)
		}
	}
	return block
}

// shape is what of a mountstats line must be the same for the kernel's
// block and rdmafs's: the key and the number of fields, or for the caps
// line the names of its fields.
func shape(line string) string {
	key, rest, _ := strings.Cut(strings.TrimSpace(line), ":")
	switch {
	case strings.HasPrefix(line, "device "):
		f := strings.Fields(line)
		return "device ... with fstype " + strings.Join(f[7:], " ")
	case key == "opts" || key == "age" || key == "sec":
		return key
	case key == "caps":
		var names []string
		for _, kv := range strings.Split(strings.TrimSpace(rest), ",") {
			name, _, _ := strings.Cut(kv, "=")
			names = append(names, name)
		}
		return "caps: " + strings.Join(names, ",")
	case strings.HasPrefix(key, "RPC iostats version"):
		return strings.Join(strings.Fields(line), " ")
	case key == "per-op statistics":
		return key
	}
	return key + ": " + strconv.Itoa(len(strings.Fields(rest)))
}

// TestRdmafsStatsLikeKernel: `rdmafs stats` has the lines of the kernel
// client's block in /proc/self/mountstats for the same export over TCP,
// each with as many fields, and nfs-common's mountstats reads a file with
// both blocks as it reads /proc/self/mountstats.
func TestRdmafsStatsLikeKernel(t *testing.T) {
	e := lab(t)
	bin := rdmafsBin(t, e)
	kmnt := mountKernel(t, e, "tcp")
	rmnt := mountRdmafs(t, e, "proto=tcp,vers=3")
	for _, mnt := range []string{kmnt, rmnt} {
		if err := os.WriteFile(filepath.Join(mnt, "stats-"+filepath.Base(mnt)), []byte("some data"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	proc, err := os.ReadFile("/proc/self/mountstats")
	if err != nil {
		t.Fatal(err)
	}
	kernel := mountstatsBlock(string(proc), kmnt)
	ours := mountstatsBlock(run(t, 10*time.Second, bin, "stats", rmnt), rmnt)
	if len(kernel) == 0 || len(ours) == 0 {
		t.Fatalf("no block: kernel %d lines, rdmafs %d lines", len(kernel), len(ours))
	}
	if len(kernel) != len(ours) {
		t.Errorf("kernel block has %d lines, rdmafs's %d", len(kernel), len(ours))
	}
	for i := 0; i < len(kernel) && i < len(ours); i++ {
		k, r := shape(kernel[i]), shape(ours[i])
		// The op names of the per-op lines must match too.
		if k != r {
			t.Errorf("line %d: kernel %q (%s), rdmafs %q (%s)", i+1, kernel[i], k, ours[i], r)
		}
	}
	if t.Failed() {
		t.Logf("kernel:\n%s\nrdmafs:\n%s", strings.Join(kernel, "\n"), strings.Join(ours, "\n"))
	}

	// nfs-common's mountstats is a Python script; the qemu guest's initramfs
	// leaves Python out (lab.sh TRIM_PATHS), the container has it. The host
	// test TestStatsMountstats runs it on rdmafs stats in every make test.
	if _, err := exec.LookPath("python3"); err != nil {
		t.Logf("no python3 here: mountstats not run on the two blocks")
		return
	}
	both := filepath.Join(t.TempDir(), "mountstats")
	os.WriteFile(both, []byte(strings.Join(kernel, "\n")+"\n"+strings.Join(ours, "\n")+"\n"), 0o644)
	out, err := exec.Command("mountstats", "-f", both).CombinedOutput()
	if err != nil || strings.Contains(string(out), "Traceback") ||
		!strings.Contains(string(out), "mounted on "+kmnt+":") || !strings.Contains(string(out), "mounted on "+rmnt+":") {
		t.Errorf("mountstats -f on both blocks: %v\n%s", err, out)
	}
}
