#!/bin/bash
# build.sh - build what the e2e tests run, from the checkout this script is in:
#   BINDIR/rdmafs              the product (go build ./cmd/rdmafs, as `make build`)
#   BINDIR/e2e/guest.test      the in-guest Go tests (test/e2e/guest), static
#   BINDIR/e2e/bench-e2e       the in-guest benchmark driver (bench/e2e), static
#   BINDIR/e2e/verbs/*.test    the verbs conformance tests of every cgo package under ./verbs
#                              that has tests (the libibverbs provider)
#   BINDIR/e2e/bench-verbs     the verbs benchmark (bench/verbs, cgo)
#   BINDIR/e2e/build.env       what was built: read by run-tests.sh
#
# Usage: build.sh [BINDIR]   (default <checkout>/bin)
# One script for both ways the e2e tests run: lab.sh (make e2e) and the Dockerfile.
#
# Anything failing to build fails this script (exit 1): a broken build fails the tests.
#
# Environment: GO (go command, default go, else /usr/local/go/bin/go), RDMAFS_TAGS (build
# tags for rdmafs and the verbs tests, default empty), BUILD_DEPS=0 to skip installing the
# C build dependencies.
set -euo pipefail
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
ROOT=$(cd "$HERE/../.." && pwd)
BIN=${1:-$ROOT/bin}
mkdir -p "$BIN/e2e"
BIN=$(cd "$BIN" && pwd)

log() { echo "[build.sh] $*" >&2; }
die() { echo "[build.sh] ERROR: $*" >&2; exit 1; }

# C toolchain and RDMA headers for cgo (the libibverbs provider of ./verbs)
if [ "${BUILD_DEPS:-1}" = 1 ]; then
    missing=()
    for p in gcc libc6-dev libibverbs-dev librdmacm-dev pkg-config; do
        dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p")
    done
    if [ ${#missing[@]} -gt 0 ]; then
        [ "$(id -u)" = 0 ] || die "build dependencies missing (${missing[*]}); install them or run as root"
        log "installing build dependencies: ${missing[*]}"
        { DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends "${missing[@]}" >&2 ||
            { apt-get update -q >&2 && DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends "${missing[@]}" >&2; }; } ||
            die "apt-get install ${missing[*]} failed"
    fi
fi

GO=${GO:-go}
if ! command -v "$GO" >/dev/null; then
    [ -x /usr/local/go/bin/go ] || die "no Go toolchain: put go in PATH or set GO"
    GO=/usr/local/go/bin/go
fi
cd "$ROOT"
MOD=$("$GO" list -m) || die "go list -m failed in $ROOT"
tags=()
[ -n "${RDMAFS_TAGS:-}" ] && tags=(-tags "$RDMAFS_TAGS")

envfile=$BIN/e2e/build.env.tmp
: >"$envfile"
put() { printf '%s=%q\n' "$1" "$2" >>"$envfile"; }

# ---- rdmafs
rm -f "$BIN/rdmafs"
"$GO" build "${tags[@]}" -o "$BIN/rdmafs" ./cmd/rdmafs || die "go build ./cmd/rdmafs failed"
put RDMAFS_BIN rdmafs
log "built $BIN/rdmafs"

# ---- the in-guest tests and the benchmark driver (static: they run in the guest or container)
CGO_ENABLED=0 "$GO" test -c -o "$BIN/e2e/guest.test" ./test/e2e/guest || die "building test/e2e/guest failed"
CGO_ENABLED=0 "$GO" build -o "$BIN/e2e/bench-e2e" ./bench/e2e || die "building bench/e2e failed"
log "built $BIN/e2e/guest.test and $BIN/e2e/bench-e2e"

# ---- verbs conformance: every package under ./verbs with cgo files and tests (the libibverbs provider)
rm -rf "$BIN/e2e/verbs"
verbs_pkgs=$("$GO" list "${tags[@]}" -f '{{if and .CgoFiles (or .TestGoFiles .XTestGoFiles)}}{{.ImportPath}}{{end}}' ./verbs/...) ||
    die "go list ./verbs/... failed"
[ -n "$verbs_pkgs" ] || die "no cgo package with tests under ./verbs: the libibverbs provider did not build (cgo, libibverbs-dev?)"
mkdir -p "$BIN/e2e/verbs"
for p in $verbs_pkgs; do
    name=$(tr '/' '_' <<<"${p#"$MOD"/}")
    "$GO" test "${tags[@]}" -c -o "$BIN/e2e/verbs/$name.test" "$p" || die "building the tests of $p failed"
    log "built $BIN/e2e/verbs/$name.test"
done
rm -f "$BIN/e2e/bench-verbs"
"$GO" build "${tags[@]}" -o "$BIN/e2e/bench-verbs" ./bench/verbs || die "building bench/verbs failed"
log "built $BIN/e2e/bench-verbs"
mv "$envfile" "$BIN/e2e/build.env"
