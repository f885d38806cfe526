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
  docker.io       # apps: the Docker engine (dockerd, containerd, runc, docker-proxy, docker-init)
  busybox-static  # apps and LXC tests: the rootfs of their test images (no registry is reachable)
  util-linux      # nsenter/unshare (locations, apps, LXC tests), mount/umount/losetup, setpriv (proxy: Caddy dies with hostd)
  caddy           # proxy: the reverse proxy hostd runs on the lease holder (2.6.2 in bookworm)
  iputils-arping  # proxy: duplicate-address probe and gratuitous ARP for the floating address
  bind9-dnsutils  # proxy tests: dig queries the built-in DNS responder
  openssl         # proxy tests: read the certificate Caddy serves; VMs: SHA-512 crypt of cloud-init passwords (stdin)
  lxc             # LXC containers (lxc-start, lxc-attach, lxc-usernsexec, ...): the lxc domain's runtime
  uidmap          # newuidmap/newgidmap: id maps of unprivileged LXC containers
  acl             # setfacl: traverse rights for unprivileged containers' root on directories above a rootfs
  e2fsprogs       # LXC disk limits (mkfs.ext4, resize2fs, e2fsck: a loop-mounted ext4 image per container); VMs: debugfs (identity into ext4 roots, no loop device)
  xz-utils        # xz: LXC image tarballs (root.tar.xz)
  zstd            # captured LXC templates are zstd-compressed tarballs
  qemu-system-x86 # VMs: qemu-system-x86_64, and qemu-storage-daemon (writes a new VM's identity before first boot)
  qemu-utils      # VMs: qemu-img (disks, linked clones, copies, templates)
  genisoimage     # VMs: the cloud-init NoCloud seed ISO
  python3-yaml    # VM tests: cloud-init's own YAML loader reads the seed hostd writes
  debootstrap     # VM tests: builds the Debian test guest (cached in /var/cache/hostd-test/vms)
  prometheus      # metrics tests: promtool checks the exposition; a real Prometheus scrapes two members
  chromium        # console tests: the real browser playwright-core drives (loopback only)
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

# apps: compose v2. Bookworm only has compose v1 (docker-compose 1.29.2); trixie's
# docker-compose 2.x .deb is a static Go binary that runs here. It is fetched with a
# private apt configuration (nothing is added to the system's sources) and only its
# cli-plugins binary is extracted, to where the docker CLI and hostd look for it.
COMPOSE_PLUGIN=/usr/local/lib/docker/cli-plugins/docker-compose
if ! "$COMPOSE_PLUGIN" version --short 2>/dev/null | grep -qE '^v?2\.'; then
  apt_dir=/var/cache/hostd-apt-trixie
  mkdir -p "$apt_dir/lists/partial" "$apt_dir/cache/archives/partial"
  echo "deb [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] http://deb.debian.org/debian trixie main" > "$apt_dir/sources.list"
  apt_opts=(-o "Dir::Etc::SourceList=$apt_dir/sources.list" -o Dir::Etc::SourceParts=/dev/null
            -o "Dir::State::Lists=$apt_dir/lists" -o "Dir::Cache=$apt_dir/cache" -o APT::Get::List-Cleanup=0)
  apt-get "${apt_opts[@]}" update -qq
  work=$(mktemp -d)
  chmod 755 "$work"   # apt downloads as _apt
  (cd "$work" && apt-get "${apt_opts[@]}" download -qq docker-compose)
  dpkg-deb -x "$work"/docker-compose_*.deb "$work/x"
  install -D -m 0755 "$work/x/usr/libexec/docker/cli-plugins/docker-compose" "$COMPOSE_PLUGIN"
  rm -rf "$work"
fi

# Unprivileged LXC containers: LXC (run as root, with newuidmap on the system) insists that root owns
# the mapped id range in /etc/subuid and /etc/subgid. Add the usual one when root has none.
if ! grep -q '^root:' /etc/subuid 2>/dev/null || ! grep -q '^root:' /etc/subgid 2>/dev/null; then
  usermod --add-subuids 100000-165535 --add-subgids 100000-165535 root
fi
echo "install-deps: ok (${PKGS[*]}; compose $("$COMPOSE_PLUGIN" version --short))"
