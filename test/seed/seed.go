// Package seed gives the randomized tests of the module their seeds, by
// one rule: a run draws a new seed, or takes the one an environment
// variable names to replay a failure, and logs it with the command that
// replays it.
//
// Each test names its own variable (RDMAFS_FS_SEED, RDMAFS_STRESS_SEED,
// ...), so that replaying one test's seed does not fix every other
// test's draw in the same run.
package seed

import (
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// New returns the seed of t's random choices: the value of the
// environment variable env if it is set, else a new draw. It logs the
// seed and how to replay it.
func New(t testing.TB, env string) uint64 {
	t.Helper()
	return get(t, env, os.Getenv(env), nil)
}

// Fixed is New for a test that checks the same choices in every run
// unless told otherwise: with env unset it returns fixed; env=random
// draws a new seed (to look for new failures); a number replays that
// seed.
func Fixed(t testing.TB, env string, fixed uint64) uint64 {
	t.Helper()
	return get(t, env, os.Getenv(env), &fixed)
}

func get(t testing.TB, env, value string, fixed *uint64) uint64 {
	t.Helper()
	s, err := parse(value, fixed)
	if err != nil {
		t.Fatalf("%s=%q: %v", env, value, err)
	}
	t.Logf("seed %d (replay: %s)", s, Replay(t.Name(), env, s))
	return s
}

// parse returns the seed value asks for: a number, or a new draw for ""
// (fixed, if not nil) and for "random".
func parse(value string, fixed *uint64) (uint64, error) {
	switch {
	case value == "" && fixed != nil:
		return *fixed, nil
	case value == "" || value == "random":
		return rand.Uint64(), nil
	}
	s, err := strconv.ParseUint(value, 0, 64)
	if err != nil {
		return 0, fmt.Errorf("not a seed (a number, or random): %w", err)
	}
	return s, nil
}

// Replay returns the command that runs test (a t.Name(), subtests
// included) again with seed s: env=S go test ./PKG -run '^Name$/^Sub$'.
// PKG is the directory the test runs in (go test runs a package's tests
// in its directory) relative to the module's root; where no go.mod is
// found above it (a test binary run elsewhere) the command names the
// test alone.
func Replay(test, env string, s uint64) string {
	var run []string
	for part := range strings.SplitSeq(test, "/") {
		run = append(run, "^"+regexp.QuoteMeta(part)+"$")
	}
	cmd := fmt.Sprintf("%s=%d go test -run '%s'", env, s, strings.Join(run, "/"))
	if pkg, ok := packageDir(); ok {
		cmd = fmt.Sprintf("%s=%d go test %s -run '%s'", env, s, pkg, strings.Join(run, "/"))
	}
	return cmd
}

// packageDir returns the working directory as ./PATH relative to the
// nearest directory above it that holds a go.mod.
func packageDir() (string, bool) {
	wd, err := os.Getwd()
	if err != nil {
		return "", false
	}
	for root := wd; ; {
		if _, err := os.Stat(filepath.Join(root, "go.mod")); err == nil {
			rel, err := filepath.Rel(root, wd)
			if err != nil {
				return "", false
			}
			return "./" + filepath.ToSlash(rel), true
		}
		up := filepath.Dir(root)
		if up == root {
			return "", false
		}
		root = up
	}
}
