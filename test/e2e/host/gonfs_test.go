package host

// rdmafs against a third NFSv3 server: go-nfs (github.com/willscott/go-nfs),
// served from this test process, beside knfsd (the guest tests) and
// `rdmafs serve` (the other host tests). go-nfs is not part of rdmafs (its
// server fakes atime and ctime and addresses files by path, see
// docs/design.md); here it is a server written by others from RFC 1813,
// whose replies rdmafs must take as they come.

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/go-git/go-billy/v5"
	"github.com/go-git/go-billy/v5/osfs"
	gonfs "github.com/willscott/go-nfs"
	gonfshelpers "github.com/willscott/go-nfs/helpers"

	"github.com/rdmafs/rdmafs/test/e2e/e2etest"
	"github.com/rdmafs/rdmafs/test/e2e/workload"
)

// changeOSFS is a directory of this machine as a billy file system whose
// attributes go-nfs can also change (billy.Change): SETATTR of mode,
// owner and times.
type changeOSFS struct{ billy.Filesystem }

var _ billy.Change = changeOSFS{}

func (c changeOSFS) path(name string) string { return c.Join(c.Root(), name) }

func (c changeOSFS) Chmod(name string, mode os.FileMode) error {
	return os.Chmod(c.path(name), mode)
}

func (c changeOSFS) Lchown(name string, uid, gid int) error {
	return os.Lchown(c.path(name), uid, gid)
}

func (c changeOSFS) Chown(name string, uid, gid int) error {
	return os.Chown(c.path(name), uid, gid)
}

func (c changeOSFS) Chtimes(name string, atime, mtime time.Time) error {
	return os.Chtimes(c.path(name), atime, mtime)
}

// statfsHandler answers FSSTAT with the statfs of the served directory;
// go-nfs's own helper answers with 2^62 bytes and files, all free.
type statfsHandler struct {
	gonfs.Handler
	dir string
}

func (h statfsHandler) FSStat(ctx context.Context, _ billy.Filesystem, s *gonfs.FSStat) error {
	var st syscall.Statfs_t
	if err := syscall.Statfs(h.dir, &st); err != nil {
		return fmt.Errorf("statfs %s: %w", h.dir, err)
	}
	bs := uint64(st.Frsize)
	s.TotalSize, s.FreeSize, s.AvailableSize = st.Blocks*bs, st.Bfree*bs, st.Bavail*bs
	s.TotalFiles, s.FreeFiles, s.AvailableFiles = st.Files, st.Ffree, st.Ffree
	return nil
}

// startGoNFS serves dir with go-nfs's server on a free loopback port in
// this process and returns the port, where it answers both NFS and MOUNT
// (it has no portmapper).
func startGoNFS(t *testing.T, dir string) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	if os.Getenv("LOG_LEVEL") == "" {
		// go-nfs logs an error for every CREATE in EXCLUSIVE mode it
		// refuses (rdmafs then creates the file GUARDED): thousands in
		// the workload. LOG_LEVEL=error shows them again.
		gonfs.Log.SetLevel(gonfs.PanicLevel)
	}
	// Handles are go-nfs's cache of paths: it must hold every file the
	// workload makes, or their handles go stale.
	handler := gonfshelpers.NewCachingHandler(
		statfsHandler{gonfshelpers.NewNullAuthHandler(changeOSFS{osfs.New(dir)}), dir}, 1<<16)
	done := make(chan error, 1)
	go func() { done <- gonfs.Serve(l, handler) }()
	t.Cleanup(func() {
		l.Close()
		if err := <-done; err != nil && !errors.Is(err, net.ErrClosed) {
			t.Errorf("go-nfs server: %v", err)
		}
	})
	return l.Addr().(*net.TCPAddr).Port
}

// mountGoNFS mounts the export of the go-nfs server on port with rdmafs
// over TCP and returns the mount point; the test's cleanup unmounts it.
// go-nfs accepts only AUTH_NONE (sec=none).
func mountGoNFS(t *testing.T, port int) string {
	t.Helper()
	mnt := t.TempDir()
	opts := fmt.Sprintf("proto=tcp,port=%d,mountport=%d,sec=none", port, port)
	if out, err := exec.Command(rdmafsBin, "-o", opts, "127.0.0.1:/", mnt).CombinedOutput(); err != nil {
		t.Fatalf("mount: %v: %s", err, out)
	}
	t.Cleanup(func() { e2etest.Unmount(t, mnt) })
	return mnt
}

