#!/usr/bin/env bash
# The real Apache Airflow the conformance suite records against and `make bench-airflow` runs:
# apache-airflow==3.3.2 from PyPI in a virtualenv of its own, with the PostgreSQL drivers the bench's
# metadata database needs (psycopg2-binary; asyncpg for Airflow's async engine), built once per machine into
# ~/.cache/tock/airflow-3.3.2 (its scripts name that path, so it is built in place and marked complete last:
# a build that stopped half way is built again; a venv built before the drivers were added gets them alone).
# Prints the path of its python.
set -euo pipefail
VERSION=3.3.2
PSYCOPG2=2.9.13
ASYNCPG=0.32.0
HOME_DIR="${XDG_CACHE_HOME:-$HOME/.cache}/tock/airflow-$VERSION"
PYTHON="${PYTHON:-python3.11}"
if [[ ! -f "$HOME_DIR/.complete" ]]; then
    rm -rf "$HOME_DIR"
    "$PYTHON" -m venv "$HOME_DIR"
    "$HOME_DIR/bin/pip" install -q --disable-pip-version-check "apache-airflow==$VERSION" >&2
    touch "$HOME_DIR/.complete"
fi
DRIVERS="$HOME_DIR/.drivers-psycopg2-$PSYCOPG2-asyncpg-$ASYNCPG"
if [[ ! -f "$DRIVERS" ]]; then
    "$HOME_DIR/bin/pip" install -q --disable-pip-version-check "psycopg2-binary==$PSYCOPG2" "asyncpg==$ASYNCPG" >&2
    touch "$DRIVERS"
fi
echo "$HOME_DIR/bin/python"
