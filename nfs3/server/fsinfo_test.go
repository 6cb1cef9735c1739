package server

import (
	"testing"

	"github.com/rdmafs/rdmafs/nfs3"
)

func TestFsinfoFsstatPathconf(t *testing.T) {
	_, addr := startServer(t, Options{Root: exportDir(t), Export: trusted})
	c := dialServer(t, addr)
	rootFH := c.root()

	r := c.nfs(nfs3.ProcFsinfo, asRoot, fhArg(rootFH))
	if st := getStatus(r); st != nfs3.OK {
		t.Fatalf("FSINFO: %d", st)
	}
	if readPostOpAttr(r) == nil {
		t.Error("FSINFO without attributes")
	}
	rtmax := r.Uint32()
	r.Uint32()
	r.Uint32()
	wtmax := r.Uint32()
	if rtmax != maxIO || wtmax != maxIO {
		t.Errorf("FSINFO rtmax %d wtmax %d", rtmax, wtmax)
	}

	r = c.nfs(nfs3.ProcFsstat, asRoot, fhArg(rootFH))
	if st := getStatus(r); st != nfs3.OK {
		t.Fatalf("FSSTAT: %d", st)
	}
	readPostOpAttr(r)
	if tbytes, fbytes := r.Uint64(), r.Uint64(); tbytes == 0 || fbytes > tbytes || tbytes == 1<<62 {
		t.Errorf("FSSTAT sizes %d %d", tbytes, fbytes)
	}

	r = c.nfs(nfs3.ProcPathconf, asRoot, fhArg(rootFH))
	if st := getStatus(r); st != nfs3.OK {
		t.Fatalf("PATHCONF: %d", st)
	}
	readPostOpAttr(r)
	r.Uint32()
	if nameMax := r.Uint32(); nameMax != 255 {
		t.Errorf("PATHCONF name_max %d", nameMax)
	}
}
