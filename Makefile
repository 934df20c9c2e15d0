# Tock: `make run` and `make test` set everything up on a fresh Debian machine.
SHELL := /bin/bash
PYTHON ?= python3
VENV := $(CURDIR)/.venv
BIN := $(VENV)/bin
export TOCK_HOME ?= $(CURDIR)/.tock
STAMP := $(VENV)/.installed

.PHONY: run test bench services stop clean venv unit

venv: $(STAMP)

$(STAMP): pyproject.toml
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q -e '.[test]'
	@touch $(STAMP)

# Kafka jars, PostgreSQL, Redis, the broker and the topics. Idempotent.
services: venv
	@bash infra/scripts/postgres.sh start >/dev/null
	@bash infra/scripts/redis.sh start >/dev/null
	@$(BIN)/tock broker start
	@$(BIN)/tock topics create

run: services
	$(BIN)/tock standalone --dags-folder $(CURDIR)/examples/dags

test: services
	$(BIN)/pytest -q -p no:cacheprovider tests/unit tests/integration tests/scenarios

unit: venv
	$(BIN)/pytest -q -p no:cacheprovider tests/unit

bench: services
	$(BIN)/python -m tests.benchmarks

stop:
	-@test -x $(BIN)/tock && $(BIN)/tock broker stop
	-@bash infra/scripts/redis.sh stop
	-@bash infra/scripts/postgres.sh stop

clean: stop
	rm -rf $(TOCK_HOME) $(VENV)
