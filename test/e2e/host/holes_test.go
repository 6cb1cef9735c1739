package host

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"runtime/debug"
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
			s := startServer(t, "", 0, append(proto.serve, "no_root_squash")...)
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

// TestReopenSeesOtherClientsSize: after another client grows or shrinks a
// file, an open through this mount takes the new size at once, as with the
// kernel client's close-to-open consistency: a mapping of the new size
// reads the new data without a fault, and the pages of a mapping of a
// shrunk file are written back no further than its end.
func TestReopenSeesOtherClientsSize(t *testing.T) {
	needHost(t)
	s := startServer(t, "", 0, "no_root_squash")
	a, b := s.mount(t), s.mount(t)
	const small, large = 0x58f8, 0x370c31
	write(t, filepath.Join(b, "f"), "x")
	// a learns the first size.
	if got := read(t, filepath.Join(a, "f")); got != "x" {
		t.Fatalf("first read through a: %q", got)
	}

	data := bytes.Repeat([]byte{7}, large)
	if err := os.WriteFile(filepath.Join(b, "f"), data, 0o644); err != nil {
		t.Fatal(err)
	}
	f, err := os.OpenFile(filepath.Join(a, "f"), os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	var mapped []byte
	err = mapAndDo(f, large, func(m []byte) { mapped = bytes.Clone(m[large-4096:]) })
	f.Close()
	if err != nil || !bytes.Equal(mapped, data[large-4096:]) {
		t.Fatalf("mapping the grown file through a: %v; the last page right: %v", err, bytes.Equal(mapped, data[large-4096:]))
	}

	// a reads some of it, so its kernel has pages and the large size.
	if f, err = os.Open(filepath.Join(a, "f")); err != nil {
		t.Fatal(err)
	}
	f.ReadAt(make([]byte, 100), 0x100000)
	f.Close()
	if err := os.Truncate(filepath.Join(b, "f"), small); err != nil {
		t.Fatal(err)
	}
	if f, err = os.OpenFile(filepath.Join(a, "f"), os.O_RDWR, 0); err != nil {
		t.Fatal(err)
	}
	err = mapAndDo(f, small, func(m []byte) {
		for i := small - 0x2321; i < small; i++ {
			m[i] = 1
		}
		unix.Msync(m, unix.MS_SYNC)
	})
	f.Close()
	if err != nil {
		t.Fatal(err)
	}
	if st, err := os.Stat(filepath.Join(s.dir, "f")); err != nil || st.Size() != small {
		t.Errorf("after writing a mapping of the shrunk file through a, the server's file is %#x bytes (%v), want %#x", st.Size(), err, small)
	}
}

// mapAndDo maps n bytes of f shared and runs fn on them; a fault is an
// error.
func mapAndDo(f *os.File, n int, fn func([]byte)) (err error) {
	m, err := unix.Mmap(int(f.Fd()), 0, n, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	if err != nil {
		return err
	}
	defer unix.Munmap(m)
	old := debug.SetPanicOnFault(true)
	defer debug.SetPanicOnFault(old)
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("fault: %v", p)
		}
	}()
	fn(m)
	return nil
}
