#!/usr/bin/env bash
# Installs the host programs hostd drives (and the test suite exercises) from
# Debian's packages. Safe to run again. Used by .ci/run and by operators.
set -euo pipefail
PKGS=(
  iproute2        # network namespaces for cluster tests; `ip` for VIPs
  curl            # cluster fault tests: HTTP clients run inside network namespaces
  procps
  samba           # locations tests: the SMB server (smbd, nmbd) they start in a network namespace
  smbclient       # locations: the probe before a mount, share listing (discover), bench baseline
  cifs-utils      # locations: mount.cifs, the kernel route on hosts whose kernel has CIFS
  smbnetfs        # locations: the FUSE route where the kernel has no CIFS
  fuse3           # smbnetfs's mounts: /dev/fuse and fusermount
  util-linux      # locations: nsenter (tests run hostd in the test's network namespace), umount
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
