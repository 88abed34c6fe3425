#!/usr/bin/env bash
# Throwaway PostgreSQL and Chroma servers on loopback, for the scale-out tests and benchmarks.
#
#   eval "$(bash scripts/servers.sh start [DIR])"   # starts both, prints the export lines
#   bash scripts/servers.sh stop [DIR]               # stops both (safe to call twice, or on a failed start)
#
# PostgreSQL comes from the system packages (installed with apt-get when initdb is missing and we are root);
# the cluster lives in DIR/pg (initdb + pg_ctl, no root service, trust auth on 127.0.0.1 only).
# Chroma is `chroma run` from the project's venv, its data in DIR/chroma.
# The exported variables are what the tests and `rag eval` read:
#   RAG_TEST_DATABASE_URL  postgresql://rag@127.0.0.1:PORT/rag
#   RAG_TEST_CHROMA_HOST / RAG_TEST_CHROMA_PORT
set -euo pipefail
cd "$(dirname "$0")/.."
ACTION="${1:-}"
DIR="${2:-${RAG_SERVERS_DIR:-/tmp/rag-servers}}"
VENV_BIN="${VENV_BIN:-$PWD/.venv/bin}"

pg_bin() {
  # The newest PostgreSQL's bin folder: Debian keeps them under /usr/lib/postgresql/<major>/bin.
  local found
  if command -v initdb >/dev/null 2>&1; then dirname "$(readlink -f "$(command -v initdb)")"; return; fi
  found=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n 1 || true)
  if [ -n "$found" ]; then echo "$found"; return; fi
  return 1
}

install_postgres() {
  if pg_bin >/dev/null; then return; fi
  if [ "$(id -u)" != 0 ]; then
    echo "PostgreSQL is not installed and this is not root: apt-get install postgresql" >&2; exit 1
  fi
  echo "installing PostgreSQL from the system packages" >&2
  DEBIAN_FRONTEND=noninteractive apt-get update -qq >&2
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends postgresql >&2
}

free_port() {
  python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

start() {
  install_postgres
  local bin pg_port chroma_port user
  bin=$(pg_bin)
  mkdir -p "$DIR"
  # initdb refuses to run as root: the cluster belongs to an unprivileged user when we are root.
  user=$(id -un)
  if [ "$(id -u)" = 0 ]; then
    user=postgres
    id postgres >/dev/null 2>&1 || useradd --system --no-create-home postgres
    chown "$user" "$DIR"
    # The cluster's user must be able to reach DIR: let it through folders such as mktemp's (mode 700).
    local up="$DIR"
    while [ "$up" != / ]; do up=$(dirname "$up"); chmod o+x "$up" 2>/dev/null || true; done
  fi
  run_as() { if [ "$user" = "$(id -un)" ]; then "$@"; else su -s /bin/sh "$user" -c "$(printf '%q ' "$@")"; fi; }
  if [ ! -f "$DIR/pg/PG_VERSION" ]; then
    run_as "$bin/initdb" -D "$DIR/pg" -U rag --auth=trust -E UTF8 --locale=C.UTF-8 >"$DIR/initdb.log" 2>&1 \
      || { cat "$DIR/initdb.log" >&2; exit 1; }
  fi
  pg_port=$(free_port)
  run_as "$bin/pg_ctl" -D "$DIR/pg" -l "$DIR/pg.log" -w -t 60 \
    -o "-c listen_addresses=127.0.0.1 -p $pg_port -k $DIR -c max_connections=200 -c fsync=off" start >&2
  echo "$pg_port" >"$DIR/pg.port"
  run_as "$bin/createdb" -h 127.0.0.1 -p "$pg_port" -U rag rag 2>/dev/null || true
  chroma_port=$(free_port)
  mkdir -p "$DIR/chroma"
  # setsid + all three descriptors redirected: the caller's $(...) must not wait for the server to exit.
  ANONYMIZED_TELEMETRY=False setsid "$VENV_BIN/chroma" run --path "$DIR/chroma" \
    --host 127.0.0.1 --port "$chroma_port" </dev/null >"$DIR/chroma.log" 2>&1 &
  echo $! >"$DIR/chroma.pid"
  for _ in $(seq 1 120); do
    if python3 -c "import urllib.request,sys; urllib.request.urlopen('http://127.0.0.1:$chroma_port/api/v2/heartbeat', timeout=1)" 2>/dev/null; then
      break
    fi
    sleep 0.5
  done
  python3 -c "import urllib.request; urllib.request.urlopen('http://127.0.0.1:$chroma_port/api/v2/heartbeat', timeout=2)" \
    || { echo "chroma did not start; see $DIR/chroma.log" >&2; tail -n 20 "$DIR/chroma.log" >&2; exit 1; }
  echo "export RAG_TEST_DATABASE_URL=postgresql://rag@127.0.0.1:$pg_port/rag"
  echo "export RAG_TEST_CHROMA_HOST=127.0.0.1"
  echo "export RAG_TEST_CHROMA_PORT=$chroma_port"
  echo "export RAG_SERVERS_DIR=$DIR"
}

stop() {
  local bin user
  if [ -f "$DIR/chroma.pid" ]; then
    kill "$(cat "$DIR/chroma.pid")" 2>/dev/null || true
    rm -f "$DIR/chroma.pid"
  fi
  if [ -f "$DIR/pg/postmaster.pid" ] && bin=$(pg_bin); then
    user=$(stat -c %U "$DIR/pg")
    if [ "$user" = "$(id -un)" ]; then
      "$bin/pg_ctl" -D "$DIR/pg" -m immediate stop >/dev/null 2>&1 || true
    else
      su -s /bin/sh "$user" -c "'$bin/pg_ctl' -D '$DIR/pg' -m immediate stop" >/dev/null 2>&1 || true
    fi
  fi
}

case "$ACTION" in
  start) start ;;
  stop) stop ;;
  *) echo "usage: $0 start|stop [DIR]" >&2; exit 2 ;;
esac
