#!/bin/bash
# lab.sh - the rdmafs end-to-end harness: a Debian 12 qemu guest (Debian 12's Linux 6.1,
# or with LAB_KERNEL=current the newest kernel of Debian's trixie-backports) with
# SoftRoCE (rdma_rxe), knfsd serving NFSv3 over RDMA (20049) and TCP (2049), rpcbind,
# rpc.mountd, rpc.statd and FUSE. The checkout is shared into the guest over virtio-9p
# at /host; the guest runs a command there and its exit status becomes lab.sh's. test/e2e/README.md says what runs where and why.
#
# Usage (as root; `make e2e` and `make bench-e2e` call the first two):
#   lab.sh e2e [TEST FLAGS...]   deps + image + build.sh + boot + run-tests.sh (the e2e suite),
#                                e.g. lab.sh e2e -test.run 'TestKernel'
#   lab.sh bench [BENCH FLAGS..] deps + image + build.sh + boot + the fio benchmark (bench/e2e)
#   lab.sh bench-verbs [FLAGS..] deps + image + build.sh + boot + the verbs benchmark (bench/verbs)
#                                next to perftest on rxe0
#   lab.sh docker [TEST FLAGS..] the Docker image, built from the Dockerfile and run with docker.io
#                                in a guest of its own (docker.sh; see test/e2e/README.md, Docker)
#   lab.sh run CMD [ARGS...]     boot, run CMD in the guest (cwd /host = the checkout), power off
#   lab.sh shell                 interactive shell in the guest (needs a real terminal)
#   lab.sh deps                  apt-get install the host packages this script needs
#   lab.sh image                 build the cached guest image (kernel, rootfs, initramfs)
#   lab.sh info                  print the cache paths, sizes and the accelerator
#   lab.sh available             exit 0 if this host can run the guest (qemu + KVM or TCG)
#
# Environment (all optional):
#   LAB_CACHE        guest image cache, outside the checkout   (default /var/cache/rdmafs-e2e)
#   LAB_OUT          console logs                              (default <checkout>/test/e2e/out)
#   LAB_LOG          console log file of this run              (default $LAB_OUT/console-<date>.log)
#   LAB_TIMEOUT      hard timeout of one boot, seconds         (default 2400 = 40 min;
#                    bench: LAB_TIMEOUT_BENCH, 5400 = 90 min)
#   LAB_BOOT_TIMEOUT seconds for the guest to reach /init      (default 300)
#   LAB_MEM          guest RAM                                 (default 3G; bench: 4G)
#   LAB_SMP          guest vCPUs                               (default nproc, at most 4)
#   LAB_ACCEL        kvm | tcg | auto                          (default auto: kvm only on real VT-x/AMD-V)
#   LAB_CPU          qemu -cpu model                           (default max for tcg, host for kvm)
#   LAB_KARGS        more guest kernel arguments               (default tsc=reliable: under TCG the
#                    kernel finds the vCPUs' TSCs unsynchronized and reads the clock from the emulated
#                    HPET, a system call per read; the TSC keeps clock_gettime in the vDSO, as on real
#                    machines. LAB_KARGS= boots with the HPET)
#   LAB_MTU          MTU of dummy0 under rxe0                  (default 9000 -> RoCE MTU 4096)
#   LAB_EXPORT_SIZE  size of the tmpfs exported as /export     (default 1g; bench: 1536m)
#   LAB_KERNEL       debian12 | current                        (default debian12)
#                    debian12: Debian 12's kernel (Linux 6.1), from the host's apt sources.
#                    current: the newest kernel of Debian's trixie-backports (Linux 7.x), fetched
#                    through a private apt configuration in $LAB_CACHE/current/apt (the host's apt
#                    is left alone) and cached in $LAB_CACHE/current, apart from the default one
#   LAB_KPKG         kernel package                            (default: what linux-image-amd64 depends on,
#                                                               in the suite LAB_KERNEL names)
#   LAB_MIRROR       Debian mirror for debootstrap             (default: the host's apt sources)
#   LAB_PASSENV      names of host env vars to export into the guest command
#   BENCH_BASELINE   bench: a git revision of this checkout, built into bin/baseline/rdmafs and
#                    mounted next to this build's rdmafs (bench-e2e -baseline)
#   LAB_SHARE        host directory shared as /host            (default: the checkout)
#   LAB_TRIM         0 = keep python/perl/dpkg db/... in the initramfs (default 1)
#   LAB_VARIANT      guest image variant: empty (default) or docker (packages-docker.txt on
#                    top of packages.txt; lab.sh docker sets it). Variants are cached apart.
#   LAB_MEM_DOCKER   guest RAM of lab.sh docker                (default 6G)
#
# Exit status:
#   0-99  the guest command's exit status (run-tests.sh: 0 all passed, 1 a test failed)
#   2     usage error
#   100   host package install failed          101  guest image build failed
#   102   building the binaries failed         103  guest did not boot (or qemu did not start)
#   104   service setup (rxe0/knfsd) failed in the guest
#   124   hard timeout: the guest hung and was killed
#   125   the guest stopped without reporting a status (panic, crash)
# On every failure the message names the console log, which is always kept.
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
ROOT=$(cd "$HERE/../.." && pwd)
LAB_CACHE=${LAB_CACHE:-/var/cache/rdmafs-e2e}
LAB_OUT=${LAB_OUT:-$HERE/out}
LAB_SHARE=${LAB_SHARE:-$ROOT}
LAB_TIMEOUT=${LAB_TIMEOUT:-2400}
LAB_BOOT_TIMEOUT=${LAB_BOOT_TIMEOUT:-300}
LAB_MEM=${LAB_MEM:-3G}
_n=$(nproc); [ "$_n" -gt 4 ] && _n=4
LAB_SMP=${LAB_SMP:-$_n}
LAB_ACCEL=${LAB_ACCEL:-auto}
LAB_MTU=${LAB_MTU:-9000}
LAB_EXPORT_SIZE=${LAB_EXPORT_SIZE:-1g}
SUITE=bookworm
LAB_KERNEL=${LAB_KERNEL:-debian12}
# where the kernel and the initramfs built on it are cached: the current kernel apart,
# so that both coexist (the root filesystem is the same for both)
case "$LAB_KERNEL" in
    debian12) KCACHE=$LAB_CACHE ;;
    current) KCACHE=$LAB_CACHE/current ;;
    *) echo "lab.sh: LAB_KERNEL must be debian12 or current, not '$LAB_KERNEL'" >&2; exit 2 ;;
