#!/usr/bin/env bash
# Installs this hostd checkout as a system service: `hostd` and `hostctl` on
# the PATH, /etc/hostd/config.yaml (from deploy/config.example.yaml, kept if
# it exists), /var/lib/hostd, and the systemd unit. Run it as root after
# `npm ci` (which builds dist/). Safe to run again.
#
#   sudo deploy/install.sh [--enable] [--bin-dir DIR] [--etc-dir DIR] [--unit-dir DIR] [--data-dir DIR] [--no-systemctl]
#
# --enable starts the service now and at boot. The other options install
# elsewhere (a staging tree, the test suite); the defaults are /usr/local/bin,
# /etc/hostd, /etc/systemd/system and /var/lib/hostd.
set -euo pipefail

ROOT="$(cd "$(dirname "$0")/.." && pwd)"
BIN_DIR=/usr/local/bin
ETC_DIR=/etc/hostd
UNIT_DIR=/etc/systemd/system
DATA_DIR=/var/lib/hostd
ENABLE=0
SYSTEMCTL=1
while [ $# -gt 0 ]; do
  case "$1" in
    --bin-dir) BIN_DIR="$2"; shift 2 ;;
    --etc-dir) ETC_DIR="$2"; shift 2 ;;
    --unit-dir) UNIT_DIR="$2"; shift 2 ;;
    --data-dir) DATA_DIR="$2"; shift 2 ;;
    --enable) ENABLE=1; shift ;;
    --no-systemctl) SYSTEMCTL=0; shift ;;
    -h|--help) sed -n '2,12p' "$0"; exit 0 ;;
    *) echo "install: unknown argument '$1'" >&2; exit 2 ;;
  esac
done

if [ ! -f "$ROOT/dist/daemon/main.js" ]; then
  echo "install: $ROOT/dist is missing: run 'npm ci' in $ROOT first" >&2
  exit 1
fi

# The commands: links to this checkout's bin/, so `npm ci` after a pull updates them.
install -d "$BIN_DIR"
ln -sfn "$ROOT/bin/hostd.js" "$BIN_DIR/hostd"
ln -sfn "$ROOT/bin/hostctl.js" "$BIN_DIR/hostctl"

# The one configuration. An existing file is the operator's: never overwritten.
install -d -m 0755 "$ETC_DIR"
CONFIG="$ETC_DIR/config.yaml"
if [ ! -e "$CONFIG" ]; then
  sed -e "s|^data_dir: .*|data_dir: $DATA_DIR|" "$ROOT/deploy/config.example.yaml" > "$CONFIG"
  chmod 0644 "$CONFIG"
  echo "install: wrote $CONFIG (edit pools and addresses there)"
else
  echo "install: kept $CONFIG"
fi
install -d -m 0700 "$DATA_DIR"

# The unit, pointing at these paths.
install -d "$UNIT_DIR"
sed -e "s|/usr/local/bin/hostd|$BIN_DIR/hostd|g" \
    -e "s|/etc/hostd/config.yaml|$CONFIG|g" \
    -e "s|/opt/hostd|$ROOT|g" \
    "$ROOT/deploy/hostd.service" > "$UNIT_DIR/hostd.service"
echo "install: wrote $UNIT_DIR/hostd.service"

if [ "$SYSTEMCTL" = 1 ] && command -v systemctl >/dev/null 2>&1 && [ -d /run/systemd/system ]; then
  systemctl daemon-reload
  if [ "$ENABLE" = 1 ]; then
    systemctl enable --now hostd
    echo "install: hostd enabled and started (journalctl -u hostd -f)"
  else
    echo "install: start it with: systemctl enable --now hostd"
  fi
fi
echo "install: hostd and hostctl are in $BIN_DIR; hostctl reads $CONFIG to find the daemon"
