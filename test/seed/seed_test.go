package seed

import (
	"os"
	"testing"
)

// TestReplayNamesPackageAndTest: the replay line is a command a user can
// paste: the variable, this package's directory and the test, subtests
// anchored one by one.
func TestReplayNamesPackageAndTest(t *testing.T) {
	got := Replay("TestX/tcp+rdma", "RDMAFS_X_SEED", 42)
	want := `RDMAFS_X_SEED=42 go test ./test/seed -run '^TestX$/^tcp\+rdma$'`
	if got != want {
		t.Errorf("replay line %q, want %q", got, want)
	}
}

// TestFromEnvironment: the variable replays a seed, in decimal or hex;
// Fixed keeps its seed unless the variable says otherwise; random and an
// unset New draw.
func TestFromEnvironment(t *testing.T) {
	fixed := uint64(7)
	for _, c := range []struct {
		value string
		fixed *uint64
		want  uint64 // 0: any draw
	}{
		{"12345", nil, 12345},
		{"0x10", nil, 16},
		{"12345", &fixed, 12345},
		{"", &fixed, 7},
		{"random", &fixed, 0},
		{"", nil, 0},
	} {
		got, err := parse(c.value, c.fixed)
		if err != nil || (c.want != 0 && got != c.want) {
			t.Errorf("value %q (fixed %v): %d, %v; want %d", c.value, c.fixed != nil, got, err, c.want)
		}
	}
	if _, err := parse("twelve", nil); err == nil {
		t.Errorf("value %q accepted as a seed", "twelve")
	}
	t.Setenv("RDMAFS_SEED_TEST", "99")
	if got := New(t, "RDMAFS_SEED_TEST"); got != 99 {
		t.Errorf("New with RDMAFS_SEED_TEST=99: %d", got)
	}
	os.Unsetenv("RDMAFS_SEED_TEST")
	if New(t, "RDMAFS_SEED_TEST") == New(t, "RDMAFS_SEED_TEST") {
		t.Errorf("two draws gave the same seed")
	}
}