esac
# the suite the current kernel comes from (Debian 13's backports), and how often its
# package index is fetched again (seconds)
CURRENT_SUITE=trixie-backports
CURRENT_REFRESH=${LAB_KERNEL_REFRESH:-86400}

EXIT_USAGE=2 EXIT_DEPS=100 EXIT_IMAGE=101 EXIT_BUILD=102 EXIT_NOBOOT=103 EXIT_SERVICES=104
EXIT_TIMEOUT=124 EXIT_NOSTATUS=125

# host env vars always passed into the guest (when set)
PASSENV="LAB_TEST_TIMEOUT LAB_VERBS_RUN LAB_NFSD_THREADS RDMAFS_DIFF_SEED RDMAFS_DIFF_SCRIPTS RDMAFS_DIFF_TRACE RDMAFS_E2E_OPTS RDMAFS_EXERCISER_OPS RDMAFS_LOCK_MODEL_SEED RDMAFS_LOCK_MODEL_OPS RDMAFS_LOCK_SQLITE_TXNS RDMAFS_LOCK_SQLITE_ROUNDS RDMAFS_LOCK_SQLITE_STRACE BENCH_SIZE BENCH_RAND_SIZE BENCH_RUNTIME BENCH_RAND_RUNTIME BENCH_FILES BENCH_TARGETS BENCH_JOB_SLACK BENCH_WORKLOADS BENCH_PROFILE BENCH_RDMAFS_OPTS BENCH_BASELINE"
HOST_PKGS="qemu-system-x86 debootstrap cpio kmod xz-utils zstd"
# kernel modules (plus their dependencies) copied into the guest
GUEST_MODS="virtio_pci virtio_net 9pnet_virtio 9p dummy veth configfs crc32_generic crc32c_generic crc32_pclmul \
ib_core ib_uverbs rdma_cm rdma_ucm ib_cm iw_cm rdma_rxe \
sunrpc rpcrdma auth_rpcgss lockd grace nfs_acl nfsd nfs nfsv3 fuse libcrc32c overlay"
# those of GUEST_MODS a kernel may lack: Linux 6.1's rxe and nfsd ask the crypto API for
# crc32/crc32c at run time (request_module, no depmod dependency), hence the crypto
# modules; since 6.14 the CRC code is a library they link to, and these modules are gone
GUEST_MODS_OPTIONAL="crc32_generic crc32c_generic crc32_pclmul libcrc32c"
# left out of the initramfs (unpacking costs ~25 ms/MB under TCG); LAB_TRIM=0 keeps them
TRIM_PATHS="./usr/lib/udev/hwdb.bin ./usr/lib/python3 ./usr/lib/python3.11 ./usr/bin/python3.11 ./usr/lib/x86_64-linux-gnu/gconv ./var/cache/debconf ./var/lib/dpkg ./var/lib/apt ./var/cache/apt ./usr/share/zoneinfo ./usr/share/perl ./usr/lib/x86_64-linux-gnu/perl-base ./usr/share/i18n ./.key"
[ "${LAB_TRIM:-1}" = 1 ] || TRIM_PATHS="./.key"

log() { echo "[lab.sh $(date +%T)] $*" >&2; }
fail() { # exit-code message...
    local rc=$1; shift
    log "ERROR: $*"
    exit "$rc"
}

