#!/usr/bin/env bash
# The real Apache Airflow the conformance suite records against: apache-airflow==3.3.2 from PyPI in a
# virtualenv of its own, built once per machine into ~/.cache/tock/airflow-3.3.2 (its scripts name that
# path, so it is built in place and marked complete last: a build that stopped half way is built again).
# Prints the path of its python.
set -euo pipefail
VERSION=3.3.2
HOME_DIR="${XDG_CACHE_HOME:-$HOME/.cache}/tock/airflow-$VERSION"
PYTHON="${PYTHON:-python3.11}"
if [[ ! -f "$HOME_DIR/.complete" ]]; then
    rm -rf "$HOME_DIR"
    "$PYTHON" -m venv "$HOME_DIR"
    "$HOME_DIR/bin/pip" install -q --disable-pip-version-check "apache-airflow==$VERSION" >&2
    touch "$HOME_DIR/.complete"
fi
echo "$HOME_DIR/bin/python"
