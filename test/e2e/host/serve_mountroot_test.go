package host

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// TestLibnfsFileAtRoot: libnfs's nfs-cat reads a file at the top of the
// export, nfs://host/file, for which libnfs asks MOUNT for the empty path;
// the server mounts its root, as nfs-utils' mountd does. (libnfs then
// looks for exports nested below the one it mounted, and gives up on an
// empty one whatever the server: auto-traverse-mounts=0 skips that.)
func TestLibnfsFileAtRoot(t *testing.T) {
	needHost(t)
	if _, err := exec.LookPath("nfs-cat"); err != nil {
		t.Skip("nfs-cat is not installed (Debian libnfs-utils; make deps installs it)")
	}
	s := startServer(t, "", 0)
	os.Chmod(s.dir, 0o755)
	const want = "at the top of the export\n"
	if err := os.WriteFile(filepath.Join(s.dir, "file"), []byte(want), 0o644); err != nil {
		t.Fatal(err)
	}
	url := fmt.Sprintf("nfs://127.0.0.1/file?nfsport=%d&mountport=%d&version=3&auto-traverse-mounts=0", s.port, s.port)
	out, err := exec.Command("nfs-cat", url).CombinedOutput()
	if err != nil || string(out) != want {
		t.Errorf("nfs-cat %s: %v: %q, want %q", url, err, out, want)
	}
}
