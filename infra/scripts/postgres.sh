#!/usr/bin/env bash
# A local PostgreSQL for Tock's tests and `make run`, from Debian's packages.
#   postgres.sh start|stop|status|url      (PG_PORT, PG_STATE_DIR override the defaults)
# Installs the package when missing and runs its own cluster as the postgres user on
# 127.0.0.1:PG_PORT, trust auth, loopback only. The cluster lives in PG_STATE_DIR
# (default /var/tmp/tock-postgres-PORT): the postgres user must be able to reach it,
# which a checkout under /root would not allow.
set -euo pipefail
port="${PG_PORT:-5433}"
state="${PG_STATE_DIR:-/var/tmp/tock-postgres-$port}"
url="postgresql://tock@127.0.0.1:$port/tock"

bindir() { ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -1; }

install_if_missing() {
  [[ -n "$(bindir)" ]] && return 0
  echo "postgres.sh: installing PostgreSQL from Debian's packages" >&2
  if [[ ! -d /var/lib/apt/lists/partial || -z "$(ls /var/lib/apt/lists/*Packages* 2>/dev/null | head -1)" ]]; then
    apt-get update -q >/dev/null
  fi
  DEBIAN_FRONTEND=noninteractive apt-get install -y -q postgresql >/dev/null
}

as_pg() { if [[ "$(id -u)" == 0 ]]; then runuser -u postgres -- "$@"; else "$@"; fi; }

# Ready = answering on our port; a postmaster.pid alone may be stale (its pid reused by now).
running() { [[ -n "$(bindir)" ]] && "$(bindir)/pg_isready" -q -h 127.0.0.1 -p "$port"; }

start() {
  install_if_missing
  local bin; bin="$(bindir)"
  mkdir -p "$state"
  [[ "$(id -u)" == 0 ]] && chown postgres:postgres "$state"
  if [[ ! -f "$state/data/PG_VERSION" ]]; then
    as_pg "$bin/initdb" -D "$state/data" -U postgres --auth=trust -E UTF8 >/dev/null
  fi
  if ! running; then
    # Nothing answers on our port: lock files left by a server killed with its session are stale.
    rm -f "$state/data/postmaster.pid" "$state"/.s.PGSQL.*.lock
    as_pg "$bin/pg_ctl" -D "$state/data" -l "$state/server.log" -w -t 60 start \
      -o "-c listen_addresses=127.0.0.1 -p $port -c unix_socket_directories=$state -c fsync=off -c max_connections=200" >/dev/null
  fi
  as_pg "$bin/psql" -h 127.0.0.1 -p "$port" -U postgres -tAc "SELECT 1 FROM pg_roles WHERE rolname='tock'" | grep -q 1 \
    || as_pg "$bin/psql" -h 127.0.0.1 -p "$port" -U postgres -qc "CREATE ROLE tock LOGIN SUPERUSER"
  as_pg "$bin/psql" -h 127.0.0.1 -p "$port" -U postgres -tAc "SELECT 1 FROM pg_database WHERE datname='tock'" | grep -q 1 \
    || as_pg "$bin/psql" -h 127.0.0.1 -p "$port" -U postgres -qc "CREATE DATABASE tock OWNER tock"
  echo "$url"
}

stop() { if running; then as_pg "$(bindir)/pg_ctl" -D "$state/data" -w -m fast stop >/dev/null; fi; }

case "${1:-}" in
  start) start ;;
  stop) stop ;;
  status) if running; then echo "running at $url"; else echo "stopped"; exit 3; fi ;;
  url) echo "$url" ;;
  *) echo "usage: $0 start|stop|status|url" >&2; exit 2 ;;
esac
