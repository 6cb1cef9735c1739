#!/bin/bash
# docker.sh - build the Docker image from the Dockerfile and run it, with Debian's
# docker.io, as a user on a host with rdma_rxe, knfsd and FUSE would:
#   docker build -t rdmafs-e2e .
#   docker run --rm --privileged --network host -v /lib/modules:/lib/modules:ro rdmafs-e2e
# It runs in the guest of `lab.sh docker` (make e2e-docker): Docker's engine is started
# here, the guest's own services are not set up (LAB_SERVICES=0: the container's
# entrypoint sets them up), the checkout is the current directory. No container registry
# is reachable, so the images the Dockerfile starts FROM are imported from the root
# filesystems lab.sh made (/ctl/images: base.tar for DEBIAN_IMAGE, go.tar for GO_IMAGE).
# Afterwards it checks that the container left nothing behind on the "host".
#
# Usage: docker.sh [TEST FLAGS...]   the flags go to run-tests.sh in the container
# Exit status: the container's (the tests'), or 1 with a message naming the failed step.
set -euo pipefail
IMAGES=${DOCKER_IMAGES:-/ctl/images}
TAG=rdmafs-e2e
up() { awk '{print $1}' /proc/uptime; }
log() { echo "[docker.sh $(up)] $*"; }
die() { echo "[docker.sh $(up)] ERROR: $*" >&2; exit 1; }
step() { # step NAME CMD...: run a timed step, or die naming it
    local name=$1 t0; shift
    t0=$(up)
    log "$name"
    "$@" || die "$name failed"
    log "$name: done in $(awk -v a="$t0" -v b="$(up)" 'BEGIN{printf "%.0f", b-a}') s"
}
[ -f Dockerfile ] || die "run from the checkout (no Dockerfile in $PWD)"
for f in base.tar go.tar go.env; do [ -r "$IMAGES/$f" ] || die "$IMAGES/$f missing (lab.sh docker makes it)"; done

# ---- the engine: storage in RAM (overlay2 on tmpfs), no bridge or iptables (the
# container shares the host's network), cgroup v2, AppArmor for docker-default
mountpoint -q /sys/fs/cgroup || mount -t cgroup2 cgroup2 /sys/fs/cgroup || die "mount cgroup2"
if [ "$(cat /sys/module/apparmor/parameters/enabled 2>/dev/null)" = Y ]; then
    mountpoint -q /sys/kernel/security || mount -t securityfs securityfs /sys/kernel/security || die "mount securityfs"
fi
mkdir -p /var/lib/docker
mountpoint -q /var/lib/docker || mount -t tmpfs -o size=80% tmpfs /var/lib/docker || die "tmpfs on /var/lib/docker"
# DOCKER_RAMDISK: the guest's root is its initramfs, from which runc cannot pivot_root
# ("pivot_root .: invalid argument"); it then moves the container's root instead
DOCKER_RAMDISK=true dockerd --bridge=none --iptables=false --ip6tables=false --ip-masq=false --storage-driver=overlay2 \
    >/tmp/dockerd.log 2>&1 &
dockerd_pid=$!
stop_engine() {
    kill "$dockerd_pid" 2>/dev/null && wait "$dockerd_pid" 2>/dev/null
    umount /var/lib/docker 2>/dev/null || true
}
trap stop_engine EXIT
for _ in $(seq 120); do
    docker version >/dev/null 2>&1 && break
    kill -0 "$dockerd_pid" 2>/dev/null || { cat /tmp/dockerd.log; die "dockerd exited"; }
    sleep 1
done
docker version >/dev/null 2>&1 || { tail -30 /tmp/dockerd.log; die "dockerd did not answer within 120 s"; }
log "$(docker version --format 'docker {{.Server.Version}}, {{.Server.Os}}/{{.Server.Arch}}') , storage $(docker info --format '{{.Driver}}')"

# ---- the base images
changes=()
for kv in $(cat "$IMAGES/go.env"); do changes+=(--change "ENV $kv"); done
step "docker import the base image (debootstrap + packages.txt) as $TAG-base:local" \
    docker import "$IMAGES/base.tar" "$TAG-base:local"
step "docker import the Go image (minbase + build dependencies + Go + caches) as $TAG-go:local" \
    docker import "${changes[@]}" "$IMAGES/go.tar" "$TAG-go:local"

# ---- the image, as the Dockerfile says; --network host: the build has no bridge here
step "docker build -t $TAG ." \
    docker build --network host --build-arg DEBIAN_IMAGE="$TAG-base:local" \
    --build-arg GO_IMAGE="$TAG-go:local" -t "$TAG" .
log "image: $(docker image ls --format '{{.Repository}}:{{.Tag}} {{.Size}}' "$TAG")"

# ---- the tests, as the README says to run them
rc=0
cmd=()
[ $# -gt 0 ] && cmd=(/src/test/e2e/run-tests.sh "$@")
log "docker run --rm --privileged --network host -v /lib/modules:/lib/modules:ro $TAG ${cmd[*]}"
docker run --rm --privileged --network host -v /lib/modules:/lib/modules:ro "$TAG" "${cmd[@]}" || rc=$?
log "the container exited with status $rc"

leftover() {
    echo "docker.sh: ERROR: $* after the container" >&2
    [ "$rc" = 0 ] && rc=1
    return 0
}
rdma link show 2>/dev/null | grep -q . && leftover "an rdma link is left: $(rdma link show)"
ip -o link show type dummy 2>/dev/null | grep -q . && leftover "a dummy interface is left: $(ip -o link show type dummy)"
pgrep -x nfsd >/dev/null && leftover "knfsd threads are still running"
pgrep -x rpcbind >/dev/null && leftover "rpcbind is still running"
pgrep -x rpc.mountd >/dev/null && leftover "rpc.mountd is still running"
exit "$rc"