# the host's own Debian mirror, as apt is configured here
host_mirror() {
    { grep -h '^URIs:' /etc/apt/sources.list.d/*.sources 2>/dev/null | awk '{print $2}' || true
      grep -h '^deb ' /etc/apt/sources.list /etc/apt/sources.list.d/*.list 2>/dev/null | awk '{print $2}' || true; } |
        grep -v -- '-security' | grep -m1 '/debian/*$' || true
}

# ---------------------------------------------------------------- host packages

apt_updated=0
apt_update_once() {
    [ "$apt_updated" = 1 ] && return 0
    log "apt-get update"
    apt-get update -q >&2 || return 1
    apt_updated=1
}

cmd_deps() {
    local missing=() p
    for p in $HOST_PKGS; do dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p"); done
    [ ${#missing[@]} -eq 0 ] && return 0
    [ "$(id -u)" = 0 ] || fail $EXIT_DEPS "host packages missing (${missing[*]}) and not root: run as root or install them"
    log "installing host packages: ${missing[*]}"
    apt_update_once || fail $EXIT_DEPS "apt-get update failed"
    DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends "${missing[@]}" >&2 ||
        fail $EXIT_DEPS "apt-get install ${missing[*]} failed"
}

# ---------------------------------------------------------------- guest image

kernel_pkg() {
    if [ -n "${LAB_KPKG:-}" ]; then echo "$LAB_KPKG"; return; fi
    local k
    if [ "$LAB_KERNEL" = current ]; then
        current_apt_update || return 0
        current_apt apt-cache depends linux-image-amd64 2>/dev/null | awk '/Depends: linux-image-[0-9]/{print $2; exit}'
        return 0
    fi
    k=$(apt-cache depends linux-image-amd64 2>/dev/null | awk '/Depends: linux-image-[0-9]/{print $2; exit}')
    if [ -z "$k" ]; then
        apt_update_once || return 0
        k=$(apt-cache depends linux-image-amd64 2>/dev/null | awk '/Depends: linux-image-[0-9]/{print $2; exit}')
    fi
    echo "$k"
}

# The current kernel's private apt: its own sources list (CURRENT_SUITE only), package
# lists and download cache under $KCACHE/apt; nothing of the host's apt state is read or
# written. current_apt CMD ARGS... runs an apt command with it.
CURRENT_APT=$KCACHE/apt
current_apt() {
    local cmd=$1; shift
    "$cmd" -o Dir::Etc::SourceList="$CURRENT_APT/sources.list" -o Dir::Etc::SourceParts="$CURRENT_APT/none" \
        -o Dir::Etc::Preferences="$CURRENT_APT/none" -o Dir::Etc::PreferencesParts="$CURRENT_APT/none" \
        -o Dir::State="$CURRENT_APT/state" -o Dir::State::status=/dev/null -o Dir::Cache="$CURRENT_APT/cache" \
        -o APT::Architecture=amd64 -o APT::Architectures::=amd64 -o APT::Sandbox::User=root "$@"
}

# fetch the CURRENT_SUITE package index when it is missing or older than CURRENT_REFRESH
# seconds; an old one is used when the mirror cannot be reached
current_apt_update() {
    local mirror=${LAB_MIRROR:-$(host_mirror)} lists=$CURRENT_APT/state/lists
    mirror=${mirror:-http://deb.debian.org/debian}
    mkdir -p "$lists/partial" "$CURRENT_APT/cache/archives/partial" "$CURRENT_APT/none" || return 1
    echo "deb [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] $mirror $CURRENT_SUITE main" \
        >"$CURRENT_APT/sources.list"
    local stamp=$CURRENT_APT/updated
    if [ -e "$stamp" ] && [ "$(cat "$stamp")" = "$mirror" ] &&
        [ $(($(date +%s) - $(stat -c %Y "$stamp"))) -lt "$CURRENT_REFRESH" ]; then
        return 0
    fi
    log "apt-get update of $CURRENT_SUITE (private configuration in $CURRENT_APT)"
    if current_apt apt-get update -q >&2; then
        echo "$mirror" >"$stamp"
        return 0
    fi
    compgen -G "$lists/*_Packages*" >/dev/null || return 1
    log "warning: apt-get update of $CURRENT_SUITE failed; using the package index of $(stat -c %y "$lists" | cut -d. -f1)"
}

# download_kernel KPKG DIR: unpack KPKG into DIR, with the packages it depends on that
# carry its version in their name: Debian's kernel packages since 6.19 (trixie-backports) split
# linux-image-VER into linux-binary-VER (vmlinuz), linux-modules-VER and linux-base-VER
download_kernel() {
    local kpkg=$1 dir=$2 kver=${1#linux-image-} pkgs dl
    if [ "$LAB_KERNEL" = current ]; then
        current_apt_update || fail $EXIT_IMAGE "apt-get update of $CURRENT_SUITE failed (private configuration in $CURRENT_APT)"
        pkgs=$(current_apt apt-cache depends "$kpkg" 2>/dev/null | awk -v v="$kver" '/Depends: linux-[a-z]+-/ && index($2, v) {print $2}' | sort -u)
    else
        pkgs=$(apt-cache depends "$kpkg" 2>/dev/null | awk -v v="$kver" '/Depends: linux-[a-z]+-/ && index($2, v) {print $2}' | sort -u)
    fi
    log "downloading $kpkg${pkgs:+ and }$(echo $pkgs)"
    rm -rf "$dir" "$KCACHE"/dl.*
    dl=$(mktemp -d "$KCACHE/dl.XXXXXX")
    # shellcheck disable=SC2086 # pkgs is a list
    if [ "$LAB_KERNEL" = current ]; then
        (cd "$dl" && current_apt apt-get download "$kpkg" $pkgs >&2)
    else
        (cd "$dl" && apt-get download "$kpkg" $pkgs >&2)
    fi || fail $EXIT_IMAGE "apt-get download $kpkg $(echo $pkgs) failed"
    local deb
    for deb in "$dl"/*.deb; do
        dpkg-deb -x "$deb" "$dir" || fail $EXIT_IMAGE "dpkg-deb -x ${deb##*/} failed"
    done
    rm -rf "$dl"
}

