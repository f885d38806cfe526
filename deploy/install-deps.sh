#!/usr/bin/env bash
# Installs the host programs hostd drives (and the test suite exercises) from
# Debian's packages. Safe to run again. Used by .ci/run and by operators.
set -euo pipefail
PKGS=(
  iproute2        # network namespaces for cluster tests; `ip` for VIPs
  curl            # cluster fault tests: HTTP clients run inside network namespaces
  procps
  lxc             # LXC containers (lxc-start, lxc-attach, lxc-usernsexec, ...): the lxc domain's runtime
  uidmap          # newuidmap/newgidmap: id maps of unprivileged LXC containers
  acl             # setfacl: traverse rights for unprivileged containers' root on directories above a rootfs
  e2fsprogs       # mkfs.ext4, resize2fs, e2fsck, dumpe2fs: LXC disk limits (a loop-mounted ext4 image per container)
  xz-utils        # xz: LXC image tarballs (root.tar.xz)
  zstd            # captured LXC templates are zstd-compressed tarballs
  busybox-static  # the LXC tests' container image (built once, cached under /var/cache/hostd-test/lxc)
  util-linux      # nsenter, unshare, mount, losetup: LXC network and disk tests
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
# Unprivileged LXC containers: LXC (run as root, with newuidmap on the system) insists that root owns
# the mapped id range in /etc/subuid and /etc/subgid. Add the usual one when root has none.
if ! grep -q '^root:' /etc/subuid 2>/dev/null || ! grep -q '^root:' /etc/subgid 2>/dev/null; then
  usermod --add-subuids 100000-165535 --add-subgids 100000-165535 root
fi
echo "install-deps: ok (${PKGS[*]})"
