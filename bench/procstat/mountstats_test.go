package procstat

import "testing"

const sampleMountstats = `device proc mounted on /proc with fstype proc
device 10.11.0.1:/export mounted on /mnt/a with fstype nfs statvers=1.1
	opts:	rw,vers=3
	RPC iostats version: 1.1  p/v: 100003/3 (nfs)
	xprt:	rdma 0 0 1 0 0 7 7 0 7 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0
	per-op statistics
	        NULL: 1 1 0 44 24 0 0 0 0
	     GETATTR: 5 5 0 600 560 0 1 1 0
	      LOOKUP: 1000 1000 0 130000 120000 3 900 950 0

per-op NLM statistics p/v: 100021/4 (nlockmgr)
	    NLM_LOCK: 7 7 0 1400 280 0 3 4 0

device 10.11.0.1:/export mounted on /mnt/ab with fstype nfs statvers=1.1
	per-op statistics
	        NULL: 9 9 0 44 24 0 0 0 0
`

// TestMountRPCsBlock: the calls of the mount asked for are summed over its
// NFS procedures, and only its own (/mnt/ab's start like /mnt/a's): not
// the NLM procedures of rdmafs's block that follows a mount with locks,
// which made the guest benchmark's RPC column a dash for rdmafs.
func TestMountRPCsBlock(t *testing.T) {
	for dir, want := range map[string]uint64{"/mnt/a": 1006, "/mnt/ab": 9} {
		b := findBlock([]byte(sampleMountstats), dir)
		if b == nil {
			t.Fatalf("no block for %s", dir)
		}
		n, err := countRPCs(b)
		if err != nil || n != want {
			t.Errorf("%s: %d RPCs, %v; want %d", dir, n, err, want)
		}
	}
	if b := findBlock([]byte(sampleMountstats), "/mnt"); b != nil {
		t.Errorf("a block for /mnt, which has no NFS mount: %q", b)
	}
	if _, err := countRPCs([]byte("device x mounted on /y with fstype nfs\n\tage: 3\n")); err == nil {
		t.Error("a block without per-op statistics counted")
	}
	if _, err := countRPCs([]byte("per-op statistics\n\tGETATTR: many\n")); err == nil {
		t.Error("a per-op line without a number counted")
	}
}
