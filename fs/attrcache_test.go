package fs

import (
	"fmt"
	"testing"
	"time"
)

// TestAttrCacheTimeouts: attributes stay fresh for acregmin at first, twice
// as long each time they come back unchanged up to acregmax, and acregmin
// again after a change, as in the kernel client.
func TestAttrCacheTimeouts(t *testing.T) {
	h := newHarness(t, harnessConfig{})
	node, fh := h.mustCreate(rootNode, "f", 0o644)
	h.close(node, fh)
	obj := h.fs.objectOf(t, "f")
	a := obj.cachedAttr()
	var got []time.Duration
	for range 6 {
		h.fs.setAttr(obj, &a)
		got = append(got, obj.attrTimeo)
	}
	a.Mtime.Sec++
	h.fs.setAttr(obj, &a)
	got = append(got, obj.attrTimeo)
	want := fmt.Sprint([]time.Duration{6 * time.Second, 12 * time.Second, 24 * time.Second, 48 * time.Second, 60 * time.Second, 60 * time.Second, 3 * time.Second})
	if fmt.Sprint(got) != want {
		t.Errorf("timeouts %v, want %v", got, want)
	}
}
