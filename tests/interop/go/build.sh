#!/usr/bin/env bash
# Builds tock-go-reader (main.go: franz-go + hamba/avro, no Tock code) from the Go module proxy into
#   ~/.cache/tock/interop/goreader-<hash of its sources>/tock-go-reader     (TOCK_INTEROP_CACHE overrides)
# and prints the binary's path; a later call with the same sources returns at once (~1 minute cold).
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
command -v go >/dev/null || { echo "build.sh: Go is needed to build the Go reader" >&2; exit 1; }
digest="$(cat "$here/main.go" "$here/go.mod" "$here/go.sum" | sha256sum | cut -c1-16)"
out="${TOCK_INTEROP_CACHE:-$HOME/.cache/tock/interop}/goreader-$digest"
if [[ -x "$out/tock-go-reader" ]]; then echo "$out/tock-go-reader"; exit 0; fi
export GOTOOLCHAIN=local GOFLAGS="-buildvcs=false -mod=readonly" CGO_ENABLED=0
mkdir -p "$out"
(cd "$here" && go build -trimpath -o "$out/tock-go-reader.tmp" .)
mv "$out/tock-go-reader.tmp" "$out/tock-go-reader"
echo "$out/tock-go-reader"
