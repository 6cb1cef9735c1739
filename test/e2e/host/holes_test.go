package host

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	"golang.org/x/sys/unix"
)

// TestReadHoleBelowQueuedWrite: a read of a hole below the end of a file
// whose extending write is still queued in the client returns zeros and
// the data, not the server's end of file; the size survives fsync and
// reopen, a mapping of the whole file reads, and copy_file_range copies it.
func TestReadHoleBelowQueuedWrite(t *testing.T) {
	needHost(t)
	for _, proto := range []struct {
		name  string
		serve []string
	}{{"tcp", nil}, {"rdma", rdmaServe}} {
		t.Run(proto.name, func(t *testing.T) {
			s := startServer(t, "", 0, proto.serve...)
			mnt := s.mount(t)
			const off, n, size = 0xbb90, 0x15bb, 0xd14b
			data := bytes.Repeat([]byte{0xa5}, n)
			want := append(make([]byte, off), data...)

			p := filepath.Join(mnt, "f")
			f, err := os.OpenFile(p, os.O_RDWR|os.O_CREATE, 0o644)
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			if _, err := f.WriteAt(data, off); err != nil {
				t.Fatal(err)
			}
			buf := make([]byte, size)
			if got, err := unix.Pread(int(f.Fd()), buf, 0); err != nil || got != size || !bytes.Equal(buf, want) {
				t.Fatalf("pread %#x at 0 after pwrite %#x at %#x: %d bytes (%v), right: %v", size, n, off, got, err, bytes.Equal(buf[:max(got, 0)], want[:max(got, 0)]))
			}
			m, err := unix.Mmap(int(f.Fd()), 0, size, unix.PROT_READ, unix.MAP_SHARED)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(m, want) {
				t.Errorf("mmap of the file's %#x bytes differs", size)
			}
			unix.Munmap(m)

			dst, err := os.Create(filepath.Join(mnt, "copy"))
			if err != nil {
				t.Fatal(err)
			}
			defer dst.Close()
			copied := 0
			for copied < size {
				k, err := unix.CopyFileRange(int(f.Fd()), nil, int(dst.Fd()), nil, size-copied, 0)
				if err != nil || k == 0 {
					t.Fatalf("copy_file_range after %#x bytes: %d, %v", copied, k, err)
				}
				copied += k
			}
			if err := f.Sync(); err != nil {
				t.Fatal(err)
			}
			f.Close()
			if st, err := os.Stat(p); err != nil || st.Size() != size {
				t.Fatalf("size after fsync and close: %v %v, want %#x", st.Size(), err, size)
			}
			if got, err := os.ReadFile(p); err != nil || !bytes.Equal(got, want) {
				t.Errorf("read after reopen: %d bytes (%v)", len(got), err)
			}
			dst.Close()
			if got, err := os.ReadFile(filepath.Join(s.dir, "copy")); err != nil || !bytes.Equal(got, want) {
				t.Errorf("the copy on the server: %d bytes (%v)", len(got), err)
			}
		})
	}
}
