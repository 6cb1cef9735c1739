package host

import (
	"os"
	"strconv"
	"testing"

	"github.com/rdmafs/rdmafs/test/e2e/exerciser"
	"github.com/rdmafs/rdmafs/test/seed"
)

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
			// RDMAFS_EXERCISER_SEED replays a failure.
			cfg := exerciser.Config{Mounts: []string{a, b}, Dir: "exerciser", Seed: seed.New(t, "RDMAFS_EXERCISER_SEED"), Ops: exerciserOps()}
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
