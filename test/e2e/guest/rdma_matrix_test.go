package guest

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/rdmafs/rdmafs/test/e2e/workload"
)

// TestRDMAMatrix runs the small workload through every RDMA option value
// against its reference peer, in one boot:
//
//   - rdmafs over RPC-over-RDMA against knfsd, for each memreg strategy,
//     at slot_table_entries 4 (the smallest the option takes), 128 and
//     16384 (the largest; the transport lowers it to what rxe holds) and
//     at max_inline_read/max_inline_write 1024 and 4096, with the memory
//     registration work per call logged from the mount's counters;
//   - the kernel NFS/RDMA client against `rdmafs serve -o proto=rdma`
//     for each of serve's options: rw (the default), ro, workers=1.
func TestRDMAMatrix(t *testing.T) {
	e := lab(t)
	bin := rdmafsBin(t, e)
	check := workload.DirChecker(e.Export)
	for _, memreg := range []string{"mw", "register", "persistent"} {
		for _, slots := range []int{4, 128, 16384} {
			for _, inline := range []int{1024, 4096} {
				opts := fmt.Sprintf("proto=rdma,vers=3,memreg=%s,slot_table_entries=%d,max_inline_read=%d,max_inline_write=%d",
					memreg, slots, inline, inline)
				t.Run(fmt.Sprintf("rdmafs/%s/slots=%d/inline=%d", memreg, slots, inline), func(t *testing.T) {
					mnt := mountRdmafs(t, e, opts)
					workload.RunSmall(t, mnt, check)
					logRegistrationCosts(t, bin, mnt, memreg)
				})
			}
		}
	}
	// proto=rdma at knfsd's TCP port and at a port where nothing
	// listens: the mount fails at once and says what answered.
	for _, c := range []struct{ name, port, want string }{
		{"tcp-port", "2049", "a TCP service answers on that port"},
		{"nothing", "20099", "no RPC-over-RDMA listener at"},
	} {
		t.Run("mount-error/"+c.name, func(t *testing.T) {
			dir := mountPoint(t, "rdmafs-err")
			defer os.Remove(dir)
			start := time.Now()
			out, err := exec.Command(bin, "-o", "proto=rdma,vers=3,port="+c.port, e.Addr+":"+e.Export, dir).CombinedOutput()
			d := time.Since(start)
			var ee *exec.ExitError
			if !errors.As(err, &ee) || ee.ExitCode() != 32 || !strings.Contains(string(out), c.want) {
				t.Errorf("mount: %v, %q; want exit 32 and %q", err, out, c.want)
			}
			if d > 15*time.Second {
				t.Errorf("took %v to fail", d)
			}
			t.Logf("after %v: %s", d.Round(time.Millisecond), out)
		})
	}
	// The workload runs as root: no_root_squash with each option.
	for i, opt := range []string{"rw", "ro", "workers=1", "insecure", "all_squash,anonuid=0,anongid=0"} {
		t.Run("kernel-on-serve/"+opt, func(t *testing.T) {
			dir := t.TempDir()
			os.Chmod(dir, 0o777)
			port := startServe(t, e, bin, dir, 20060+i, opt+",no_root_squash")
			mnt := mountKernelOnServe(t, e, port, 20060+i, "rdma")
			if opt == "ro" {
				if err := os.WriteFile(filepath.Join(dir, "given"), []byte("from the server"), 0o644); err != nil {
					t.Fatal(err)
				}
				if got, err := os.ReadFile(filepath.Join(mnt, "given")); err != nil || string(got) != "from the server" {
					t.Errorf("read through the ro export: %q, %v", got, err)
				}
				err := os.WriteFile(filepath.Join(mnt, "new"), []byte("x"), 0o644)
				if !errors.Is(err, syscall.EROFS) {
					t.Errorf("create on a ro export: %v, want EROFS", err)
				}
				return
			}
			workload.RunSmall(t, mnt, workload.DirChecker(dir))
		})
	}
}

// logRegistrationCosts logs what memory registration cost per call, from
// the mount's "xprt: rdma" counters: windows bound, registrations made,
// local invalidations (the README's memreg table).
func logRegistrationCosts(t *testing.T, bin, mnt, memreg string) {
	out, err := exec.Command(bin, "stats", mnt).CombinedOutput()
	if err != nil {
		t.Errorf("rdmafs stats: %v: %s", err, out)
		return
	}
	var f []string
	for l := range strings.SplitSeq(string(out), "\n") {
		if fs := strings.Fields(l); len(fs) > 1 && fs[0] == "xprt:" && fs[1] == "rdma" {
			f = fs[2:]
		}
	}
	if len(f) < 27 {
		t.Errorf("no xprt: rdma line in %s", out)
		return
	}
	n := func(i int) float64 { v, _ := strconv.ParseFloat(f[i], 64); return v }
	sends, chunks := n(5), n(10)+n(11)+n(12)
	binds, regs, invs := n(21)+n(23), n(17), n(24)
	if n(19) != 0 || n(18) != 0 {
		t.Errorf("bad replies %v, failed marshals %v", n(19), n(18))
	}
	if sends == 0 || chunks == 0 {
		t.Errorf("sends %v, chunks %v: the workload did not go over RDMA", sends, chunks)
		return
	}
	t.Logf("memreg=%s: %v calls, %v chunks; per call: %.2f binds, %.2f registrations, %.2f local invalidations; "+
		"per chunk: %.2f binds, %.2f registrations, %.2f local invalidations",
		memreg, sends, chunks, binds/sends, regs/sends, invs/sends, binds/chunks, regs/chunks, invs/chunks)
}
