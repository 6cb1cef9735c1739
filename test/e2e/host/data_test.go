package host

import (
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"

	"github.com/rdmafs/rdmafs/test/e2e/e2etest"
	"github.com/rdmafs/rdmafs/test/e2e/workload"
)

// TestWorkload runs the operation workload that the guest tests run too,
// checking every file on the server side.
func TestWorkload(t *testing.T) {
	needHost(t)
	s := startServer(t, "", 0, "no_root_squash")
	mnt := s.mount(t)
	workload.Run(t, mnt, workload.DirChecker(s.dir))
}

// randomData returns a reader of n deterministic pseudo-random bytes.
func randomData(seed uint64, n int64) io.Reader {
	var key [32]byte
	binary.LittleEndian.PutUint64(key[:], seed)
	return io.LimitReader(rand.NewChaCha8(key), n)
}

// writeRandom writes n pseudo-random bytes to path in 1 MiB writes, closes
// it (which must commit it) and returns their SHA-256.
func writeRandom(t *testing.T, path string, seed uint64, n int64) [32]byte {
	t.Helper()
	sum, err := writeRandomFile(path, seed, n)
	if err != nil {
		t.Fatal(err)
	}
	return sum
}

func writeRandomFile(path string, seed uint64, n int64) ([32]byte, error) {
	f, err := os.Create(path)
	if err != nil {
		return [32]byte{}, err
	}
	h := sha256.New()
	buf := make([]byte, 1<<20)
	if _, err := io.CopyBuffer(io.MultiWriter(f, h), randomData(seed, n), buf); err != nil {
		f.Close()
		return [32]byte{}, fmt.Errorf("write %s: %w", path, err)
	}
	if err := f.Close(); err != nil {
		return [32]byte{}, fmt.Errorf("close %s: %w", path, err)
	}
	return [32]byte(h.Sum(nil)), nil
}

// TestGiBFile writes 1 GiB through the mount and reads it back, after the
// kernel dropped its cache, with the checksum it had when written; the
// server's copy has it too.
func TestGiBFile(t *testing.T) {
	needHost(t)
	s := startServer(t, "", 0, "no_root_squash")
	mnt := s.mount(t)
	const size = 1 << 30
	want := writeRandom(t, filepath.Join(mnt, "big"), 1, size)
	if got, n := e2etest.FileSum(t, filepath.Join(s.dir, "big")); got != want || n != size {
		t.Fatalf("server copy: %d bytes, sha256 %x, want %d bytes %x", n, got[:8], int64(size), want[:8])
	}
	e2etest.DropCaches(t)
	if got, n := e2etest.FileSum(t, filepath.Join(mnt, "big")); got != want || n != size {
		t.Fatalf("read back: %d bytes, sha256 %x, want %x", n, got[:8], want[:8])
	}
}

// TestConcurrentWriters has eight programs write different files at once.
func TestConcurrentWriters(t *testing.T) {
	needHost(t)
	s := startServer(t, "", 0, "no_root_squash")
	mnt := s.mount(t)
	const writers, size = 8, 32 << 20
	sums := make([][32]byte, writers)
	var wg sync.WaitGroup
	for i := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			sums[i] = writeRandom(t, filepath.Join(mnt, fmt.Sprintf("w%d", i)), uint64(100+i), size)
		}()
	}
	wg.Wait()
	e2etest.DropCaches(t)
	for i := range writers {
		name := fmt.Sprintf("w%d", i)
		if got, n := e2etest.FileSum(t, filepath.Join(s.dir, name)); got != sums[i] || n != size {
			t.Errorf("server copy of %s: %d bytes, wrong content", name, n)
		}
		if got, _ := e2etest.FileSum(t, filepath.Join(mnt, name)); got != sums[i] {
			t.Errorf("%s read back wrong", name)
		}
	}
}

// TestDirectAIO runs what a database does: O_DIRECT random writes of
// mixed sizes, 16 in flight through Linux AIO (fio), then reads every
// block back and checks its checksum; over TCP and over RDMA (the soft
// provider).
func TestDirectAIO(t *testing.T) {
	needHost(t)
	if _, err := exec.LookPath("fio"); err != nil {
		t.Skip("fio not installed (make deps installs it)")
	}
	for _, tc := range []struct {
		name  string
		serve []string
	}{{"tcp", nil}, {"rdma", rdmaServe}} {
		t.Run(tc.name, func(t *testing.T) {
			s := startServer(t, "", 0, append(tc.serve, "no_root_squash")...)
			mnt := s.mount(t)
			out, err := exec.Command("fio", "--name=aio", "--filename="+filepath.Join(mnt, "aio"),
				"--rw=randwrite", "--bsrange=4k-64k", "--ioengine=libaio", "--iodepth=16",
				"--direct=1", "--size=32m", "--verify=crc32c", "--do_verify=1",
				"--verify_fatal=1", "--verify_state_save=0").CombinedOutput()
			if err != nil {
				t.Fatalf("fio: %v\n%s", err, out)
			}
			if st, err := os.Stat(filepath.Join(s.dir, "aio")); err != nil || st.Size() != 32<<20 {
				t.Fatalf("server copy: %v %v; want 32 MiB", st, err)
			}
		})
	}
}
