// Package layering holds docs/design.md's table of the module's package
// imports to the code: every import of one of the module's packages by
// another's non-test files is a row's entry, and every entry is such an
// import.
package layering

import (
	"errors"
	"fmt"
	"go/build"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

const (
	module = "github.com/rdmafs/rdmafs"
	doc    = "docs/design.md"
	// header starts the table of imports in doc.
	header = "| package | imports (in this module) |"
)

// TestDesignListsEveryImport: the layering table of docs/design.md has a
// row for each package of the module, and the row lists exactly the
// module's packages that the package's non-test files import.
func TestDesignListsEveryImport(t *testing.T) {
	root := moduleRoot(t)
	code := codeImports(t, root)
	text, err := os.ReadFile(filepath.Join(root, doc))
	if err != nil {
		t.Fatal(err)
	}
	documented, err := docImports(string(text))
	if err != nil {
		t.Fatalf("%s: %v", doc, err)
	}
	for _, msg := range compare(code, documented) {
		t.Error(msg)
	}
}

// An edge is an import of one of the module's packages by another; where
// is the first file and line that makes it ("" for documented edges).
type imports map[string]map[string]string // package -> imported -> where

// compare returns what doc must change to list exactly the imports of
// code: one message per row to add or remove, or per entry.
func compare(code, documented imports) []string {
	var msgs []string
	for _, pkg := range sortedKeys(code) {
		row, ok := documented[pkg]
		if !ok {
			msgs = append(msgs, fmt.Sprintf("%s: add the row %s for package %s", doc, rowText(pkg, sortedKeys(code[pkg])), pkg))
			continue
		}
		for _, imp := range sortedKeys(code[pkg]) {
			if _, ok := row[imp]; !ok {
				msgs = append(msgs, fmt.Sprintf("%s: add `%s` to the row of `%s`: %s imports it", doc, imp, pkg, code[pkg][imp]))
			}
		}
		for _, imp := range sortedKeys(row) {
			if _, ok := code[pkg][imp]; !ok {
				msgs = append(msgs, fmt.Sprintf("%s: remove `%s` from the row of `%s`: no non-test file of %s imports it", doc, imp, pkg, pkg))
			}
		}
	}
	for _, pkg := range sortedKeys(documented) {
		if _, ok := code[pkg]; !ok {
			msgs = append(msgs, fmt.Sprintf("%s: remove the row of `%s`: the module has no such package", doc, pkg))
		}
	}
	return msgs
}

// rowText is the table row of pkg importing imps.
func rowText(pkg string, imps []string) string {
	cell := "—"
	if len(imps) > 0 {
		cell = "`" + strings.Join(imps, "`, `") + "`"
	}
	return fmt.Sprintf("| `%s` | %s |", pkg, cell)
}

// moduleRoot is the directory above the test's that holds go.mod.
func moduleRoot(t *testing.T) string {
	dir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir
		}
		up := filepath.Dir(dir)
		if up == dir {
			t.Fatal("no go.mod above the test's directory")
		}
		dir = up
	}
}

// codeImports returns the module's packages under root, each with the
// module's packages its non-test files import, with cgo and without (a
// package may have files for each).
func codeImports(t *testing.T, root string) imports {
	code := imports{}
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() {
			return nil
		}
		name := d.Name()
		if path != root && (strings.HasPrefix(name, ".") || strings.HasPrefix(name, "_") || name == "testdata") {
			return filepath.SkipDir
		}
		rel, err := filepath.Rel(root, path)
		if err != nil {
			return err
		}
		pkg := filepath.ToSlash(rel)
		for _, cgo := range []bool{true, false} {
			ctx := build.Default
			ctx.CgoEnabled = cgo
			p, err := ctx.ImportDir(path, 0)
			var noGo *build.NoGoError
			if errors.As(err, &noGo) {
				continue
			}
			if err != nil {
				return fmt.Errorf("%s: %w", pkg, err)
			}
			if code[pkg] == nil {
				code[pkg] = map[string]string{}
			}
			for _, imp := range p.Imports {
				dep, ok := strings.CutPrefix(imp, module+"/")
				if !ok {
					continue
				}
				if _, seen := code[pkg][dep]; !seen {
					pos := p.ImportPos[imp][0]
					where, _ := filepath.Rel(root, pos.Filename)
					code[pkg][dep] = fmt.Sprintf("%s:%d", filepath.ToSlash(where), pos.Line)
				}
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return code
}

var pkgName = regexp.MustCompile("`([^`]+)`")

// docImports parses the table under header in text: | `pkg` | `a`, `b` |,
// or — for a package that imports none of the module's.
func docImports(text string) (imports, error) {
	_, table, ok := strings.Cut(text, "\n"+header+"\n")
	if !ok {
		return nil, fmt.Errorf("no table headed %q", header)
	}
	documented := imports{}
	for i, line := range strings.Split(table, "\n") {
		if !strings.HasPrefix(line, "|") {
			break
		}
		if i == 0 && strings.Trim(line, "|-: ") == "" {
			continue // the header's rule
		}
		cells := strings.Split(strings.Trim(line, "| "), "|")
		if len(cells) != 2 {
			return nil, fmt.Errorf("row %q: want two cells, package and imports", line)
		}
		m := pkgName.FindStringSubmatch(cells[0])
		if m == nil {
			return nil, fmt.Errorf("row %q: the package is not in backquotes", line)
		}
		pkg := m[1]
		if _, dup := documented[pkg]; dup {
			return nil, fmt.Errorf("two rows for package %s", pkg)
		}
		documented[pkg] = map[string]string{}
		for _, m := range pkgName.FindAllStringSubmatch(cells[1], -1) {
			documented[pkg][m[1]] = ""
		}
	}
	return documented, nil
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
