#!/bin/bash
# setup-services.sh - bring up what the rdmafs e2e tests run against, as root:
#   a SoftRoCE device (rdma_rxe) on a local interface, a tmpfs /export, and knfsd
#   exporting it over TCP (2049) and RPC-over-RDMA (20049), with rpcbind, rpc.mountd
#   and rpc.statd. Every step is checked; a failure names the step and exits 1.
#
# One script for both ways the e2e tests run:
#   - the qemu guest's /init runs it with no arguments (lab.sh);
#   - the Docker image's entrypoint runs it with the test command as arguments:
#       setup-services.sh CMD [ARGS...]   set up, run CMD, tear down what it created,
#                                         exit with CMD's status
# On success it writes /run/rdmafs-e2e.env (LAB_ADDR, LAB_EXPORT, LAB_RXE, ...), which
# run-tests.sh reads.
#
# Environment (all optional):
#   LAB_NETDEV       existing interface to put rxe on, e.g. the host's to reach a knfsd
#                    elsewhere. Empty (default): create the dummy interface LAB_DUMMY with
#                    LAB_ADDR, which is all a same-host test needs (rxe loops back).
#   LAB_DUMMY        name of that dummy interface (default dummy0; deleted on teardown if
#                    this script created it)
#   LAB_ADDR         server address (default 10.11.0.1 on the dummy, else the first IPv4
#                    address of LAB_NETDEV)
#   LAB_MTU          MTU of the dummy (default 9000 -> RoCE MTU 4096); LAB_NETDEV's is kept
#   LAB_RXE          name of the rxe device (default rxe0; reused if it already exists)
#   LAB_EXPORT       exported directory (default /export)
#   LAB_EXPORT_SIZE  size of the tmpfs mounted on LAB_EXPORT (default 1g; 0 = no tmpfs,
#                    export the directory as it is)
#   LAB_KNFSD        1 (default): start rpcbind/mountd/statd/knfsd here.
#                    0: the server runs elsewhere (LAB_ADDR must be given, LAB_EXPORT must be
#                    the server's export directory as seen here, e.g. a bind mount); only
#                    rxe is set up and the server is checked
#   LAB_NFSD_THREADS knfsd threads (default 8)
#
# rdma_rxe of Debian 12's Linux 6.1 works only in the initial network namespace (in a
# second one, rping between two of its addresses fails with RDMA_CM_EVENT_UNREACHABLE and
# mount -o proto=rdma with ENETUNREACH), so a container shares the host's (--network host).
# knfsd and rpcbind are per network namespace: with LAB_KNFSD=1 this script refuses to
# run where an rpcbind or a knfsd already runs, rather than take over the host's.
set -euo pipefail

LAB_NETDEV=${LAB_NETDEV:-}
LAB_DUMMY=${LAB_DUMMY:-dummy0}
LAB_MTU=${LAB_MTU:-9000}
LAB_RXE=${LAB_RXE:-rxe0}
LAB_EXPORT=${LAB_EXPORT:-/export}
LAB_EXPORT_SIZE=${LAB_EXPORT_SIZE:-1g}
LAB_KNFSD=${LAB_KNFSD:-1}
LAB_NFSD_THREADS=${LAB_NFSD_THREADS:-8}
NFS_PORT=2049 RDMA_PORT=20049
ENV_FILE=/run/rdmafs-e2e.env

up() { awk '{print $1}' /proc/uptime; }
log() { echo "[setup-services $(up)] $*"; }
die() { echo "[setup-services $(up)] ERROR: $*" >&2; exit 1; }
need() { command -v "$1" >/dev/null || die "command $1 not found (package $2 missing?)"; }

[ "$(id -u)" = 0 ] || die "must run as root (a privileged container, or the guest's /init)"
need ip iproute2
need rdma iproute2
need ibv_devinfo ibverbs-utils
need rpcinfo rpcbind

# what this script created or started, for teardown
created_rxe=0 created_dummy=0 mounted_nfsd=0 mounted_export=0 mounted_tmp=0 started_nfsd=0 pids=()

