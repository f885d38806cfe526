#!/usr/bin/env bash
# Installs the host programs hostd drives (and the test suite exercises) from
# Debian's packages. Safe to run again. Used by .ci/run and by operators.
set -euo pipefail
PKGS=(
  iproute2        # network namespaces for cluster tests; `ip` for VIPs
  curl            # cluster fault tests: HTTP clients run inside network namespaces
  procps
  qemu-system-x86 # VMs: qemu-system-x86_64, and qemu-storage-daemon (writes a new VM's identity before first boot)
  qemu-utils      # VMs: qemu-img (disks, linked clones, copies, templates)
  e2fsprogs       # VMs: debugfs (identity into ext4 root filesystems, no loop device needed)
  genisoimage     # VMs: the cloud-init NoCloud seed ISO
  openssl         # VMs: SHA-512 crypt of cloud-init passwords (through stdin)
  debootstrap     # VM tests: builds the Debian test guest (cached in /var/cache/hostd-test/vms)
)
if [ "$(id -u)" -ne 0 ]; then
  echo "install-deps: run as root (apt-get)" >&2
  exit 1
fi
missing=()
for p in "${PKGS[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ "${#missing[@]}" -gt 0 ]; then
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi
echo "install-deps: ok (${PKGS[*]})"
