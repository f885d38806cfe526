#!/usr/bin/env bash
# Installs the host programs hostd drives (and the test suite exercises) from
# Debian's packages. Safe to run again. Used by .ci/run and by operators.
set -euo pipefail
PKGS=(
  iproute2        # network namespaces for cluster tests; `ip` for VIPs
  curl            # cluster fault tests: HTTP clients run inside network namespaces
  procps
  caddy           # proxy: the reverse proxy hostd runs on the lease holder (2.6.2 in bookworm)
  iputils-arping  # proxy: duplicate-address probe and gratuitous ARP for the floating address
  util-linux      # proxy: setpriv ties Caddy and the address guard to hostd's life (pdeathsig)
  bind9-dnsutils  # proxy tests: dig queries the built-in DNS responder
  openssl         # proxy tests: read the certificate Caddy serves
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