# ---- kernel modules: loaded here when modprobe can, else they must already be there
load_modules() {
    local mods=(rdma_rxe ib_uverbs rdma_ucm rpcrdma fuse nfsv3) need=(rdma_rxe ib_uverbs rdma_ucm rpcrdma fuse nfsv3)
    [ "$LAB_KNFSD" = 1 ] && { mods+=(nfsd); need+=(nfsd); }
    [ -z "$LAB_NETDEV" ] && need+=(dummy)
    if command -v modprobe >/dev/null && [ -d "/lib/modules/$(uname -r)" ]; then
        modprobe -a "${mods[@]}" || die "modprobe ${mods[*]} failed"
        # numdummies=0: no stray dummy0; setup_netdev creates the one it uses
        [ -z "$LAB_NETDEV" ] && { modprobe dummy numdummies=0 || die "modprobe dummy failed"; }
    fi
    local m
    for m in "${need[@]}"; do
        builtin_module "$m" && continue
        [ -d "/sys/module/$m" ] || die "kernel module $m is not loaded and cannot be loaded here (in a container: -v /lib/modules:/lib/modules:ro, or modprobe $m on the host)"
    done
    make_dev_nodes
    [ -c /dev/fuse ] || die "/dev/fuse missing"
    [ -e /dev/infiniband/rdma_cm ] || die "/dev/infiniband/rdma_cm missing (rdma_ucm; in a container: --privileged)"
    log "kernel modules loaded (kernel $(uname -r)$(fuse_uring))"
}

# builtin_module NAME: NAME is built into the running kernel. /sys/module/NAME exists for
# a built-in module only when it has parameters: Debian 13's kernels build fuse in, and
# which of the others are built in differs between kernels
builtin_module() {
    grep -q "/$1\.ko\(\.[a-z]*\)\?\$" "/lib/modules/$(uname -r)/modules.builtin" 2>/dev/null
}

# whether FUSE can serve over io_uring here (Linux 6.14 and later, CONFIG_FUSE_IO_URING;
# the fuse.enable_uring parameter turns it on, the lab's current kernel boots with it)
fuse_uring() {
    local p=/sys/module/fuse/parameters/enable_uring
    [ -r "$p" ] || return 0
    case "$(cat "$p")" in Y | 1) echo ", FUSE over io_uring enabled" ;; *) echo ", FUSE over io_uring available (fuse.enable_uring=N)" ;; esac
}

# A container's /dev is a copy made when it started: the nodes of devices that appeared
# since (/dev/fuse and /dev/infiniband/rdma_cm of the modules loaded above, the uverbs
# node of the rxe device made below) are missing there, while the host's udev or
# devtmpfs has them. Make the missing ones from sysfs, as udev would (a privileged
# container may); in the guest and on a host nothing is missing.
make_dev_nodes() {
    local d node major minor
    for d in /sys/class/misc/fuse /sys/class/misc/rdma_cm /sys/class/infiniband_verbs/uverbs*; do
        [ -r "$d/dev" ] || continue
        case "$d" in
            */fuse) node=/dev/fuse ;;
            */rdma_cm) node=/dev/infiniband/rdma_cm ;;
            *) node=/dev/infiniband/${d##*/} ;;
        esac
        [ -e "$node" ] && continue
        IFS=: read -r major minor <"$d/dev"
        mkdir -p "${node%/*}"
        mknod -m 666 "$node" c "$major" "$minor" || die "mknod $node c $major $minor failed (a container needs --privileged)"
        log "made $node (c $major:$minor), which this container's /dev lacked"
    done
}

setup_netdev() {
    if [ -z "$LAB_NETDEV" ]; then
        LAB_NETDEV=$LAB_DUMMY
        LAB_ADDR=${LAB_ADDR:-10.11.0.1}
        if ! ip link show "$LAB_DUMMY" >/dev/null 2>&1; then # dummy.ko creates dummy0 itself
            ip link add "$LAB_DUMMY" type dummy || die "cannot create the dummy interface $LAB_DUMMY"
            created_dummy=1
        fi
        ip link set "$LAB_DUMMY" mtu "$LAB_MTU" || die "cannot set the MTU of $LAB_DUMMY to $LAB_MTU"
        # /32: a local address and no route, whatever the host's networks are
        ip addr replace "$LAB_ADDR/32" dev "$LAB_DUMMY" || die "cannot add $LAB_ADDR/32 to $LAB_DUMMY"
        ip link set "$LAB_DUMMY" up || die "cannot bring up $LAB_DUMMY"
    else
        ip link show "$LAB_NETDEV" >/dev/null 2>&1 || die "LAB_NETDEV=$LAB_NETDEV: no such interface"
        if [ -z "${LAB_ADDR:-}" ]; then
            LAB_ADDR=$(ip -4 -o addr show dev "$LAB_NETDEV" | awk '{split($4, a, "/"); print a[1]; exit}')
            [ -n "$LAB_ADDR" ] || die "interface $LAB_NETDEV has no IPv4 address; set LAB_ADDR"
        fi
    fi
    ip link set lo up
    log "interface $LAB_NETDEV, address $LAB_ADDR"
}

