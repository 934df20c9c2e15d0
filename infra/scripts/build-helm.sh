#!/usr/bin/env bash
# Builds the real `helm` CLI from the Go module proxy, once per machine, into
#   ~/.cache/tock/helm/v<HELM_VERSION>/bin/helm     (TOCK_HELM_CACHE overrides the root)
# and prints the binary's path. A cold build takes ~4 minutes on 2 cores; later calls return
# at once. helm.sh/helm/v4 has no replace directives, so `go install module@version` builds it
# straight from the proxy (no wrapper module); -ldflags sets the version `helm version` reports,
# as helm's own Makefile does.
set -euo pipefail
HELM_VERSION="${HELM_VERSION:-4.3.2}"
HELM_MAJOR="${HELM_VERSION%%.*}"
root="${TOCK_HELM_CACHE:-$HOME/.cache/tock/helm}"
bin="$root/v$HELM_VERSION/bin"
say() { echo "build-helm.sh: $*" >&2; }

if [[ -x "$bin/helm" ]]; then echo "$bin/helm"; exit 0; fi
command -v go >/dev/null || { say "Go is needed to build helm v$HELM_VERSION (go 1.26+ for helm v4)"; exit 1; }
export GOTOOLCHAIN=local GOFLAGS=-buildvcs=false CGO_ENABLED=0
mkdir -p "$bin"
work="$(mktemp -d "${TMPDIR:-/tmp}/tock-helm-build.XXXXXX")"
trap 'rm -rf "$work"' EXIT

module="helm.sh/helm/v$HELM_MAJOR"
say "building helm v$HELM_VERSION from the Go module proxy (once per machine; ~4 minutes on 2 cores)"
version_pkg="$module/internal/version"
GOBIN="$work" go install -trimpath -ldflags "-s -w -X $version_pkg.version=v$HELM_VERSION \
  -X $version_pkg.gitTreeState=clean" "$module/cmd/helm@v$HELM_VERSION"
mv "$work/helm" "$bin/helm.tmp"
mv "$bin/helm.tmp" "$bin/helm"
"$bin/helm" version --short >&2
say "built into $bin"
echo "$bin/helm"