build_kernel() {
    local kpkg; kpkg=$(kernel_pkg)
    [ -n "$kpkg" ] || fail $EXIT_IMAGE "cannot find the Debian kernel package of LAB_KERNEL=$LAB_KERNEL (apt-cache depends linux-image-amd64 is empty; check apt sources$([ "$LAB_KERNEL" = current ] && echo " and $CURRENT_APT") or set LAB_KPKG)"
    mkdir -p "$KCACHE" || fail $EXIT_IMAGE "cannot create $KCACHE"
    KVER=${kpkg#linux-image-}
    KDIR=$KCACHE/kernel-$KVER
    if [ ! -e "$KDIR/.done" ]; then
        download_kernel "$kpkg" "$KDIR"
        kernel_layout
        depmod -b "$KMODROOT" "$KVER" || fail $EXIT_IMAGE "depmod of $KVER failed"
        touch "$KDIR/.done"
    fi
    kernel_layout
    [ -s "$VMLINUZ" ] || fail $EXIT_IMAGE "$VMLINUZ missing: remove $KDIR and retry"
    [ -d "$KMODROOT/lib/modules/$KVER" ] || fail $EXIT_IMAGE "$KMODROOT/lib/modules/$KVER missing: remove $KDIR and retry"
    # Uncompressed ELF vmlinux: qemu boots it through the PVH entry point, which skips the
    # bzImage decompressor (~3.5 s under TCG). Falls back to the bzImage if extraction fails.
    VMLINUX=$KDIR/vmlinux-$KVER
    [ "$LAB_KERNEL" = debian12 ] && VMLINUX=$KDIR/boot/vmlinux-$KVER
    if [ ! -s "$VMLINUX" ]; then
        local off unpack=(xz -dc)
        # Debian 12's bzImage holds an xz stream, Debian 13's a zstd frame
        off=$(LC_ALL=C grep -abo -P '\xfd7zXZ\x00' "$VMLINUZ" | head -1 | cut -d: -f1 || true)
        if [ -z "$off" ] && command -v zstd >/dev/null; then
            off=$(LC_ALL=C grep -abo -P '\x28\xb5\x2f\xfd' "$VMLINUZ" | head -1 | cut -d: -f1 || true)
            unpack=(zstd -dc)
        fi
        if [ -n "$off" ]; then
            # xz and zstd complain about the data after their stream: expected
            tail -c +$((off + 1)) "$VMLINUZ" | "${unpack[@]}" >"$VMLINUX.tmp" 2>/dev/null || true
            if [ "$(head -c4 "$VMLINUX.tmp" | od -An -c | tr -d ' ')" = '177ELF' ]; then
                mv "$VMLINUX.tmp" "$VMLINUX"
            else
                rm -f "$VMLINUX.tmp"
            fi
        fi
    fi
    BOOT_KERNEL=$VMLINUZ
    if [ -s "$VMLINUX" ] && [ "${LAB_BZIMAGE:-0}" != 1 ]; then BOOT_KERNEL=$VMLINUX; fi
}

# kernel_layout: where the unpacked kernel keeps its image and modules. Debian 12's
# package has /boot/vmlinuz-VER and /lib/modules/VER; Debian 13's (merged /usr)
# /usr/lib/modules/VER with the image in it as vmlinuz. Sets VMLINUZ and KMODROOT (the
# directory that holds lib/modules, for depmod -b and modprobe -d).
kernel_layout() {
    if [ -d "$KDIR/usr/lib/modules/$KVER" ] && [ ! -d "$KDIR/lib/modules/$KVER" ]; then
        KMODROOT=$KDIR/usr
    else
        KMODROOT=$KDIR
    fi
    VMLINUZ=$KDIR/boot/vmlinuz-$KVER
    [ -e "$VMLINUZ" ] || [ ! -e "$KMODROOT/lib/modules/$KVER/vmlinuz" ] || VMLINUZ=$KMODROOT/lib/modules/$KVER/vmlinuz
}

rootfs_key() {
    { echo "$SUITE"; cat "$HERE/packages.txt" "$HERE/install-packages.sh"; declare -f build_base_rootfs; } |
        sha256sum | cut -c1-12
}

build_rootfs() {
    ROOTFS=$LAB_CACHE/rootfs-$SUITE-$(rootfs_key)
    BASE_ROOTFS=$ROOTFS
    build_base_rootfs
    [ -n "${LAB_VARIANT:-}" ] && build_variant_rootfs
    return 0
}

variant_key() {
    { cat "$BASE_ROOTFS/.key" "$HERE/packages-$LAB_VARIANT.txt"; declare -f build_variant_rootfs; } | sha256sum | cut -c1-12
}

# the base root filesystem plus the packages of packages-$LAB_VARIANT.txt, in a copy
build_variant_rootfs() {
    [ -r "$HERE/packages-$LAB_VARIANT.txt" ] || fail $EXIT_IMAGE "LAB_VARIANT=$LAB_VARIANT: no $HERE/packages-$LAB_VARIANT.txt"
    ROOTFS=$LAB_CACHE/rootfs-$SUITE-$LAB_VARIANT-$(variant_key)
    [ -e "$ROOTFS/.done" ] && return 0
    log "building the $LAB_VARIANT variant of the root filesystem: packages-$LAB_VARIANT.txt"
    local t0=$SECONDS tmp=$ROOTFS.tmp
    umount -l "$tmp/proc" 2>/dev/null || true
    rm -rf --one-file-system "$tmp"
    cp -a "$BASE_ROOTFS" "$tmp"
    rm -f "$tmp/.done" "$tmp/.key"
    chroot_install "$tmp" "$HERE/packages-$LAB_VARIANT.txt" ||
        fail $EXIT_IMAGE "installing packages-$LAB_VARIANT.txt failed (install-packages.sh in the chroot $tmp)"
    rm -rf "$ROOTFS"; mv "$tmp" "$ROOTFS"
    variant_key >"$ROOTFS/.key"; touch "$ROOTFS/.done"
    log "$LAB_VARIANT root filesystem built in $((SECONDS - t0))s ($(du -sh "$ROOTFS" | cut -f1))"
}

# chroot_install DIR LIST: install-packages.sh LIST in the chroot DIR (with /proc, DNS)
chroot_install() {
    local dir=$1 list=$2 rc=0
    mkdir -p "$dir/tmp/e2e"
    cp "$list" "$HERE/install-packages.sh" "$dir/tmp/e2e/"
    cp -L /etc/resolv.conf "$dir/etc/resolv.conf" 2>/dev/null || true
    mount -t proc proc "$dir/proc"
    chroot "$dir" /bin/bash /tmp/e2e/install-packages.sh "/tmp/e2e/$(basename "$list")" >&2 || rc=$?
    umount "$dir/proc"
    rm -rf "$dir/tmp/e2e" "$dir/etc/resolv.conf"
    return $rc
}

build_base_rootfs() {
    [ -e "$ROOTFS/.done" ] && return 0
    local mirror=${LAB_MIRROR:-$(host_mirror)}
    [ -n "$mirror" ] || fail $EXIT_IMAGE "no Debian mirror in the host's apt sources; set LAB_MIRROR"
    log "building the guest root filesystem: debootstrap $SUITE minbase from $mirror, then install-packages.sh"
    local t0=$SECONDS tmp=$ROOTFS.tmp
    if [ -e "$tmp" ]; then # an interrupted build may have left its /proc mounted
        umount -l "$tmp/proc" 2>/dev/null || true
        rm -rf --one-file-system "$tmp"
    fi
    debootstrap --variant=minbase "$SUITE" "$tmp" "$mirror" >&2 ||
        fail $EXIT_IMAGE "debootstrap $SUITE failed (log: $tmp/debootstrap/debootstrap.log)"
    mkdir -p "$tmp/tmp/e2e"
    cp "$HERE/packages.txt" "$HERE/install-packages.sh" "$tmp/tmp/e2e/"
    cp -L /etc/resolv.conf "$tmp/etc/resolv.conf" 2>/dev/null || true
    mount -t proc proc "$tmp/proc"
    # shellcheck disable=SC2064 # expand $tmp now
    trap "umount -l '$tmp/proc' 2>/dev/null" EXIT
    local rc=0
    chroot "$tmp" /bin/bash /tmp/e2e/install-packages.sh /tmp/e2e/packages.txt >&2 || rc=$?
    umount "$tmp/proc"
    trap - EXIT
    [ "$rc" = 0 ] || fail $EXIT_IMAGE "installing the guest packages failed (install-packages.sh in the chroot $tmp, rc $rc)"
    rm -rf "$tmp/tmp/e2e" "$tmp/etc/resolv.conf"
    # the guest's own marker: the e2e tests run only where this file exists
    echo "rdmafs e2e guest, $SUITE" >"$tmp/etc/rdmafs-e2e-guest"
    rm -rf "$ROOTFS"; mv "$tmp" "$ROOTFS"
    rootfs_key >"$ROOTFS/.key"; touch "$ROOTFS/.done"
    log "root filesystem built in $((SECONDS - t0))s ($(du -sh "$ROOTFS" | cut -f1))"
}

# The guest's PID 1. Services are set up by setup-services.sh (copied in per run, so
# editing it needs no rebuild); the command comes from the per-run ctl share.
guest_init() {
cat <<'EOF'
#!/bin/bash
# PID 1 of the rdmafs e2e guest (generated by test/e2e/lab.sh)
export PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin HOME=/root TERM=dumb
up() { read -r u _ </proc/uptime; echo "$u"; }
log() { echo "[e2e-init $(up)] $*"; }
poweroff_now() { sync; umount /host 2>/dev/null; umount /ctl 2>/dev/null; echo o >/proc/sysrq-trigger; sleep 30; }
mount -t proc proc /proc
mount -t sysfs sysfs /sys
mount -t devtmpfs devtmpfs /dev 2>/dev/null
mkdir -p /dev/pts /dev/shm /ctl /host
mount -t devpts devpts /dev/pts
mount -t tmpfs tmpfs /dev/shm
mount -t tmpfs tmpfs /tmp
mount -t tmpfs tmpfs /run; mkdir -p /run/lock
# as systemd-tmpfiles makes it on a booted Debian (NFS-Ganesha reads it)
[ -e /etc/mtab ] || ln -s ../proc/self/mounts /etc/mtab
log "init start (kernel $(uname -r))"
modprobe -a virtio_pci 9pnet_virtio 9p configfs || log "modprobe of virtio/9p FAILED"
mount -t configfs configfs /sys/kernel/config 2>/dev/null
mount -t 9p -o trans=virtio,version=9p2000.L,msize=512000 ctl /ctl || { log "cannot mount the ctl share"; poweroff_now; }
up >/ctl/booted
mount -t 9p -o trans=virtio,version=9p2000.L,msize=512000 host /host || log "cannot mount the host share"
set -a; . /ctl/env; set +a
hostname e2eguest
ip link set lo up
ulimit -l unlimited
ulimit -n 65536
if [ "${LAB_SERVICES:-1}" = 1 ]; then
    bash /ctl/setup-services.sh </dev/null >/dev/console 2>&1
    src=$?
    echo $src >/ctl/services_rc
    if [ $src != 0 ]; then log "service setup FAILED (rc $src)"; poweroff_now; fi
    set -a; . /run/rdmafs-e2e.env; set +a
fi
log "running command"
cd /host 2>/dev/null || cd /
bash /ctl/cmd </dev/null >/dev/console 2>&1
rc=$?
echo $rc >/ctl/status
log "command exited with status $rc"
poweroff_now
EOF
}

build_initramfs() {
    local key; key=$( { guest_init; echo "$GUEST_MODS $KVER $TRIM_PATHS"; cat "$ROOTFS/.key"; declare -f build_initramfs; } |
        sha256sum | cut -c1-12)
    INITRD=$KCACHE/initramfs-$KVER-${LAB_VARIANT:+$LAB_VARIANT-}$key.cpio
    [ -s "$INITRD" ] && return 0
    log "packing the initramfs"
    local t0=$SECONDS
    # kernel modules: the dependency closure of GUEST_MODS
    rm -rf "$ROOTFS/lib/modules"
    local mdst=$ROOTFS/lib/modules/$KVER m f
    mkdir -p "$mdst"
    local msrc=$KMODROOT/lib/modules/$KVER
    cp "$msrc"/modules.{order,builtin,builtin.modinfo} "$mdst/"
    local files=() deps rel
    for m in $GUEST_MODS; do
        if ! deps=$(modprobe -d "$KMODROOT" -S "$KVER" --show-depends "$m" 2>/dev/null); then
            [[ " $GUEST_MODS_OPTIONAL " == *" $m "* ]] && continue
            fail $EXIT_IMAGE "kernel module $m not found in $KVER"
        fi
        mapfile -t -O "${#files[@]}" files < <(awk '$1=="insmod"{print $2}' <<<"$deps")
    done
    # Compressed modules (Debian 13's are .ko.xz) are unpacked: the guest's kmod would
    # decompress each at every modprobe, under TCG slowly
    for f in $(printf '%s\n' "${files[@]}" | sort -u); do
        rel=${f#"$msrc"/}
        mkdir -p "$mdst/$(dirname "$rel")"
        case "$f" in
            *.ko.xz) xz -dc "$f" >"$mdst/${rel%.xz}" ;;
            *.ko.zst) zstd -q -dc "$f" >"$mdst/${rel%.zst}" ;;
            *.ko.gz) gzip -dc "$f" >"$mdst/${rel%.gz}" ;;
            *) cp "$f" "$mdst/$rel" ;;
        esac || fail $EXIT_IMAGE "copying the kernel module $f failed"
    done
    depmod -b "$ROOTFS" "$KVER" || fail $EXIT_IMAGE "depmod in the rootfs failed"
    guest_init >"$ROOTFS/init"; chmod 755 "$ROOTFS/init"
    local prune=() p
    for p in $TRIM_PATHS; do prune+=(-path "$p" -prune -o); done
    (cd "$ROOTFS" && find . "${prune[@]}" -print0 | cpio --null -o -H newc --quiet) >"$INITRD.tmp" ||
        fail $EXIT_IMAGE "packing the initramfs failed"
    mv "$INITRD.tmp" "$INITRD"
    log "initramfs $(du -h "$INITRD" | cut -f1) packed in $((SECONDS - t0))s"
}