// TestGoNFSWorkload runs the workload through rdmafs against go-nfs,
// checking every file in the served directory, but for the steps that
// check what go-nfs (v0.0.4, over a directory) does not do:
//
//   - mkdir/rmdir: rmdir of a directory that is not empty fails with
//     NFS3ERR_IO (EIO), not NFS3ERR_NOTEMPTY: go-nfs maps every error of
//     its file system but "not found" and "permission" to NFS3ERR_IO.
//   - rename: after a directory is renamed, the handles of the files in it
//     name their old paths (go-nfs's handles stand for paths), so a file
//     looked up before the rename is gone (NFS3ERR_NOENT) under either name.
//   - hardlink: go-nfs decodes LINK's arguments as SYMLINK's (diropargs3,
//     sattr3, a path), so LINK fails with NFS3ERR_INVAL (EINVAL).
//   - chmod: SETATTR keeps only the permission bits: setuid is dropped.
//
// The parts of those steps go-nfs does do are checked after the workload.
// Other differences rdmafs takes in its stride and the workload passes
// with: go-nfs refuses CREATE in EXCLUSIVE mode (NFS3ERR_NOTSUPP), which
// rdmafs uses for O_EXCL and then creates the file GUARDED; its atime and
// ctime are the mtime; its modes carry Go's os.FileMode type bits above
// the permission bits (a directory's has 1<<31).
func TestGoNFSWorkload(t *testing.T) {
	needHost(t)
	dir := t.TempDir()
	mnt := mountGoNFS(t, startGoNFS(t, dir))
	check := workload.DirChecker(dir)
	workload.RunWithout(t, mnt, check, "mkdir/rmdir", "rename", "hardlink", "chmod")
	if t.Failed() {
		return
	}

	// What go-nfs does of the steps left out, checked in the directory
	// it serves.
	onServer := func(p string) string { return filepath.Join(dir, p) }
	if err := os.MkdirAll(filepath.Join(mnt, "a/b/c"), 0o755); err != nil {
		t.Fatalf("mkdir -p a/b/c: %v", err)
	}
	if st, err := os.Stat(onServer("a/b/c")); err != nil || !st.IsDir() {
		t.Fatalf("server side, a/b/c after mkdir -p: %v, %v", st, err)
	}
	if err := os.Mkdir(filepath.Join(mnt, "a"), 0o755); !errors.Is(err, fs.ErrExist) {
		t.Errorf("mkdir of existing a: got %v, want EEXIST", err)
	}
	for _, d := range []string{"a/b/c", "a/b", "a"} {
		if err := syscall.Rmdir(filepath.Join(mnt, d)); err != nil {
			t.Fatalf("rmdir %s: %v", d, err)
		}
		if _, err := os.Stat(onServer(d)); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("server side, %s after rmdir: %v, want it gone", d, err)
		}
	}

	write(t, filepath.Join(mnt, "src"), "moved")
	write(t, filepath.Join(mnt, "old"), "replaced")
	if err := os.Rename(filepath.Join(mnt, "src"), filepath.Join(mnt, "dst")); err != nil {
		t.Fatalf("rename src dst: %v", err)
	}
	if err := os.Rename(filepath.Join(mnt, "dst"), filepath.Join(mnt, "old")); err != nil {
		t.Fatalf("rename dst over old: %v", err)
	}
	for p, want := range map[string]string{"src": "", "dst": "", "old": "moved"} {
		got, err := os.ReadFile(onServer(p))
		switch {
		case want == "" && !errors.Is(err, fs.ErrNotExist):
			t.Errorf("server side, %s after the renames: %q, %v; want it gone", p, got, err)
		case want != "" && (err != nil || string(got) != want):
			t.Errorf("server side, %s after the renames: %q, %v; want %q", p, got, err, want)
		}
	}
	if got := read(t, filepath.Join(mnt, "old")); got != "moved" {
		t.Errorf("old through the mount after the renames: %q, want %q", got, "moved")
	}

	for _, m := range []fs.FileMode{0o600, 0o751, 0o444} {
		if err := os.Chmod(filepath.Join(mnt, "old"), m); err != nil {
			t.Fatalf("chmod %v old: %v", m, err)
		}
		st, err := os.Stat(onServer("old"))
		if err != nil || st.Mode().Perm() != m {
			t.Errorf("server side, old after chmod %v: %v, %v", m, st.Mode(), err)
		}
		if st, err := os.Stat(filepath.Join(mnt, "old")); err != nil || st.Mode().Perm() != m {
			t.Errorf("old through the mount after chmod %v: %v, %v", m, st.Mode(), err)
		}
	}
	if err := os.Remove(filepath.Join(mnt, "old")); err != nil {
		t.Fatalf("remove old: %v", err)
	}
}
