#!/usr/bin/env bash
# demo.sh - rdmafs's main job on an embedded default, on one machine:
# serve a temporary directory with `rdmafs serve` over RPC-over-RDMA, mount
# it with rdmafs over RDMA, move some data through the mount, show what the
# server got and the mount's statistics (chunks and credits at work), and
# unmount. Run as root (make demo builds first).
#
# With an RDMA device (anything in /sys/class/infiniband, SoftRoCE
# included) the demo uses it through libibverbs (provider=ibverbs) on its
# interface's address; without one it uses rdmafs's software RDMA provider
# (provider=soft) on 127.0.0.1, and says so.
#
# Usage: demo.sh [RDMAFS_BINARY]     (default: bin/rdmafs)
set -euo pipefail
BIN=$(readlink -f "${1:-bin/rdmafs}")
[ -x "$BIN" ] || { echo "demo.sh: $BIN not found: run make build" >&2; exit 1; }
[ "$(id -u)" = 0 ] || { echo "demo.sh: run as root (FUSE mounts)" >&2; exit 1; }

work=$(mktemp -d /tmp/rdmafs-demo.XXXXXX)
export_dir=$work/export mnt=$work/mnt
mkdir -p "$export_dir" "$mnt"
srv=
cleanup() {
    mountpoint -q "$mnt" && fusermount3 -u "$mnt"
    [ -n "$srv" ] && kill "$srv" 2>/dev/null && wait "$srv" 2>/dev/null
    rm -rf "$work"
}
trap cleanup EXIT
step() { printf '\n== %s\n' "$*"; }

# An RDMA device and the IPv4 address of its interface, if there is one.
provider=soft addr=127.0.0.1
for dev in /sys/class/infiniband/*; do
    [ -e "$dev" ] || break
    ndev=$(cat "$dev"/ports/1/gid_attrs/ndevs/0 2>/dev/null || true)
    ip4=$(ip -4 -o addr show dev "$ndev" 2>/dev/null | awk '{print $4}' | cut -d/ -f1 | head -1)
    if [ -n "$ip4" ]; then provider=ibverbs addr=$ip4; break; fi
done
if [ "$provider" = soft ]; then
    echo "no RDMA device here: using rdmafs's software RDMA provider (provider=soft), which speaks"
    echo "RPC-over-RDMA over TCP; with an RDMA NIC or SoftRoCE the same demo uses libibverbs"
else
    echo "RDMA device $(basename "$dev") on $ndev ($addr): using libibverbs (provider=ibverbs)"
fi

step "serving $export_dir over NFSv3: MOUNT on TCP, NFS over RDMA"
# The demo writes as root: no_root_squash (by default root is squashed, as with knfsd).
"$BIN" serve -o "addr=$addr,port=0,proto=rdma,provider=$provider,rdmaport=0,no_root_squash" "$export_dir" >"$work/serve.out" 2>"$work/serve.log" &
srv=$!
port= rport=
for _ in $(seq 100); do
    port=$(sed -n 's/.* as .* on port \([0-9]*\) .*/\1/p' "$work/serve.out")
    rport=$(sed -n 's/.*over RDMA .* on port \([0-9]*\).*/\1/p' "$work/serve.out")
    [ -n "$port" ] && [ -n "$rport" ] && break
    sleep 0.1
done
[ -n "$port" ] && [ -n "$rport" ] || { cat "$work/serve.log" >&2; echo "demo.sh: rdmafs serve did not start" >&2; exit 1; }
cat "$work/serve.out"

step "mounting $addr:/ on $mnt over RDMA"
"$BIN" -o "proto=rdma,provider=$provider,port=$rport,mountport=$port" "$addr:/" "$mnt"
grep " $mnt " /proc/mounts

step "writing 256 MiB through the mount and reading it back"
head -c 256M /dev/urandom >"$work/data"
dd if="$work/data" of="$mnt/data" bs=1M conv=fsync status=none
sync; echo 3 >/proc/sys/vm/drop_caches
dd if="$mnt/data" of=/dev/null bs=1M 2>&1 | tail -1
sum_local=$(sha256sum <"$work/data" | cut -c1-64)
sum_mount=$(sha256sum <"$mnt/data" | cut -c1-64)
sum_server=$(sha256sum <"$export_dir/data" | cut -c1-64)
echo "sha256 written $sum_local"
echo "sha256 mount   $sum_mount"
echo "sha256 server  $sum_server"
[ "$sum_local" = "$sum_mount" ] && [ "$sum_local" = "$sum_server" ] || { echo "demo.sh: checksums differ" >&2; exit 1; }

step "a small tree: mkdir, files, a symlink, a hard link, a rename"
mkdir -p "$mnt/tree/sub"
for i in $(seq 100); do echo "file $i" >"$mnt/tree/sub/f$i"; done
ln -s sub/f1 "$mnt/tree/link"
ln "$mnt/tree/sub/f2" "$mnt/tree/hard"
mv "$mnt/tree/sub/f3" "$mnt/tree/renamed"
ls -li "$mnt/tree" | head
echo "$(ls "$export_dir/tree/sub" | wc -l) files in the server's tree/sub"

step "rdmafs stats $mnt"
"$BIN" stats "$mnt" | grep -Ev ': 0 0 0 0 0 0 0 0 0$'
# The transport line, field by field (the kernel's xprt: rdma format).
"$BIN" stats "$mnt" | awk '/xprt:/ {
    n = split("bind_count connect_count connect_time idle_time sends recvs bad_xids req_u bklog_u read_chunk_count write_chunk_count reply_chunk_count total_rdma_request total_rdma_reply pullup_copy_count fixup_copy_count hardway_register_count failed_marshal_count bad_reply_count nomsg_call_count mrs_recycled mrs_orphaned mrs_allocated local_inv_needed empty_sendctx_q reply_waits_for_send payload_copies", f, " ")
    for (i = 1; i <= n; i++) printf "    %-22s %s\n", f[i], $(i + 3) }'

step "unmounting"
fusermount3 -u "$mnt"
echo "done"
