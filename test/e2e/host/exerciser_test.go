package host

import (
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/rdmafs/rdmafs/test/e2e/exerciser"
)

// exerciserSeed is the seed of the random file exerciser: the
// RDMAFS_EXERCISER_SEED environment variable replays a failure.
func exerciserSeed(t *testing.T) uint64 {
	if s := os.Getenv("RDMAFS_EXERCISER_SEED"); s != "" {
		seed, err := strconv.ParseUint(s, 0, 64)
		if err != nil {
			t.Fatalf("RDMAFS_EXERCISER_SEED=%q: %v", s, err)
		}
		return seed
	}
	return uint64(time.Now().UnixNano())
}

// exerciserOps is the length of a run; RDMAFS_EXERCISER_OPS changes it.
func exerciserOps() int {
	if n, err := strconv.Atoi(os.Getenv("RDMAFS_EXERCISER_OPS")); err == nil && n > 0 {
		return n
	}
	return 3000
}

// TestExerciser runs random file operations through two rdmafs mounts of
// one export, over TCP and over RDMA, and checks every answer against a
// model of the files.
func TestExerciser(t *testing.T) {
	needHost(t)
	for _, proto := range []struct {
		name  string
		serve []string
	}{{"tcp", nil}, {"rdma", rdmaServe}} {
		t.Run(proto.name, func(t *testing.T) {
			s := startServer(t, "", 0, append(proto.serve, "no_root_squash")...)
			a, b := s.mount(t), s.mount(t)
			seed := exerciserSeed(t)
			t.Logf("seed %d (replay: RDMAFS_EXERCISER_SEED=%d go test ./test/e2e/host -run 'TestExerciser/%s')", seed, seed, proto.name)
			cfg := exerciser.Config{Mounts: []string{a, b}, Dir: "exerciser", Seed: seed, Ops: exerciserOps()}
			if os.Getenv("RDMAFS_EXERCISER_VERBOSE") != "" {
				cfg.Logf = t.Logf
			}
			err := exerciser.Run(cfg)
			if err != nil {
				t.Fatal(err)
			}
		})
	}
}
