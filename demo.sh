#!/usr/bin/env bash
# demo.sh - rdmafs's main job on an embedded default, on one machine:
# serve a temporary directory with `rdmafs serve`, mount it with rdmafs,
# move some data through the mount, show what the server got and the
# mount's statistics, and unmount. Run as root (make demo builds first).
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

step "serving $export_dir over NFSv3 on loopback"
"$BIN" serve -o port=0 "$export_dir" >"$work/serve.out" 2>"$work/serve.log" &
srv=$!
port=
for _ in $(seq 50); do
    port=$(sed -n 's/.* on port \([0-9]*\) .*/\1/p' "$work/serve.out")
    [ -n "$port" ] && break
    sleep 0.1
done
[ -n "$port" ] || { cat "$work/serve.log" >&2; echo "demo.sh: rdmafs serve did not start" >&2; exit 1; }
cat "$work/serve.out"

step "mounting 127.0.0.1:/ on $mnt"
"$BIN" -o "port=$port,mountport=$port" 127.0.0.1:/ "$mnt"
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

step "unmounting"
fusermount3 -u "$mnt"
echo "done"