# drop cache entries that the current keys no longer name: stale kernels and base root
# filesystems, and stale entries of this run's variant (another variant's stay). Kernels
# and initramfs images are pruned only in this LAB_KERNEL's cache (KCACHE): the other's stay
prune_cache() {
    local e v
    for e in "$KCACHE"/kernel-* "$LAB_CACHE"/rootfs-* "$KCACHE"/initramfs-* "$LAB_CACHE"/docker-*; do
        [ -e "$e" ] || continue
        case "$e" in "$KDIR" | "$BASE_ROOTFS" | "$ROOTFS" | "$INITRD" | "${DOCKER_BASE_TAR:-}" | "${DOCKER_GO_TAR:-}") continue ;; esac
        v=$(cache_variant "${e##*/}")
        [ "$v" = shared ] || [ "$v" = "${LAB_VARIANT:-}" ] || continue
        log "removing stale cache entry $e"
        rm -rf "$e"
    done
}

# cache_variant NAME: the variant a cache entry belongs to; "shared" for the kernel and
# the base root filesystem, which every variant is built on; "" for no variant
cache_variant() {
    case "$1" in
        kernel-* | rootfs-"$SUITE"-????????????) echo shared ;;
        rootfs-"$SUITE"-*-????????????) local v=${1#rootfs-"$SUITE"-}; echo "${v%-*}" ;;
        initramfs-*-docker-*.cpio | docker-*) echo docker ;;
        *) echo "" ;;
    esac
}

