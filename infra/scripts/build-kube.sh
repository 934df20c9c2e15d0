#!/usr/bin/env bash
# Builds the real kube-apiserver and etcd from the Go module proxy, once per machine, into
#   ~/.cache/tock/kube/v<K8S_VERSION>/bin/{kube-apiserver,etcd}     (TOCK_KUBE_CACHE overrides the root)
# and prints that bin directory. A cold build takes ~13 minutes on 2 cores (kube-apiserver
# alone ~12); later calls return at once. Why wrapper modules: `go install` refuses modules
# whose go.mod has replace directives, as k8s.io/kubernetes (its staging modules) and etcd's
# server have; a wrapper module requires them and repeats each replace with a published version.
set -euo pipefail
K8S_VERSION="${K8S_VERSION:-1.35.4}"
ETCD_VERSION="${ETCD_VERSION:-3.6.5}"
STAGING_VERSION="0.${K8S_VERSION#1.}"
root="${TOCK_KUBE_CACHE:-$HOME/.cache/tock/kube}"
bin="$root/v$K8S_VERSION/bin"
say() { echo "build-kube.sh: $*" >&2; }

if [[ -x "$bin/kube-apiserver" && -x "$bin/etcd-$ETCD_VERSION" ]]; then echo "$bin"; exit 0; fi
command -v go >/dev/null || { say "Go is needed to build kube-apiserver and etcd (go 1.25+)"; exit 1; }
export GOTOOLCHAIN=local GOFLAGS=-buildvcs=false CGO_ENABLED=0
mkdir -p "$bin"
work="$(mktemp -d "${TMPDIR:-/tmp}/tock-kube-build.XXXXXX")"
trap 'rm -rf "$work"' EXIT

build_etcd() {
  [[ -x "$bin/etcd-$ETCD_VERSION" ]] && return 0
  say "building etcd v$ETCD_VERSION (once; ~2 minutes)"
  mkdir -p "$work/etcd" && cd "$work/etcd"
  go mod init tock.local/etcd >/dev/null 2>&1
  go mod edit -require="go.etcd.io/etcd/server/v3@v$ETCD_VERSION"
  for module in api/v3 client/pkg/v3 client/v3 pkg/v3; do
    go mod edit -replace="go.etcd.io/etcd/$module=go.etcd.io/etcd/$module@v$ETCD_VERSION"
  done
  printf '//go:build tools\n\npackage tools\n\nimport _ "go.etcd.io/etcd/server/v3"\n' > tools.go
  go mod tidy >/dev/null 2>&1 || go mod tidy
  go build -ldflags "-s -w" -o "$bin/etcd-$ETCD_VERSION.tmp" go.etcd.io/etcd/server/v3
  mv "$bin/etcd-$ETCD_VERSION.tmp" "$bin/etcd-$ETCD_VERSION"
}

build_apiserver() {
  [[ -x "$bin/kube-apiserver" ]] && return 0
  say "building kube-apiserver v$K8S_VERSION (once per machine; ~12 minutes on 2 cores)"
  mkdir -p "$work/apiserver" && cd "$work/apiserver"
  go mod init tock.local/kube-apiserver >/dev/null 2>&1
  upstream="$(go mod download -json "k8s.io/kubernetes@v$K8S_VERSION" | python3 -c 'import json,sys; print(json.load(sys.stdin)["GoMod"])')"
  go mod edit -require="k8s.io/kubernetes@v$K8S_VERSION"
  # Every staging replace of the upstream go.mod (k8s.io/api => ./staging/src/k8s.io/api) becomes
  # the published module of the same path at the staging version.
  python3 - "$upstream" "$STAGING_VERSION" <<'PY' | while read -r path; do go mod edit -replace="$path=$path@v$STAGING_VERSION"; done
import re, sys
text = open(sys.argv[1]).read()
block = re.search(r"^replace \((.*?)^\)", text, re.S | re.M)
for line in (block.group(1).splitlines() if block else []):
    match = re.match(r"\s*(\S+)\s*=>\s*\./staging/", line)
    if match:
        print(match.group(1))
PY
  printf '//go:build tools\n\npackage tools\n\nimport _ "k8s.io/kubernetes/cmd/kube-apiserver"\n' > tools.go
  go mod tidy >/dev/null 2>&1 || go mod tidy
  minor="${K8S_VERSION#1.}"; minor="${minor%%.*}"
  go build -o "$bin/kube-apiserver.tmp" -ldflags "-s -w -X k8s.io/component-base/version.gitVersion=v$K8S_VERSION \
    -X k8s.io/component-base/version.gitMajor=1 -X k8s.io/component-base/version.gitMinor=$minor" \
    k8s.io/kubernetes/cmd/kube-apiserver
  mv "$bin/kube-apiserver.tmp" "$bin/kube-apiserver"
}

build_etcd
build_apiserver
say "built into $bin"
echo "$bin"
