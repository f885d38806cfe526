#!/usr/bin/env bash
# A three-node hostd cluster on this machine, for trying it out: three daemons
# on loopback ports with their own data dirs, paired, and one API token that
# works on all three through peer_id.
#
#   deploy/cluster-local.sh [--dir DIR] [--base-port PORT]   start (or resume) and pair
#   deploy/cluster-local.sh --stop [--dir DIR]               stop the three daemons
#
# Node i (1..3) listens for HTTP on 127.0.0.1:(PORT + 10*(i-1)) and for cluster
# peers on the next port up. Data dirs: DIR/node1..node3 (default DIR is
# /tmp/hostd-local-cluster, default PORT 18700). Running it again reuses the
# data dirs: the cluster is kept and a fresh token is printed.
set -euo pipefail

ROOT="$(cd "$(dirname "$0")/.." && pwd)"
DIR="${HOSTD_LOCAL_CLUSTER_DIR:-/tmp/hostd-local-cluster}"
BASE=18700
STOP=0
while [ $# -gt 0 ]; do
  case "$1" in
    --dir) DIR="$2"; shift 2 ;;
    --base-port) BASE="$2"; shift 2 ;;
    --stop) STOP=1; shift ;;
    -h|--help) sed -n '2,13p' "$0"; exit 0 ;;
    *) echo "cluster-local: unknown argument '$1'" >&2; exit 2 ;;
  esac
done

hostctl() { node "$ROOT/bin/hostctl.js" "$@"; }
http_port() { echo $((BASE + 10 * ($1 - 1))); }
cluster_port() { echo $((BASE + 10 * ($1 - 1) + 1)); }
alive() { [ -f "$DIR/node$1/hostd.pid" ] && kill -0 "$(cat "$DIR/node$1/hostd.pid")" 2>/dev/null; }

if [ "$STOP" = 1 ]; then
  for i in 1 2 3; do
    if alive "$i"; then
      pid="$(cat "$DIR/node$i/hostd.pid")"
      kill "$pid"
      for _ in $(seq 1 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
      echo "stopped node$i (pid $pid)"
    fi
    rm -f "$DIR/node$i/hostd.pid"
  done
  exit 0
fi

if [ ! -f "$ROOT/dist/daemon/main.js" ]; then
  echo "cluster-local: building (npm run build)" >&2
  (cd "$ROOT" && npm run --silent build)
fi

for i in 1 2 3; do
  d="$DIR/node$i"
  mkdir -p "$d"
  if alive "$i"; then continue; fi
  : > "$d/hostd.log"
  HOSTD_DATA_DIR="$d" \
  HOSTD_HTTP_ADDR="127.0.0.1:$(http_port "$i")" \
  HOSTD_CLUSTER_ADDR="127.0.0.1:$(cluster_port "$i")" \
  HOSTD_NODE_NAME="local-$i" \
    nohup node "$ROOT/dist/daemon/main.js" >>"$d/hostd.log" 2>&1 &
  echo $! > "$d/hostd.pid"
done
for i in 1 2 3; do
  for _ in $(seq 1 100); do
    grep -q '"hostd listening"' "$DIR/node$i/hostd.log" 2>/dev/null && break
    alive "$i" || { echo "cluster-local: node$i exited; see $DIR/node$i/hostd.log" >&2; tail -5 "$DIR/node$i/hostd.log" >&2; exit 1; }
    sleep 0.1
  done
done

status_field() { # node field
  hostctl --data-dir "$DIR/node$1" cluster status --json | node -e 'let s="";process.stdin.on("data",d=>s+=d).on("end",()=>{const v=JSON.parse(s)[process.argv[1]];process.stdout.write(String(v))})' "$2"
}

if [ "$(status_field 1 in_cluster)" != "true" ]; then
  hostctl --data-dir "$DIR/node1" cluster init >&2
fi
for i in 2 3; do
  if [ "$(status_field "$i" in_cluster)" != "true" ]; then
    token="$(hostctl --data-dir "$DIR/node1" cluster join-token)"
    hostctl --data-dir "$DIR/node$i" cluster join "127.0.0.1:$(cluster_port 1)" "$token" >&2
  fi
done

name="try-$(date +%Y%m%d-%H%M%S)"
secret="$(hostctl --data-dir "$DIR/node1" token create --name "$name" \
  --scopes files.read,files.manage,system.read,vm.read,vm.manage,proxy.read,proxy.manage,apps.read,lxc.read,sandbox.read,connections.read)"

ids=()
for i in 1 2 3; do ids+=("$(status_field "$i" node_id)"); done

cat <<EOF

hostd local cluster is up (data under $DIR)
  node1  ${ids[0]}  http://127.0.0.1:$(http_port 1)  cluster 127.0.0.1:$(cluster_port 1)
  node2  ${ids[1]}  http://127.0.0.1:$(http_port 2)  cluster 127.0.0.1:$(cluster_port 2)
  node3  ${ids[2]}  http://127.0.0.1:$(http_port 3)  cluster 127.0.0.1:$(cluster_port 3)

token ($name, made on node1; it works on all three through peer_id):
  $secret

try:
  export TOKEN='$secret'
  curl -s -H "Authorization: Bearer \$TOKEN" http://127.0.0.1:$(http_port 1)/api/v1/peers
  curl -s -H "Authorization: Bearer \$TOKEN" "http://127.0.0.1:$(http_port 1)/api/v1/folders?peer_id=${ids[2]}"
  curl -s -H "Authorization: Bearer \$TOKEN" -H 'content-type: application/json' \\
       -d '{"storage_id":"default","name":"hello","peer_id":"${ids[1]}"}' http://127.0.0.1:$(http_port 1)/api/v1/folders
  node $ROOT/bin/hostctl.js --data-dir $DIR/node2 cluster status

stop with: $0 --stop${DIR:+ --dir $DIR}
EOF
