#!/usr/bin/env bash
# Tock's schema registry: Apicurio Registry, built from Maven Central artifacts by
# infra/registry (mvn + Quarkus) and served through its Confluent-compatible API on loopback.
# Schemas live in the PostgreSQL of postgres.sh (database tock_registry), so ids survive restarts.
#   schema-registry.sh build|start|stop|status|url
# REGISTRY_PORT (8085), TOCK_HOME (logs, pid; default <repo>/.tock), PG_PORT (5433) and
# REGISTRY_START_TIMEOUT (seconds, 180) override the defaults. The JVM keeps to -Xmx512m.
set -euo pipefail
repo="$(cd "$(dirname "$0")/../.." && pwd)"
project="$repo/infra/registry"
version="$(sed -n 's:.*<apicurio.version>\(.*\)</apicurio.version>.*:\1:p' "$project/app/pom.xml")"
cache="${XDG_CACHE_HOME:-$HOME/.cache}/tock/apicurio-registry-$version"
state="${TOCK_HOME:-$repo/.tock}/schema-registry"
port="${REGISTRY_PORT:-8085}"
pg_port="${PG_PORT:-5433}"
database=tock_registry
timeout="${REGISTRY_START_TIMEOUT:-180}"
url="http://127.0.0.1:$port/apis/ccompat/v7"

# The build is redone when infra/registry changes, not only when the version does.
build_stamp() { (cd "$project" && find . -type f ! -path '*/target/*' ! -name '*.md' | LC_ALL=C sort | xargs sha256sum | sha256sum | cut -c1-16); }

built() { [[ -f "$cache/.complete" && "$(cat "$cache/.complete")" == "$(build_stamp)" ]]; }

build() {
  built && return 0
  ours && { echo "schema-registry.sh: infra/registry changed while the registry runs from the old build; stop it first" >&2; exit 1; }
  command -v java >/dev/null || { echo "schema-registry.sh: java not found; install a JDK 17+ (apt-get install openjdk-17-jdk-headless)" >&2; exit 1; }
  command -v mvn >/dev/null || { echo "schema-registry.sh: mvn not found; install Maven (apt-get install maven)" >&2; exit 1; }
  echo "schema-registry.sh: building Apicurio Registry $version from Maven Central into $cache" >&2
  rm -rf "$cache.tmp"
  mkdir -p "$cache.tmp"
  if ! mvn -B -q -f "$project/pom.xml" -Dbuild.dir="$cache.tmp/build" package >"$cache.tmp/build.log" 2>&1; then
    echo "schema-registry.sh: the build failed; see $cache.tmp/build.log" >&2
    tail -20 "$cache.tmp/build.log" >&2
    exit 1
  fi
  mv "$cache.tmp/build/app/quarkus-app" "$cache.tmp/quarkus-app"
  rm -rf "$cache.tmp/build" "$cache"
  mv "$cache.tmp" "$cache"
  build_stamp > "$cache/.complete"
}

# One registry per port, each with its pid file and log.
pid_file="$state/registry-$port.pid"
log_file="$state/registry-$port.log"

pid() { cat "$pid_file" 2>/dev/null || true; }

# Ours = the pid file's process runs our build's jar on our port (a recycled pid does not).
ours() {
  local pid command; pid="$(pid)"
  [[ -n "$pid" ]] || return 1
  command="$(tr '\0' ' ' 2>/dev/null < "/proc/$pid/cmdline")" || return 1
  [[ "$command" == *"-Dquarkus.http.port=$port "*"-jar $cache/quarkus-app/quarkus-run.jar"* ]]
}

ready() { curl -sf -o /dev/null --max-time 2 "http://127.0.0.1:$port/health/ready"; }

port_taken() { (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; }

ensure_database() {
  bash "$repo/infra/scripts/postgres.sh" start >/dev/null 9>&-
  local psql; psql="$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -1)/psql"
  local query=("$psql" -h 127.0.0.1 -p "$pg_port" -U tock -d tock -tAc)
  "${query[@]}" "SELECT 1 FROM pg_database WHERE datname='$database'" | grep -q 1 \
    || "${query[@]}" "CREATE DATABASE $database OWNER tock" >/dev/null
}

launch() {
  mkdir -p "$state"
  # Apicurio's own properties: SQL storage on PostgreSQL (it creates its tables on first start),
  # small pools; -D settings beat the defaults built into the app.
  setsid java -Xms64m -Xmx512m -XX:+UseSerialGC -XX:TieredStopAtLevel=1 \
    -Dquarkus.http.host=127.0.0.1 -Dquarkus.http.port="$port" \
    -Dapicurio.app.name="Tock schema registry" \
    -Dapicurio.storage.kind=sql -Dapicurio.storage.sql.kind=postgresql \
    -Dapicurio.datasource.url="jdbc:postgresql://127.0.0.1:$pg_port/$database" \
    -Dapicurio.datasource.username=tock -Dapicurio.datasource.password=tock \
    -Dapicurio.datasource.jdbc.initial-size=1 -Dapicurio.datasource.jdbc.min-size=1 \
    -Dapicurio.datasource.jdbc.max-size=10 \
    -Dapicurio.import.work-dir="$state" -Dapicurio.storage.snapshot.location="$state" \
    -jar "$cache/quarkus-app/quarkus-run.jar" >>"$log_file" 2>&1 </dev/null 9>&- &
  echo $! > "$pid_file"
}

start() {
  if ! ours; then
    build
    port_taken && { echo "schema-registry.sh: port $port is taken by another process; set REGISTRY_PORT" >&2; exit 1; }
    ensure_database
    launch
  fi
  local deadline=$((SECONDS + timeout))
  until ready; do
    ours || { echo "schema-registry.sh: the registry exited during start-up; see $log_file" >&2; tail -20 "$log_file" >&2; exit 1; }
    (( SECONDS < deadline )) || { echo "schema-registry.sh: not healthy within ${timeout}s; see $log_file" >&2; exit 1; }
    sleep 0.2
  done
  echo "$url"
}

stop() {
  ours || { rm -f "$pid_file"; return 0; }
  local pid; pid="$(pid)"
  kill "$pid"
  for _ in $(seq 150); do kill -0 "$pid" 2>/dev/null || break; sleep 0.2; done
  kill -0 "$pid" 2>/dev/null && kill -9 "$pid"
  rm -f "$pid_file"
}

# One start or stop at a time (make test's three pytest lanes may all ask for the registry at once). What
# start launches gets 9>&-: a server that inherited the lock's descriptor would hold it for ever.
locked() { mkdir -p "$state"; exec 9>"$state/registry-$port.lock"; flock 9; "$@"; }

case "${1:-}" in
  build) build; echo "$cache/quarkus-app" ;;
  start) locked start ;;
  stop) locked stop ;;
  status) if ours && ready; then echo "running (pid $(pid)) at $url"; elif ours; then echo "starting (pid $(pid))"; exit 3; else echo "stopped"; exit 3; fi ;;
  url) echo "$url" ;;
  *) echo "usage: $0 build|start|stop|status|url" >&2; exit 2 ;;
esac