# ---------------------------------------------------------------- Docker base images

# No container registry is reachable from here, so `lab.sh docker` makes the images the
# Dockerfile's two stages start FROM (its ARGs DEBIAN_IMAGE and GO_IMAGE) as tar files of
# root filesystems, which docker.sh imports in the guest (`docker import`):
#   docker-base-KEY.tar  the base root filesystem: debootstrap minbase + packages.txt
#   docker-go-KEY.tar    debootstrap minbase, the C build dependencies, this host's Go
#                        toolchain in /usr/local/go (less its tests and API lists), the
#                        module cache of go.mod (the guest has no network), and a build
#                        cache warmed by build.sh on a copy of the checkout at /src, where
#                        the Dockerfile builds (the guest emulates its CPU: a cold build
#                        there takes long). Every file costs time in `docker import` under
#                        emulation, hence minbase and the trimmed toolchain.
GO_BUILD_DEPS="gcc libc6-dev libibverbs-dev librdmacm-dev pkg-config"
# the Go image's environment; docker.sh gives it to `docker import` (written to the ctl share)
GO_IMAGE_ENV="PATH=/usr/local/go/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin GOTOOLCHAIN=local GOPROXY=off GOFLAGS=-buildvcs=false"

build_docker_images() {
    DOCKER_BASE_TAR=$LAB_CACHE/docker-base-$(cat "$BASE_ROOTFS/.key").tar
    if [ ! -s "$DOCKER_BASE_TAR" ]; then
        log "packing the base image $DOCKER_BASE_TAR"
        tar -C "$BASE_ROOTFS" --exclude=./.key --exclude=./.done --exclude=./init --exclude=./lib/modules \
            -cf "$DOCKER_BASE_TAR.tmp" . || fail $EXIT_IMAGE "packing $DOCKER_BASE_TAR failed"
        mv "$DOCKER_BASE_TAR.tmp" "$DOCKER_BASE_TAR"
    fi
    local gobin goroot gover key
    gobin=$(command -v "${GO:-go}" || echo /usr/local/go/bin/go)
    goroot=$("$gobin" env GOROOT) || fail $EXIT_IMAGE "no Go toolchain on this host (GO=${GO:-go})"
    gover=$("$gobin" version)
    key=$({ echo "$SUITE"; cat "$HERE/install-packages.sh" "$ROOT/go.mod" "$ROOT/go.sum"; echo "$gover $GO_BUILD_DEPS $GO_IMAGE_ENV"
        declare -f build_docker_images; } | sha256sum | cut -c1-12)
    DOCKER_GO_TAR=$LAB_CACHE/docker-go-$key.tar
    [ -s "$DOCKER_GO_TAR" ] && return 0
    log "building the Go image: $GO_BUILD_DEPS, $gover, module and build caches"
    local t0=$SECONDS tmp=$LAB_CACHE/docker-go-$key.tmp rc=0 mirror=${LAB_MIRROR:-$(host_mirror)}
    umount -l "$tmp/proc" 2>/dev/null || true
    rm -rf --one-file-system "$tmp"
    debootstrap --variant=minbase "$SUITE" "$tmp" "$mirror" >&2 ||
        fail $EXIT_IMAGE "debootstrap $SUITE for the Go image failed (log: $tmp/debootstrap/debootstrap.log)"
    printf '%s\n' $GO_BUILD_DEPS >"$tmp.deps"
    chroot_install "$tmp" "$tmp.deps" || fail $EXIT_IMAGE "installing $GO_BUILD_DEPS in the Go image failed"
    rm -f "$tmp.deps"
    cp -a "$goroot" "$tmp/usr/local/go"
    rm -rf "$tmp/usr/local/go/test" "$tmp/usr/local/go/api" "$tmp/usr/local/go/doc" "$tmp/usr/local/go/misc"
    (cd "$ROOT" && GOMODCACHE=$tmp/root/go/pkg/mod GOFLAGS=-mod=mod "$gobin" mod download) ||
        fail $EXIT_IMAGE "go mod download into the Go image failed"
    mkdir -p "$tmp/src"
    tar -C "$ROOT" --exclude=./bin --exclude=./.git --exclude=./test/e2e/out --exclude=./bench/out -cf - . |
        tar -C "$tmp/src" -xf -
    mount -t proc proc "$tmp/proc"
    # shellcheck disable=SC2086 # GO_IMAGE_ENV is a list of assignments
    chroot "$tmp" env -i HOME=/root $GO_IMAGE_ENV BUILD_DEPS=0 bash /src/test/e2e/build.sh /src/bin >&2 || rc=$?
    umount "$tmp/proc"
    [ "$rc" = 0 ] || fail $EXIT_IMAGE "warming the build cache of the Go image failed (build.sh in the chroot $tmp)"
    rm -rf "$tmp/src"
    tar -C "$tmp" -cf "$DOCKER_GO_TAR.tmp" . || fail $EXIT_IMAGE "packing $DOCKER_GO_TAR failed"
    mv "$DOCKER_GO_TAR.tmp" "$DOCKER_GO_TAR"
    rm -rf --one-file-system "$tmp"
    log "Go image built in $((SECONDS - t0))s ($(du -h "$DOCKER_GO_TAR" | cut -f1))"
}

cmd_image() {
    [ "$(id -u)" = 0 ] || fail $EXIT_IMAGE "building and booting the guest needs root"
    mkdir -p "$LAB_CACHE/runs" || fail $EXIT_IMAGE "cannot create the cache directory $LAB_CACHE (set LAB_CACHE)"
    exec 9>"$LAB_CACHE/.lock"
    flock 9
    local t0=$SECONDS
    build_kernel
    build_rootfs
    build_initramfs
    [ "${LAB_VARIANT:-}" = docker ] && build_docker_images
    prune_cache
    flock -u 9
    [ $((SECONDS - t0)) -gt 2 ] && log "guest image ready in $((SECONDS - t0))s"
    return 0
}

# ---------------------------------------------------------------- boot