setup_rxe() {
    if rdma link show "$LAB_RXE/1" >/dev/null 2>&1; then
        log "rdma device $LAB_RXE exists: $(rdma link show "$LAB_RXE/1")"
    else
        rdma link add "$LAB_RXE" type rxe netdev "$LAB_NETDEV" || die "rdma link add $LAB_RXE type rxe netdev $LAB_NETDEV failed"
        created_rxe=1
    fi
    local i
    for i in $(seq 50); do
        make_dev_nodes # libibverbs sees the device only through its uverbs node
        ibv_devinfo -d "$LAB_RXE" 2>/dev/null | grep -q 'state:.*PORT_ACTIVE' && break
        [ "$i" = 50 ] && die "$LAB_RXE port not ACTIVE after 10 s: $(ibv_devinfo -d "$LAB_RXE" 2>&1 | tr -s ' \n' ' ')"
        sleep 0.2
    done
    log "$LAB_RXE on $LAB_NETDEV is PORT_ACTIVE, $(ibv_devinfo -d "$LAB_RXE" | awk '/active_mtu/{print "active_mtu", $2; exit}')"
}

# The users the tests act as (test/e2e/difftest: uid 2001 and 2002, who share group
# 3000). Debian's nfs.conf has rpc.mountd manage gids: knfsd then takes a caller's
# groups from this system's group database instead of the call's AUTH_SYS list, so the
# users must be known here with the groups the tests give them.
add_test_users() {
    grep -q '^rdmafs-alice:' /etc/passwd || cat >>/etc/passwd <<'EOT'
rdmafs-alice:x:2001:2001::/nonexistent:/usr/sbin/nologin
rdmafs-bob:x:2002:2002::/nonexistent:/usr/sbin/nologin
EOT
    grep -q '^rdmafs-staff:' /etc/group || cat >>/etc/group <<'EOT'
rdmafs-alice:x:2001:
rdmafs-bob:x:2002:
rdmafs-staff:x:3000:rdmafs-alice,rdmafs-bob
EOT
}

start_knfsd() {
    need rpc.nfsd nfs-kernel-server
    need exportfs nfs-kernel-server
    need rpc.mountd nfs-kernel-server
    need rpc.statd nfs-common
    # never take over a server that runs here already (the host's, in a --network host container)
    if rpcinfo -p 127.0.0.1 >/dev/null 2>&1; then
        die "an rpcbind already runs in this network namespace: stop it, or test against its server with LAB_KNFSD=0"
    fi
    if ! mountpoint -q /proc/fs/nfsd; then
        mount -t nfsd nfsd /proc/fs/nfsd || die "cannot mount the nfsd filesystem on /proc/fs/nfsd"
        mounted_nfsd=1
    fi
    if [ "$(cat /proc/fs/nfsd/threads)" != 0 ]; then
        die "a knfsd already runs in this network namespace: stop it, or test against it with LAB_KNFSD=0"
    fi
    mkdir -p "$LAB_EXPORT" /run/rpcbind /var/lib/nfs/rpc_pipefs /var/lib/nfs/v4recovery /var/lib/nfs/sm /var/lib/nfs/sm.bak
    if [ "$LAB_EXPORT_SIZE" != 0 ]; then
        mountpoint -q "$LAB_EXPORT" && die "$LAB_EXPORT is already a mount point; set LAB_EXPORT_SIZE=0 to export it as it is"
        mount -t tmpfs -o "size=$LAB_EXPORT_SIZE,mode=1777" tmpfs "$LAB_EXPORT" || die "cannot mount a tmpfs on $LAB_EXPORT"
        mounted_export=1
    fi
    # insecure: the rdmafs client connects from unprivileged ports; fsid: tmpfs has no UUID
    echo "$LAB_EXPORT *(rw,sync,no_root_squash,no_subtree_check,insecure,fsid=1)" >/etc/exports
    : >/var/lib/nfs/etab; : >/var/lib/nfs/rmtab
    mountpoint -q /var/lib/nfs/rpc_pipefs || mount -t rpc_pipefs sunrpc /var/lib/nfs/rpc_pipefs || log "warning: cannot mount rpc_pipefs"
    rpcbind -f -w & pids+=($!)
    local i
    for i in $(seq 50); do rpcinfo -p 127.0.0.1 >/dev/null 2>&1 && break; [ "$i" = 50 ] && die "rpcbind did not start"; sleep 0.1; done
    exportfs -ra || die "exportfs -ra failed"
    add_test_users
    rpc.mountd -F & pids+=($!)
    rpc.statd -F --no-notify & pids+=($!)
    started_nfsd=1
    rpc.nfsd "$LAB_NFSD_THREADS" || die "rpc.nfsd $LAB_NFSD_THREADS failed"
    grep -q "^rdma $RDMA_PORT" /proc/fs/nfsd/portlist ||
        echo "rdma $RDMA_PORT" >/proc/fs/nfsd/portlist || die "adding 'rdma $RDMA_PORT' to /proc/fs/nfsd/portlist failed (rpcrdma module?)"
    log "knfsd up: portlist $(tr '\n' ' ' </proc/fs/nfsd/portlist), versions $(cat /proc/fs/nfsd/versions)"
}

