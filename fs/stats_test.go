package fs

import "testing"

// TestMangle: device names and mount points are escaped in the mountstats
// block as the kernel escapes them, so that a space does not split a field.
func TestMangle(t *testing.T) {
	for in, want := range map[string]string{
		"/mnt/x":        "/mnt/x",
		"/mnt/a b":      `/mnt/a\040b`,
		"s:/e\tx\ny\\z": `s:/e\011x\012y\134z`,
		"":              "",
	} {
		if got := mangle(in); got != want {
			t.Errorf("mangle(%q) = %q, want %q", in, got, want)
		}
	}
}
