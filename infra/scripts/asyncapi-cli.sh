#!/usr/bin/env bash
# The real AsyncAPI CLI (@asyncapi/cli from the npm registry, pinned), which validates the event catalog
# docs/asyncapi.json (tests/integration/test_catalog_validates.py): installed once per machine into
# ~/.cache/tock/asyncapi-cli/<version>, built aside and renamed into place, so a stopped or racing install
# never leaves a half-built one in use. Idempotent; later calls return at once.
# Prints the path of its `asyncapi` command: a wrapper that gives the CLI its own analytics settings
# (disabled), so it sends no usage metrics and never writes ~/.asyncapi-analytics. No install script of
# its dependencies runs (one would edit shell start-up files, puppeteer's would fetch a browser); the CLI
# needs none of them to validate.
set -euo pipefail
VERSION=6.2.0
CACHE="${XDG_CACHE_HOME:-$HOME/.cache}/tock/asyncapi-cli"
HOME_DIR="$CACHE/$VERSION"
BIN="$HOME_DIR/bin/asyncapi"

install() {
    command -v npm >/dev/null || { echo "asyncapi-cli.sh: npm is missing (Node 20 and npm are needed)" >&2; exit 1; }
    mkdir -p "$CACHE"
    BUILD="$(mktemp -d "$CACHE/.build-$VERSION.XXXXXX")"
    chmod 755 "$BUILD"
    trap 'rm -rf "$BUILD"' EXIT
    echo "asyncapi-cli.sh: installing @asyncapi/cli@$VERSION from the npm registry into $HOME_DIR" >&2
    echo '{"private": true}' > "$BUILD/package.json"
    PUPPETEER_SKIP_DOWNLOAD=1 npm install --prefix "$BUILD" --ignore-scripts --no-audit --no-fund \
        --loglevel=error --save-exact "@asyncapi/cli@$VERSION" >&2
    echo '{"analyticsEnabled": "false", "infoMessageShown": "true", "userID": "tock"}' > "$BUILD/analytics.json"
    mkdir "$BUILD/bin"
    touch "$BUILD/.complete"
    # Another install may have finished meanwhile: keep the one in place and drop ours.
    if [[ -d "$HOME_DIR" && ! -f "$HOME_DIR/.complete" ]]; then rm -rf "$HOME_DIR"; fi
    mv -T "$BUILD" "$HOME_DIR" 2>/dev/null || true
}

# The command: the CLI with its analytics settings, and quiet about the node-config it does not use.
write_wrapper() {
    local next
    next="$(mktemp "$HOME_DIR/bin/.asyncapi.XXXXXX")"
    cat > "$next" <<'WRAPPER'
#!/usr/bin/env bash
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
export ASYNCAPI_METRICS_CONFIG_PATH="$HERE/analytics.json" SUPPRESS_NO_CONFIG_WARNING=1 SUPPRESS_STRICTNESS_CHECK=1
exec "$HERE/node_modules/.bin/asyncapi" "$@"
WRAPPER
    chmod 755 "$next"
    if cmp -s "$next" "$BIN"; then rm -f "$next"; else mv -f "$next" "$BIN"; fi
}

[[ -f "$HOME_DIR/.complete" && -x "$HOME_DIR/node_modules/.bin/asyncapi" ]] || install
[[ -f "$HOME_DIR/.complete" && -x "$HOME_DIR/node_modules/.bin/asyncapi" ]] \
    || { echo "asyncapi-cli.sh: $HOME_DIR/node_modules/.bin/asyncapi is missing after the install" >&2; exit 1; }
write_wrapper
echo "$BIN"