# The tests' temporary directories must support file handles (name_to_handle_at):
# `rdmafs serve` of one gives NFS clients handles that survive its restarts. A
# container's /tmp is on its overlayfs, which does not (TestKernelClientOnRdmafsServe
# failed in docker run there); a tmpfs, as the guest's /tmp is, does.
setup_tmp() {
    [ "$(stat -f -c %T /tmp)" = overlayfs ] || return 0
    mount -t tmpfs -o mode=1777 tmpfs /tmp || die "cannot mount a tmpfs on /tmp (over the container's overlayfs)"
    mounted_tmp=1
    log "tmpfs on /tmp (the container's overlayfs has no file handles)"
}

# the server must answer whether it runs here or elsewhere
check_server() {
    local i out
    for i in $(seq 50); do
        out=$(rpcinfo -p "$LAB_ADDR" 2>&1) && grep -q ' 100005 *3 *tcp ' <<<"$out" && grep -q " 100003 *3 *tcp *$NFS_PORT " <<<"$out" && break
        [ "$i" = 50 ] && die "NFSv3 and MOUNT v3 over TCP are not registered with rpcbind on $LAB_ADDR: $out"
        sleep 0.1
    done
    if [ "$LAB_KNFSD" = 1 ]; then
        grep -q "^rdma $RDMA_PORT" /proc/fs/nfsd/portlist || die "knfsd is not listening on rdma $RDMA_PORT"
        grep -q "^tcp $NFS_PORT" /proc/fs/nfsd/portlist || die "knfsd is not listening on tcp $NFS_PORT"
    fi
    command -v showmount >/dev/null && { showmount -e "$LAB_ADDR" | grep -q "^$LAB_EXPORT " || die "$LAB_ADDR does not export $LAB_EXPORT: $(showmount -e "$LAB_ADDR" 2>&1)"; }
    [ -d "$LAB_EXPORT" ] || die "export directory $LAB_EXPORT is not visible here"
    log "server $LAB_ADDR exports $LAB_EXPORT over tcp/$NFS_PORT and rdma/$RDMA_PORT"
}

# undo what this script did, in reverse order (also after a failed setup)
teardown() {
    log "tearing down"
    if [ "$started_nfsd" = 1 ]; then
        rpc.nfsd 0 || true
        exportfs -au || true
    fi
    local p
    for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
    [ "$mounted_nfsd" = 1 ] && { umount /proc/fs/nfsd || true; }
    [ "$mounted_export" = 1 ] && { umount "$LAB_EXPORT" || true; }
    [ "$mounted_tmp" = 1 ] && { umount -l /tmp || true; }
    [ "$created_rxe" = 1 ] && { rdma link delete "$LAB_RXE" || true; }
    [ "$created_dummy" = 1 ] && { ip link delete "$LAB_DUMMY" || true; }
    return 0
}

# with a command (the container's entrypoint), leave nothing behind, even when setup fails;
# without one (the guest's /init), the services stay up for the command that follows
[ $# -gt 0 ] && trap teardown EXIT
ulimit -l unlimited || log "warning: cannot raise the locked-memory limit"
load_modules
setup_tmp
setup_netdev
setup_rxe
[ "$LAB_KNFSD" = 1 ] && start_knfsd
check_server
cat >"$ENV_FILE" <<EOF
LAB_ADDR=$LAB_ADDR
LAB_EXPORT=$LAB_EXPORT
LAB_RXE=$LAB_RXE
LAB_NETDEV=$LAB_NETDEV
LAB_NFS_PORT=$NFS_PORT
LAB_RDMA_PORT=$RDMA_PORT
EOF
log "ready ($ENV_FILE)"

if [ $# -gt 0 ]; then
    rc=0
    "$@" || rc=$?
    exit "$rc" # the EXIT trap tears down
fi
