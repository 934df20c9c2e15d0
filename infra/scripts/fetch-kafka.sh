#!/usr/bin/env bash
# Resolve the Kafka broker jars from Maven Central into a cache directory.
# Idempotent: a complete cache (marked by .complete) is reused as is.
set -euo pipefail
here="$(cd "$(dirname "$0")/.." && pwd)"
libs="${1:?usage: fetch-kafka.sh LIBS_DIR}"
version="$(sed -n 's:.*<kafka.version>\(.*\)</kafka.version>.*:\1:p' "$here/kafka/pom.xml")"
if [[ -f "$libs/.complete" && "$(cat "$libs/.complete")" == "$version" ]]; then
  exit 0
fi
command -v java >/dev/null || { echo "fetch-kafka: java not found; install a JDK 17+ (apt-get install openjdk-17-jre-headless)" >&2; exit 1; }
command -v mvn  >/dev/null || { echo "fetch-kafka: mvn not found; install Maven (apt-get install maven)" >&2; exit 1; }
echo "fetch-kafka: resolving Apache Kafka $version jars from Maven Central into $libs"
rm -rf "$libs.tmp"
mkdir -p "$libs.tmp"
mvn -B -q -f "$here/kafka/pom.xml" dependency:copy-dependencies \
    -DincludeScope=runtime -DoutputDirectory="$libs.tmp"
rm -rf "$libs"
mv "$libs.tmp" "$libs"
echo "$version" > "$libs/.complete"
echo "fetch-kafka: $(ls "$libs"/*.jar | wc -l) jars ready"