# kernel arguments of this LAB_KERNEL. The current kernel's FUSE (built in) can serve
# requests over io_uring (CONFIG_FUSE_IO_URING), off unless fuse.enable_uring is set;
# a FUSE server still has to ask for it in FUSE_INIT, so those that do not see no change
kernel_args() {
    case "$LAB_KERNEL" in
        current) echo "fuse.enable_uring=1" ;;
    esac
}

pick_accel() {
    case "$LAB_ACCEL" in
        kvm | tcg) echo "$LAB_ACCEL" ;;
        auto)
            # kvm_pvm (paravirtual "PVM" KVM, e.g. nested in a cloud VM) cannot run the stock
            # Debian kernel (only PVM-enlightened ones): TCG there. KVM only with kvm_intel/kvm_amd.
            if [ -w /dev/kvm ] && { [ -d /sys/module/kvm_intel ] || [ -d /sys/module/kvm_amd ]; } &&
                [ ! -d /sys/module/kvm_pvm ]; then echo kvm; else echo tcg; fi ;;
        *) fail $EXIT_USAGE "LAB_ACCEL must be kvm, tcg or auto" ;;
    esac
}

prep_ctl() {
    CTL=$(mktemp -d "$LAB_CACHE/runs/run.XXXXXX")
    trap 'rm -rf "$CTL"' EXIT
    cp "$HERE/setup-services.sh" "$CTL/setup-services.sh"
    {
        echo "LAB_SERVICES=${LAB_SERVICES:-1}"
        echo "LAB_MTU=$LAB_MTU"
        echo "LAB_EXPORT_SIZE=$LAB_EXPORT_SIZE"
        local v
        for v in $PASSENV ${LAB_PASSENV:-}; do
            if [ -n "${!v+x}" ]; then printf '%s=%q\n' "$v" "${!v}"; fi
        done
    } >"$CTL/env"
    if [ "${LAB_VARIANT:-}" = docker ]; then
        # the Docker base images for docker.sh, linked (same file system) rather than copied
        mkdir -p "$CTL/images"
        ln "$DOCKER_BASE_TAR" "$CTL/images/base.tar" 2>/dev/null || cp "$DOCKER_BASE_TAR" "$CTL/images/base.tar"
        ln "$DOCKER_GO_TAR" "$CTL/images/go.tar" 2>/dev/null || cp "$DOCKER_GO_TAR" "$CTL/images/go.tar"
        echo "$GO_IMAGE_ENV" >"$CTL/images/go.env"
    fi
    mkdir -p "$LAB_OUT"
    LOG=${LAB_LOG:-$LAB_OUT/console-$(date +%Y%m%d-%H%M%S).log}
    : >"$LOG"
}

# boot INTERACTIVE(0|1): sets QRC, QSECS, BOOT_FAILED, BOOT_KILLED
boot() {
    local accel cpu
    accel=$(pick_accel)
    cpu=max; [ "$accel" = kvm ] && cpu=host
    cpu=${LAB_CPU:-$cpu}
    local q=(qemu-system-x86_64 -nodefaults -no-user-config -no-reboot -display none
        -accel "$accel" -cpu "$cpu" -smp "$LAB_SMP" -m "$LAB_MEM"
        -kernel "$BOOT_KERNEL" -initrd "$INITRD"
        -append "console=ttyS0 panic=-1 quiet loglevel=4 mitigations=off $(kernel_args) ${LAB_KARGS-tsc=reliable}"
        -chardev "stdio,id=con,signal=on,logfile=$LOG" -serial chardev:con
        -virtfs "local,path=$CTL,mount_tag=ctl,security_model=none,id=ctl"
        -virtfs "local,path=$LAB_SHARE,mount_tag=host,security_model=none,id=host,multidevs=remap"
        -device virtio-rng-pci)
    log "booting ($accel, $LAB_SMP vCPU, $LAB_MEM RAM, timeout ${LAB_TIMEOUT}s), $LAB_SHARE -> /host, console log $LOG"
    QRC=0 BOOT_FAILED=0 BOOT_KILLED=0
    local t0=$SECONDS
    if [ "$1" = 1 ]; then
        timeout --foreground -k 10 "$LAB_TIMEOUT" "${q[@]}" || QRC=$?
    else
        timeout -k 10 "$LAB_TIMEOUT" "${q[@]}" </dev/null &
        local qpid=$!
        trap 'kill -TERM "$qpid" 2>/dev/null; wait "$qpid"; rm -rf "$CTL"; log "interrupted; console log $LOG"; exit 130' INT TERM
        while kill -0 "$qpid" 2>/dev/null; do
            if [ "$BOOT_FAILED" = 0 ] && [ ! -e "$CTL/booted" ] && [ $((SECONDS - t0)) -ge "$LAB_BOOT_TIMEOUT" ]; then
                BOOT_FAILED=1 BOOT_KILLED=1
                kill -TERM "$qpid" 2>/dev/null || true
            fi
            sleep 1
        done
        wait "$qpid" || QRC=$?
        trap - INT TERM
    fi
    [ -e "$CTL/booted" ] || BOOT_FAILED=1
    QSECS=$((SECONDS - t0))
    log "qemu exited ($QRC) after ${QSECS}s"
}

# map the run's outcome to lab.sh's exit status
finish() {
    if [ "$QRC" = 124 ] || { [ "$QRC" = 137 ] && [ "$QSECS" -ge "$LAB_TIMEOUT" ]; }; then
        fail $EXIT_TIMEOUT "the guest hung: killed after the hard timeout of ${LAB_TIMEOUT}s (LAB_TIMEOUT); console log: $LOG"
    fi
    if [ "$BOOT_KILLED" = 1 ]; then
        fail $EXIT_NOBOOT "the guest did not boot: /init did not start within ${LAB_BOOT_TIMEOUT}s (LAB_BOOT_TIMEOUT), qemu killed; console log: $LOG"
    fi
    if [ "$QRC" -gt 128 ] && [ ! -f "$CTL/status" ]; then
        fail $EXIT_NOSTATUS "qemu was killed by signal $((QRC - 128)) from outside after ${QSECS}s (not by lab.sh); console log: $LOG"
    fi
    if [ "$BOOT_FAILED" = 1 ]; then
        fail $EXIT_NOBOOT "the guest did not boot: qemu exited with status $QRC before /init started (kernel panic, bad qemu option?); console log: $LOG"
    fi
    if [ -f "$CTL/services_rc" ] && [ "$(cat "$CTL/services_rc")" != 0 ]; then
        fail $EXIT_SERVICES "service setup in the guest failed (setup-services.sh rc $(cat "$CTL/services_rc")); its messages are in the console log: $LOG"
    fi
    if [ ! -f "$CTL/status" ]; then
        fail $EXIT_NOSTATUS "the guest stopped without reporting a status (kernel panic or crash?); console log: $LOG"
    fi
    local rc; rc=$(cat "$CTL/status")
    if [ "$rc" = 0 ]; then
        log "guest command passed; console log: $LOG"
    else
        log "guest command FAILED with status $rc; console log: $LOG"
    fi
    exit "$rc"
}

