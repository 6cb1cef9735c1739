#!/bin/bash
# install-packages.sh - install the e2e test system's Debian packages (packages.txt
# beside this script) into the running Debian 12 system, as root.
#
# One script for both ways the e2e tests run:
#   - lab.sh runs it inside a chroot of the freshly debootstrapped guest root filesystem;
#   - the Dockerfile runs it in the debian:bookworm image (DEBIAN_IMAGE).
# Where every package is installed already (the base image lab.sh makes for docker build
# in the guest, which has no network) it installs nothing and needs no network.
# Services are not started (policy-rc.d), documentation is removed.
# Exit status: 0, or 1 with a message naming what failed.
set -euo pipefail
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
LIST=${1:-$HERE/packages.txt}

die() { echo "install-packages.sh: ERROR: $*" >&2; exit 1; }
[ "$(id -u)" = 0 ] || die "must run as root"
[ -r "$LIST" ] || die "package list $LIST not found"
mapfile -t pkgs < <(sed -e 's/#.*//' -e 's/[[:space:]]//g' "$LIST" | grep -v '^$')
[ ${#pkgs[@]} -gt 0 ] || die "package list $LIST is empty"

missing=()
for p in "${pkgs[@]}"; do
    dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p")
done
if [ ${#missing[@]} -eq 0 ]; then
    echo "install-packages.sh: all ${#pkgs[@]} packages of $LIST are installed already"
    exit 0
fi

# no service may start while packages are configured (there is no init here)
printf '#!/bin/sh\nexit 101\n' >/usr/sbin/policy-rc.d
chmod 755 /usr/sbin/policy-rc.d

export DEBIAN_FRONTEND=noninteractive
apt-get update -q || die "apt-get update failed (network or apt sources?)"
apt-get install -y -q --no-install-recommends "${missing[@]}" || die "apt-get install of ${missing[*]} failed"
# what a test system never reads
apt-get clean
rm -rf /usr/share/doc/* /usr/share/man/* /usr/share/info/* /usr/share/locale/* /var/lib/apt/lists/*
echo "install-packages.sh: installed ${#missing[@]} packages of $LIST"
