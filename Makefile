# Tock: `make run` and `make test` set everything up on a fresh Debian machine.
SHELL := /bin/bash
PYTHON ?= python3
VENV := $(CURDIR)/.venv
BIN := $(VENV)/bin
export TOCK_HOME ?= $(CURDIR)/.tock
STAMP := $(VENV)/.installed

.PHONY: run run-kubernetes test bench services stop clean venv unit kube helm registry browser lint soak conformance-record \
        asyncapi-cli catalog bench-airflow

venv: $(STAMP)

$(STAMP): pyproject.toml
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q -e '.[test]'
	@touch $(STAMP)

# Kafka jars, PostgreSQL, Redis, the schema registry, the broker and the topics (their schemas
# registered). Idempotent.
services: venv registry
	@bash infra/scripts/postgres.sh start >/dev/null
	@bash infra/scripts/redis.sh start >/dev/null
	@$(BIN)/tock broker start
	@TOCK_SCHEMA_REGISTRY_URL=$(REGISTRY_URL) $(BIN)/tock topics create

# Tock's schema registry: Apicurio Registry 3.0.9 (its Confluent-compatible API on 127.0.0.1:8085),
# built from Maven Central once per machine (~2.5 minutes cold, ~240 MB of Maven downloads) into
# ~/.cache/tock/apicurio-registry-3.0.9 by infra/registry; its schemas in PostgreSQL (database
# tock_registry). `make run` and the tests write records in its wire format.
REGISTRY_URL := http://127.0.0.1:8085/apis/ccompat/v7
registry:
	@bash infra/scripts/postgres.sh start >/dev/null
	@bash infra/scripts/schema-registry.sh start >/dev/null

run: services
	TOCK_SCHEMA_REGISTRY_URL=$(REGISTRY_URL) $(BIN)/tock standalone --dags-folder $(CURDIR)/examples/dags

# `make run` with the Kubernetes executor too: the local kube-apiserver, etcd and a node agent
# (the kubelet stand-in), then every service on examples/kubernetes_dags (local, Celery and pods).
run-kubernetes: services kube
	@$(BIN)/tock kube start
	TOCK_EXECUTORS=local,celery,kubernetes TOCK_SCHEMA_REGISTRY_URL=$(REGISTRY_URL) $(BIN)/tock standalone --dags-folder $(CURDIR)/examples/kubernetes_dags

# The real kube-apiserver and etcd the Kubernetes tests run against: built from the Go module
# proxy once per machine (~13 minutes on 2 cores) into ~/.cache/tock/kube; later calls return at
# once. Not part of `services`, so `make run` stays fast (`tock kube start` builds on first use).
kube:
	@bash infra/scripts/build-kube.sh >/dev/null

# The real `helm` CLI the Helm chart's test renders with (infra/deploy/helm/tock): built from the
# Go module proxy once per machine (~4 minutes on 2 cores) into ~/.cache/tock/helm; later calls
# return at once.
helm:
	@bash infra/scripts/build-helm.sh >/dev/null

# Debian's chromium and chromium-driver for the web UI's browser tests.
browser:
	@bash infra/scripts/chromium.sh install >/dev/null

# The AsyncAPI CLI the event catalog's test validates with (@asyncapi/cli from npm, once into ~/.cache/tock).
asyncapi-cli:
	@bash infra/scripts/asyncapi-cli.sh >/dev/null

# Regenerate the event catalog (docs/asyncapi.json) after changing an event, a routing rule or a topic.
catalog: venv
	$(BIN)/tock schemas catalog --output docs/asyncapi.json

test: lint services kube helm browser asyncapi-cli
	@BIN=$(BIN) bash infra/scripts/run-tests.sh
	@echo "browser screenshots: $(TOCK_HOME)/screenshots"

# ruff over the whole tree; mypy strict over the schemas, the SDK and every service core
# (files and overrides in pyproject.toml); the Event union regenerated from the declarations.
lint: venv
	$(BIN)/ruff check .
	$(BIN)/mypy
	$(BIN)/python -m schemas.generate_union --check
	$(BIN)/tock schemas catalog --output docs/asyncapi.json --check

unit: venv
	$(BIN)/pytest -q -p no:cacheprovider tests/unit

# The chaos soak (issue 20): SOAK_MINUTES of load and faults on its own broker, PostgreSQL, Redis and
# kube-apiserver; SOAK_SEED repeats a run's choices. Prints faults, runs, tries, violations; exit 1 on any.
# `make test` runs a 3-minute one (tests/scenarios/test_soak.py, beside the suite with the `apart` tests).
SOAK_MINUTES ?= 30
soak: venv kube
	@SOAK_MINUTES=$(SOAK_MINUTES) $(BIN)/python -m tests.soak

# Run every conformance DAG (tests/conformance/dags, Airflow 3 syntax) on a real Airflow 3.3.2 (its own
# virtualenv, built once into ~/.cache/tock/airflow-3.3.2) and record what it did in
# tests/conformance/recorded.json; `make test` compares Tock's runs of them with it.
conformance-record: venv
	@$(BIN)/python -m tests.conformance.record "$$(bash infra/scripts/airflow-venv.sh)"

bench: services kube
	$(BIN)/python -m tests.benchmarks

# Tock beside Apache Airflow 3.3.2 (LocalExecutor, its metadata database in the project's PostgreSQL):
# W1, W2 and the parse workload on both, alternating, in one run; each figure for both with the load
# average, and the ratios Airflow / Tock, saved to $(TOCK_HOME)/bench-airflow.json (`make bench` prints
# them). Airflow's venv (with psycopg2-binary and asyncpg) is built once into ~/.cache/tock/airflow-3.3.2.
bench-airflow: services
	@$(BIN)/python -m tests.benchmarks.bench_airflow --airflow-python "$$(bash infra/scripts/airflow-venv.sh)"

stop:
	-@test -x $(BIN)/tock && $(BIN)/tock kube stop
	-@test -x $(BIN)/tock && $(BIN)/tock broker stop
	-@bash infra/scripts/schema-registry.sh stop
	-@bash infra/scripts/redis.sh stop
	-@bash infra/scripts/postgres.sh stop

clean: stop
	rm -rf $(TOCK_HOME) $(VENV)
