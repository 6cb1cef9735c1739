package main

import (
	"flag"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rdmafs/rdmafs/cmd/rdmafs/serveopts"
)

var updateMan = flag.Bool("update-man", false, "rewrite docs/rdmafs.8 (make man)")

// manFile is the committed man page, which make install installs.
var manFile = filepath.Join("..", "..", "docs", "rdmafs.8")

// TestManPage: the committed rdmafs(8) is the page the option table and
// the command docs make, so it cannot drift from rdmafs -h.
func TestManPage(t *testing.T) {
	want := manPage()
	if *updateMan {
		if err := os.WriteFile(manFile, []byte(want), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	got, err := os.ReadFile(manFile)
	if err != nil {
		t.Fatalf("%v (make man writes it)", err)
	}
	if string(got) != want {
		t.Fatalf("docs/rdmafs.8 differs from the page rdmafs's option table makes: run make man and commit it")
	}
}

// TestManPageRenders: groff formats the page without a warning, and the
// text a reader sees has every mount option of rdmafs -h and every serve
// option.
func TestManPageRenders(t *testing.T) {
	groff, err := exec.LookPath("groff")
	if err != nil {
		t.Fatal("groff is not installed: make deps installs it (package groff-base)")
	}
	cmd := exec.Command(groff, "-man", "-Tutf8", "-ww", "-rLL=100n", "-rHY=0")
	cmd.Stdin = strings.NewReader(manPage())
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil || stderr.Len() > 0 {
		t.Fatalf("groff: %v: %s", err, stderr.String())
	}
	// groff uses backspaces for bold: strip them to get what is shown.
	shown := strings.Join(strings.Fields(stripOverstrike(string(out))), " ")
	var help strings.Builder
	usage(&help)
	for _, line := range strings.Split(help.String(), "\n") {
		// Every option line of -h ("  rsize=N (0 or 4096..1048576; default 0)")
		// names an option the page must show.
		if !strings.HasPrefix(line, "  ") || strings.HasPrefix(line, "   ") {
			continue
		}
		syntax, _, _ := strings.Cut(strings.TrimSpace(line), " (")
		syntax = strings.Join(strings.Fields(syntax), " ")
		if strings.HasPrefix(syntax, "rdmafs") {
			syntax = "rdmafs"
		}
		if !strings.Contains(shown, syntax) {
			t.Errorf("the rendered page lacks %q (from rdmafs -h)", syntax)
		}
	}
	// Every serve option, as its table documents it.
	for _, sec := range serveopts.Sections() {
		for _, it := range sec.Items {
			for _, want := range []string{it.Syntax, it.Help} {
				if !strings.Contains(shown, strings.Join(strings.Fields(want), " ")) {
					t.Errorf("the rendered page lacks serve option text %q", want)
				}
			}
		}
	}
	for _, want := range []string{"MOUNT OPTIONS", "Mirrors: nfs(5) rsize.", "Mirrors: sysctl sunrpc.rdma_memreg_strategy.",
		"rdmafs stats [-json | -prometheus | -listen ADDR] [-i SECONDS [COUNT]] [MOUNTPOINT...]"} {
		if !strings.Contains(shown, want) {
			t.Errorf("the rendered page lacks %q", want)
		}
	}
}

// stripOverstrike removes the "c\bc" and "_\bc" overstrikes of groff's
// terminal output, leaving the characters.
func stripOverstrike(s string) string {
	var b strings.Builder
	r := []rune(s)
	for i := 0; i < len(r); i++ {
		if i+1 < len(r) && r[i+1] == '\b' {
			continue
		}
		if r[i] == '\b' {
			continue
		}
		b.WriteRune(r[i])
	}
	return b.String()
}
