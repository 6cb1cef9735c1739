package server

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/rdmafs/rdmafs/nfs3"
)

func TestReaddir(t *testing.T) {
	root := exportDir(t)
	want := map[string]bool{".": true, "..": true}
	for i := 0; i < 50; i++ {
		name := fmt.Sprintf("entry-with-a-longish-name-%02d", i)
		os.WriteFile(filepath.Join(root, name), nil, 0o644)
		want[name] = true
	}
	_, addr := startServer(t, Options{Root: root, Export: trusted})
	c := dialServer(t, addr)
	rootFH := c.root()
	got := map[string]bool{}
	cookie, verf := uint64(0), make([]byte, 8)
	for pages := 0; ; pages++ {
		a := fhArg(rootFH)
		a.Uint64(cookie)
		a.Buf = append(a.Buf, verf...)
		a.Uint32(1024)
		r := c.nfs(nfs3.ProcReaddir, asRoot, a)
		if st := getStatus(r); st != nfs3.OK {
			t.Fatalf("READDIR: %d", st)
		}
		readPostOpAttr(r)
		verf = r.Fixed(8)
		for r.Uint32() != 0 {
			r.Uint64()
			name := string(r.Opaque(maxName))
			cookie = r.Uint64()
			if got[name] {
				t.Fatalf("%s listed twice", name)
			}
			got[name] = true
		}
		if r.Uint32() != 0 {
			break
		}
		if pages > 100 || r.Err() != nil {
			t.Fatalf("READDIR does not end: %v", r.Err())
		}
	}
	if len(got) != len(want) {
		t.Fatalf("READDIR listed %d names, want %d", len(got), len(want))
	}
}

func TestReaddirplusLargeDirectory(t *testing.T) {
	root := exportDir(t)
	const n = 20000
	big := filepath.Join(root, "big")
	if err := os.Mkdir(big, 0o755); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < n; i++ {
		f, err := os.Create(filepath.Join(big, fmt.Sprintf("file-%05d", i)))
		if err != nil {
			t.Fatal(err)
		}
		f.Close()
	}
	_, addr := startServer(t, Options{Root: root, Export: trusted})
	c := dialServer(t, addr)
	_, dirFH := c.lookup(asRoot, c.root(), "big")

	seen := make(map[string]int)
	cookie, verf := uint64(0), make([]byte, 8)
	pages := 0
	for eof := false; !eof; pages++ {
		if pages > n {
			t.Fatal("READDIRPLUS does not end")
		}
		var st nfs3.Status
		var ents []dirEntry
		st, ents, verf, eof = c.readdirplus(asRoot, dirFH, cookie, verf, 8192, 32768)
		if st != nfs3.OK {
			t.Fatalf("READDIRPLUS page %d (cookie %d): %d", pages, cookie, st)
		}
		if len(ents) == 0 && !eof {
			t.Fatalf("empty page %d before eof", pages)
		}
		for _, e := range ents {
			seen[e.name]++
			if e.name != "." && e.name != ".." && (e.attr == nil || len(e.fh) == 0) {
				t.Fatalf("entry %q without attributes or handle", e.name)
			}
			cookie = e.cookie
		}
	}
	for i := 0; i < n; i++ {
		name := fmt.Sprintf("file-%05d", i)
		if seen[name] != 1 {
			t.Fatalf("%s listed %d times", name, seen[name])
		}
		delete(seen, name)
	}
	delete(seen, ".")
	delete(seen, "..")
	if len(seen) != 0 {
		t.Fatalf("unexpected entries: %v", seen)
	}
	t.Logf("%d entries in %d pages", n, pages)
}
