#!/bin/bash
# container-sim.sh - run, inside the qemu guest and WITHOUT the guest's own service
# setup, the exact entrypoint and command of the Docker image, as
#   docker run --privileged --network host ... rdmafs-e2e
# would on a host (there is no Docker engine on the CI machine):
#   LAB_SERVICES=0 test/e2e/lab.sh run test/e2e/container-sim.sh [TEST FLAGS...]
# The entrypoint runs in a private mount namespace (as in a container) and the
# guest's network namespace (--network host), with the Dockerfile's ENV. Afterwards
# this checks that the entrypoint tore down what it created: nothing of it may be
# left on the "host".
set -euo pipefail
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)

# the Dockerfile's ENV
env_of_dockerfile=$(sed -n 's/^ENV //p' "$HERE/../../Dockerfile")
rc=0
# shellcheck disable=SC2086 # word splitting of the ENV line is intended
unshare --mount --propagation private env $env_of_dockerfile \
    "$HERE/setup-services.sh" "$HERE/run-tests.sh" "$@" || rc=$?
echo "container-sim.sh: the entrypoint exited with status $rc"

leftover() {
    echo "container-sim.sh: ERROR: $* after the entrypoint" >&2
    [ "$rc" = 0 ] && rc=1
    return 0
}
rdma link show 2>/dev/null | grep -q . && leftover "an rdma link is left: $(rdma link show)"
ip -o link show type dummy 2>/dev/null | grep -q . && leftover "a dummy interface is left: $(ip -o link show type dummy)"
pgrep -x nfsd >/dev/null && leftover "knfsd threads are still running"
pgrep -x rpcbind >/dev/null && leftover "rpcbind is still running"
pgrep -x rpc.mountd >/dev/null && leftover "rpc.mountd is still running"
exit "$rc"
