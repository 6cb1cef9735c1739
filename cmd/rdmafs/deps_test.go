package main

import (
	"os/exec"
	"slices"
	"strings"
	"testing"
)

// testOnlyRefs are parts of the paths of the packages that rdmafs's tests
// use as references (go-xdr in the codec fuzz tests, go-nfs and its billy
// file systems in the host end-to-end test) and the binary must not.
var testOnlyRefs = []string{"go-nfs", "go-xdr", "go-billy"}

// goListDeps returns the import paths of pkg and everything it imports,
// with the packages its tests import too if withTests.
func goListDeps(t *testing.T, pkg string, withTests bool) []string {
	t.Helper()
	args := []string{"list", "-deps"}
	if withTests {
		args = append(args, "-test")
	}
	out, err := exec.Command("go", append(args, pkg)...).CombinedOutput()
	if err != nil {
		t.Fatalf("go %s: %v\n%s", strings.Join(append(args, pkg), " "), err, out)
	}
	return strings.Fields(string(out))
}

// refsIn returns the packages of deps whose path names a test-only reference.
func refsIn(deps []string) []string {
	var found []string
	for _, p := range deps {
		if slices.ContainsFunc(testOnlyRefs, func(ref string) bool { return strings.Contains(p, ref) }) {
			found = append(found, p)
		}
	}
	return found
}

// TestBinaryLeavesOutTestReferences: go-nfs and go-xdr are dependencies
// of the module for its tests only; the rdmafs binary links neither (nor
// go-billy), so they cost it nothing.
func TestBinaryLeavesOutTestReferences(t *testing.T) {
	deps := goListDeps(t, "github.com/rdmafs/rdmafs/cmd/rdmafs", false)
	if !slices.Contains(deps, "github.com/hanwen/go-fuse/v2/fs") {
		t.Fatalf("go list -deps of rdmafs lacks go-fuse: not the list of the binary's packages:\n%v", deps)
	}
	if found := refsIn(deps); found != nil {
		t.Errorf("the rdmafs binary links test-only references: %v", found)
	}
	// The same look finds them where they are used: in the tests.
	if found := refsIn(goListDeps(t, "github.com/rdmafs/rdmafs/nfs3", true)); !slices.Contains(found, "github.com/rasky/go-xdr/xdr2") {
		t.Errorf("go list -deps -test of nfs3 names %v, not go-xdr, which its fuzz tests use", found)
	}
}
