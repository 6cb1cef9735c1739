package fuseuring

import (
	"maps"
	"slices"
	"testing"
)

func TestParseCPUList(t *testing.T) {
	for _, c := range []struct {
		in   string
		want []int
	}{
		{"0\n", []int{0}},
		{"0-1\n", []int{0, 1}},
		{"0-3,5,7-8\n", []int{0, 1, 2, 3, 5, 7, 8}},
		{"", nil},
	} {
		got, err := parseCPUList(c.in)
		if err != nil {
			t.Errorf("parseCPUList(%q): %v", c.in, err)
			continue
		}
		if keys := slices.Sorted(maps.Keys(got)); !slices.Equal(keys, c.want) {
			t.Errorf("parseCPUList(%q) = %v; want %v", c.in, keys, c.want)
		}
	}
	for _, bad := range []string{"x", "3-1", "1-", "-1"} {
		if _, err := parseCPUList(bad); err == nil {
			t.Errorf("parseCPUList(%q) = nil error; want one", bad)
		}
	}
}
