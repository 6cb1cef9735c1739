#!/bin/bash
# run-tests.sh - run the e2e Go tests (test/e2e/guest) where setup-services.sh has
# set up rxe and knfsd: inside the qemu guest (lab.sh e2e) or the Docker container.
#
# Usage: run-tests.sh [TEST FLAGS...]     e.g. run-tests.sh -test.run 'TestKernel'
#        run-tests.sh --bench [FLAGS...]  the benchmark (bench/e2e) instead of the tests
#        run-tests.sh --bench-verbs [FLAGS...]  the verbs benchmark (bench/verbs) next to perftest
# Environment: LAB_BIN (binaries built by build.sh, default <checkout>/bin),
#              LAB_TEST_TIMEOUT (go test -timeout, default 30m).
# Exit status: the test binary's (0 all passed, 1 a test failed), 3 if the setup is missing.
set -euo pipefail
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
ROOT=$(cd "$HERE/../.." && pwd)
BIN=${LAB_BIN:-$ROOT/bin}

die() { echo "run-tests.sh: ERROR: $*" >&2; exit 3; }
[ -r /run/rdmafs-e2e.env ] || die "/run/rdmafs-e2e.env missing: run setup-services.sh first"
[ -x "$BIN/e2e/guest.test" ] || die "$BIN/e2e/guest.test missing: run test/e2e/build.sh"
[ -r "$BIN/e2e/build.env" ] || die "$BIN/e2e/build.env missing: run test/e2e/build.sh"

set -a
# shellcheck disable=SC1091
. /run/rdmafs-e2e.env
set +a
# build.env names binaries relative to $BIN
RDMAFS_BIN=''
# shellcheck disable=SC1091
. "$BIN/e2e/build.env"
[ -n "$RDMAFS_BIN" ] || die "$BIN/e2e/build.env names no rdmafs binary: run test/e2e/build.sh"
RDMAFS_BIN=$BIN/$RDMAFS_BIN
export RDMAFS_BIN
export LAB_VERBS_TESTS=$BIN/e2e/verbs
# the checkout (its Makefile and docs/rdmafs.8, for TestInstallFstab)
export LAB_ROOT=$ROOT

if [ "${1:-}" = --bench ]; then
    shift
    [ -x "$BIN/e2e/bench-e2e" ] || die "$BIN/e2e/bench-e2e missing: run test/e2e/build.sh"
    cd /tmp
    # BENCH_BASELINE (lab.sh): the earlier build lab.sh put next to this one
    [ -z "${BENCH_BASELINE:-}" ] || export BENCH_BASELINE_BIN=$BIN/baseline/rdmafs
    # the table as CSV and SVG in the checkout (bench/out, not versioned)
    exec "$BIN/e2e/bench-e2e" -out "$ROOT/bench/out" "$@"
fi
if [ "${1:-}" = --bench-verbs ]; then
    shift
    [ -x "$BIN/e2e/bench-verbs" ] || die "$BIN/e2e/bench-verbs missing: run test/e2e/build.sh"
    cd /tmp
    exec "$BIN/e2e/bench-verbs" -provider ibverbs -device "$LAB_RXE" -addr "$LAB_ADDR" -perftest "$@"
fi

echo "=== e2e: server $LAB_ADDR:$LAB_EXPORT, rdma device $LAB_RXE, kernel $(uname -r), $(nproc) CPU, $(free -m | awk '/Mem:/{print $2}') MiB"
echo "=== e2e: rdmafs: $RDMAFS_BIN"
log=$(mktemp /tmp/e2e-tests.XXXXXX)
cd /tmp
rc=0
"$BIN/e2e/guest.test" -test.v -test.count=1 -test.timeout="${LAB_TEST_TIMEOUT:-30m}" "$@" 2>&1 | tee "$log" || rc=${PIPESTATUS[0]}

# the top-level results, once more at the end, with the reasons of the skips
echo
echo "=== e2e results"
# (a top-level test's log lines are indented by 4; the last one before --- SKIP is the reason)
awk '/^=== (RUN|CONT|NAME) /{last = ""; next}
     /^    [^ -]/{last = $0; next}
     /^--- (PASS|FAIL): /{print; next}
     /^--- SKIP: /{print; if (last != "") print last; next}' "$log"
pass=$(grep -c '^--- PASS: ' "$log" || true)
fail=$(grep -c '^--- FAIL: ' "$log" || true)
skip=$(grep -c '^--- SKIP: ' "$log" || true)
if [ "$rc" != 0 ] && [ "$fail" = 0 ]; then
    echo "the test binary exited with status $rc without a failed test (panic, timeout or crash: see above)"
    fail=1
fi
echo "e2e: $pass passed, $fail failed, $skip skipped"
exit "$rc"
