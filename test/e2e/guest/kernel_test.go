package guest

import (
	"testing"

	"github.com/rdmafs/rdmafs/test/e2e/workload"
)

// The reference peers: the kernel NFSv3 client against knfsd, over TCP and
// over RDMA. Every rdmafs figure and behaviour is compared with these.

func TestKernelClientTCP(t *testing.T) { testKernelClient(t, "tcp") }

func TestKernelClientRDMA(t *testing.T) { testKernelClient(t, "rdma") }

func testKernelClient(t *testing.T, proto string) {
	e := lab(t)
	mnt := mountKernel(t, e, proto)
	if got := xprt(t, mnt); got != proto {
		t.Fatalf("/proc/self/mountstats: xprt %q for %s, want %q", got, mnt, proto)
	}
	sent0, rcvd0 := rxePackets(t, e)
	t.Run("workload", func(t *testing.T) {
		workload.Run(t, mnt, workload.DirChecker(e.Export))
	})
	t.Run("bigfile", func(t *testing.T) {
		bigFile(t, e, mnt, 64<<20)
	})
	sent1, rcvd1 := rxePackets(t, e)
	t.Logf("%s: sent %d, received %d packets during the test", e.RXE, sent1-sent0, rcvd1-rcvd0)
	if proto == "rdma" {
		// 64 MiB at RoCE MTU <= 4096 is at least 16384 packets each way
		// (client and server share the device, so each side's sends count)
		const least = 64 << 20 / 4096
		if sent1-sent0 < least || rcvd1-rcvd0 < least {
			t.Errorf("%s moved %d/%d packets (sent/received), want at least %d: the data did not go over RDMA",
				e.RXE, sent1-sent0, rcvd1-rcvd0, least)
		}
	}
}
