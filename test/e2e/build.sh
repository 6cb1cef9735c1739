#!/bin/bash
# build.sh - build what the e2e tests run, from the checkout this script is in:
#   BINDIR/rdmafs              the product (go build ./cmd/rdmafs, as `make build`)
#   BINDIR/e2e/guest.test      the in-guest Go tests (test/e2e/guest), static
#   BINDIR/e2e/bench-e2e       the in-guest benchmark driver (bench/e2e), static
#   BINDIR/e2e/verbs/*.test    the verbs conformance tests of every cgo package under ./verbs
#                              that has tests (the libibverbs provider)
#   BINDIR/e2e/bench-verbs     the verbs benchmark (bench/verbs, cgo)
#   BINDIR/e2e/build.env       what was built and why not: read by run-tests.sh
#
# Usage: build.sh [BINDIR]   (default <checkout>/bin)
# One script for both ways the e2e tests run: lab.sh (make e2e) and the Dockerfile.
#
# rdmafs failing to build does NOT fail this script (the rdmafs tests then skip and
# name the reason); the test binaries failing to build does (exit 1).
#
# Environment: GO (go command, default go, else /usr/local/go/bin/go), RDMAFS_TAGS (build
# tags for rdmafs and the verbs tests, default empty), LAB_RDMAFS_RDMA (auto|1|0: run the
# rdmafs RDMA test; auto = when ./cmd/rdmafs links the xprtrdma package), BUILD_DEPS=0 to
# skip installing the C build dependencies.
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
rdmafs_reason=
if ! "$GO" list "${tags[@]}" ./cmd/rdmafs >/dev/null 2>&1; then
    rdmafs_reason="./cmd/rdmafs is not a buildable Go package yet: $("$GO" list ./cmd/rdmafs 2>&1 | tail -1 || true)"
elif ! out=$("$GO" build "${tags[@]}" -o "$BIN/rdmafs" ./cmd/rdmafs 2>&1); then
    rdmafs_reason="go build ./cmd/rdmafs failed: $(tail -5 <<<"$out" | tr '\n' ' ')"
fi
if [ -n "$rdmafs_reason" ]; then
    log "################################################################################"
    log "# rdmafs NOT BUILT: the rdmafs e2e tests will SKIP"
    log "# $rdmafs_reason"
    log "################################################################################"
    put RDMAFS_SKIP "rdmafs binary not built: $rdmafs_reason"
else
    log "built $BIN/rdmafs"
    put RDMAFS_BIN rdmafs
    # RDMA: on when rdmafs links the RPC-over-RDMA transport (issue 5), or when forced
    rdma=${LAB_RDMAFS_RDMA:-auto}
    if [ "$rdma" = auto ]; then
        rdma=0
        "$GO" list "${tags[@]}" -deps ./cmd/rdmafs | grep -qx "$MOD/xprtrdma" && rdma=1
    fi
    put RDMAFS_RDMA "$rdma"
    log "rdmafs RDMA transport: $([ "$rdma" = 1 ] && echo linked || echo 'not linked (TestRdmafsRDMA will skip)')"
fi

# ---- the in-guest tests and the benchmark driver (static: they run in the guest or container)
CGO_ENABLED=0 "$GO" test -c -o "$BIN/e2e/guest.test" ./test/e2e/guest || die "building test/e2e/guest failed"
CGO_ENABLED=0 "$GO" build -o "$BIN/e2e/bench-e2e" ./bench/e2e || die "building bench/e2e failed"
log "built $BIN/e2e/guest.test and $BIN/e2e/bench-e2e"

# ---- verbs conformance: every package under ./verbs with cgo files and tests (the libibverbs provider)
rm -rf "$BIN/e2e/verbs"
verbs_pkgs=$("$GO" list "${tags[@]}" -f '{{if and .CgoFiles (or .TestGoFiles .XTestGoFiles)}}{{.ImportPath}}{{end}}' ./verbs/... 2>/dev/null || true)
if [ -n "$verbs_pkgs" ]; then
    mkdir -p "$BIN/e2e/verbs"
    for p in $verbs_pkgs; do
        name=$(tr '/' '_' <<<"${p#"$MOD"/}")
        "$GO" test "${tags[@]}" -c -o "$BIN/e2e/verbs/$name.test" "$p" || die "building the tests of $p failed"
        log "built $BIN/e2e/verbs/$name.test"
    done
else
    log "no cgo package with tests under ./verbs yet: TestVerbsConformance will skip"
fi
rm -f "$BIN/e2e/bench-verbs"
if "$GO" build "${tags[@]}" -o "$BIN/e2e/bench-verbs" ./bench/verbs; then
    log "built $BIN/e2e/bench-verbs"
else
    log "bench/verbs did not build: run-tests.sh --bench-verbs will fail"
fi
mv "$envfile" "$BIN/e2e/build.env"
