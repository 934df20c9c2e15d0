#!/usr/bin/env bash
# A local Redis (the Celery broker) from Debian's packages. Its queues are kept in an
# append-only file (fsync every second), so a restart loses no Celery message.
#   redis.sh start|stop|status|url         (STATE_DIR, REDIS_PORT override the defaults)
set -euo pipefail
state="${STATE_DIR:-${TOCK_HOME:-$HOME/.tock}}/redis"
port="${REDIS_PORT:-6379}"
url="redis://127.0.0.1:$port/0"

install_if_missing() {
  command -v redis-server >/dev/null && return 0
  echo "redis.sh: installing Redis from Debian's packages" >&2
  if [[ -z "$(ls /var/lib/apt/lists/*Packages* 2>/dev/null | head -1)" ]]; then apt-get update -q >/dev/null; fi
  DEBIAN_FRONTEND=noninteractive apt-get install -y -q redis-server >/dev/null
}

running() { redis-cli -h 127.0.0.1 -p "$port" ping 2>/dev/null | grep -q PONG; }

start() {
  install_if_missing
  mkdir -p "$state"
  if ! running; then
    redis-server --bind 127.0.0.1 --port "$port" --daemonize yes --dir "$state" \
      --pidfile "$state/redis.pid" --logfile "$state/redis.log" --save "" \
      --appendonly yes --appendfsync everysec
    for _ in $(seq 100); do running && break; sleep 0.1; done
    running || { echo "redis.sh: redis did not start; see $state/redis.log" >&2; exit 1; }
  fi
  echo "$url"
}

stop() { if running; then redis-cli -h 127.0.0.1 -p "$port" shutdown nosave >/dev/null 2>&1 || true; fi; }

case "${1:-}" in
  start) start ;;
  stop) stop ;;
  status) if running; then echo "running at $url"; else echo "stopped"; exit 3; fi ;;
  url) echo "$url" ;;
  *) echo "usage: $0 start|stop|status|url" >&2; exit 2 ;;
esac