cmd_run() {
    [ $# -gt 0 ] || fail $EXIT_USAGE "usage: lab.sh run CMD [ARGS...]"
    cmd_deps
    cmd_image
    prep_ctl
    printf '%q ' "$@" >"$CTL/cmd"; echo >>"$CTL/cmd"
    boot 0
    if [ "$BOOT_KILLED" = 1 ] && [ ! -s "$LOG" ]; then
        # qemu ran but the guest never printed a byte, not even the
        # kernel's first line: qemu itself stalled (seen once here, on a
        # machine idle at the time; the next start booted at once). A
        # guest that printed anything and did not boot is not retried.
        log "the guest printed nothing in ${LAB_BOOT_TIMEOUT}s; starting qemu once more"
        LOG=${LOG%.log}-retry.log
        : >"$LOG"
        boot 0
    fi
    finish
}

build_binaries() {
    log "building the binaries (test/e2e/build.sh)"
    "$HERE/build.sh" "$ROOT/bin" || fail $EXIT_BUILD "building the e2e binaries failed (test/e2e/build.sh)"
}

cmd_e2e() {
    local t0=$SECONDS
    cmd_deps
    cmd_image
    build_binaries
    log "host part took $((SECONDS - t0))s"
    cmd_run test/e2e/run-tests.sh "$@"
}

cmd_bench() {
    LAB_MEM=${LAB_MEM_BENCH:-4G}
    LAB_TIMEOUT=${LAB_TIMEOUT_BENCH:-5400}
    LAB_EXPORT_SIZE=${LAB_EXPORT_SIZE_BENCH:-1536m}
    cmd_deps
    cmd_image
    build_binaries
    [ -z "${BENCH_BASELINE:-}" ] || build_baseline "$BENCH_BASELINE"
    cmd_run test/e2e/run-tests.sh --bench "$@"
}

# build_baseline REV: rdmafs of git revision REV of this checkout, into
# bin/baseline/rdmafs, from a worktree that is removed again
build_baseline() {
    local rev=$1 wt gobin
    gobin=$(command -v "${GO:-go}" || echo /usr/local/go/bin/go)
    wt=$(mktemp -d /tmp/rdmafs-baseline.XXXXXX)
    log "building the baseline rdmafs of $rev"
    git -C "$ROOT" worktree add -q --detach "$wt" "$rev" || fail $EXIT_BUILD "git worktree add $rev failed"
    mkdir -p "$ROOT/bin/baseline"
    (cd "$wt" && "$gobin" build -o "$ROOT/bin/baseline/rdmafs" ./cmd/rdmafs) || {
        git -C "$ROOT" worktree remove --force "$wt"; fail $EXIT_BUILD "building rdmafs of $rev failed"; }
    git -C "$ROOT" worktree remove --force "$wt"
}

cmd_bench_verbs() {
    cmd_deps
    cmd_image
    build_binaries
    cmd_run test/e2e/run-tests.sh --bench-verbs "$@"
}

# the Docker image, built from the Dockerfile and run by docker.io in a guest whose own
# services are not set up (the container's entrypoint sets them up, as on a host)
cmd_docker() {
    export LAB_VARIANT=docker LAB_SERVICES=0
    LAB_MEM=${LAB_MEM_DOCKER:-6G}
    cmd_run test/e2e/docker.sh "$@"
}

cmd_shell() {
    cmd_deps
    cmd_image
    prep_ctl
    echo 'exec bash -i' >"$CTL/cmd"
    boot 1
    finish
}

cmd_info() { # read-only: builds nothing
    local kpkg kver key
    kpkg=$(kernel_pkg); kver=${kpkg#linux-image-}; key=$(rootfs_key)
    echo "cache:     $LAB_CACHE ($(du -sh "$LAB_CACHE" 2>/dev/null | cut -f1))"
    echo "kernel:    LAB_KERNEL=$LAB_KERNEL, $kpkg: $([ -e "$KCACHE/kernel-$kver/.done" ] && echo "$KCACHE/kernel-$kver ($(du -sh "$KCACHE/kernel-$kver" | cut -f1))" || echo 'not built')"
    echo "rootfs:    $([ -e "$LAB_CACHE/rootfs-$SUITE-$key/.done" ] && echo "$LAB_CACHE/rootfs-$SUITE-$key" || echo 'not built')"
    echo "initramfs: $(ls "$KCACHE"/initramfs-"$kver"-*.cpio 2>/dev/null || echo 'not built')"
    echo "accel:     $(pick_accel)"
}

cmd_available() {
    if ! command -v qemu-system-x86_64 >/dev/null && ! dpkg -s qemu-system-x86 >/dev/null 2>&1 &&
        ! apt-cache show qemu-system-x86 >/dev/null 2>&1; then
        echo "no qemu-system-x86_64 and no apt package for it"; return 1
    fi
    [ "$(id -u)" = 0 ] || { echo "not root"; return 1; }
    echo "e2e can run here ($(pick_accel))"
}

case "${1:-}" in
    e2e) shift; cmd_e2e "$@" ;;
    bench) shift; cmd_bench "$@" ;;
    bench-verbs) shift; cmd_bench_verbs "$@" ;;
    docker) shift; cmd_docker "$@" ;;
    run) shift; cmd_run "$@" ;;
    shell) cmd_shell ;;
    deps) cmd_deps ;;
    image) cmd_deps; cmd_image ;;
    info) cmd_info ;;
    available) cmd_available ;;
    *) sed -n '2,63p' "$0"; exit $EXIT_USAGE ;;
esac
