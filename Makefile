# Seam: the two commands of the README are `make demo` and `make test`.
SHELL := /bin/bash
SEAM := .venv/bin/seam
PYTEST_ARGS ?=

.PHONY: setup demo test lint ruff torture faults bench bench-stream bench-validate up down status lock clean
SCALE ?= 0.2
REPEATS ?= 3
CASES ?= full,peers,incremental,stream,validation,repair,resume,big_transaction,many_tables

setup:            ## Debian packages, .venv with pinned requirements, seam (editable)
	@bash scripts/setup.sh

demo: setup       ## start the embedded stack, seed demo data, run the demo DAG
	@bash scripts/demo.sh

test: ruff        ## lint, then the whole test suite against the real embedded services (mypy runs beside its start)
	@typed=$$(mktemp); (.venv/bin/mypy; echo $$? > $$typed) & \
	bash scripts/test.sh $(PYTEST_ARGS); tests=$$?; wait; ok=$$(cat $$typed); rm -f $$typed; \
	[ "$$ok" = 0 ] || echo "make test: mypy failed (above)"; [ $$tests = 0 ] && [ "$$ok" = 0 ]

lint: ruff        ## ruff (lint and format) over all Python, mypy over include/ and plugins/
	@.venv/bin/mypy

ruff: setup
	@.venv/bin/ruff check .
	@.venv/bin/ruff format --check .

SEED ?= 1
DURATION ?= 120
SNAPSHOT ?=
SINK ?=
torture: setup    ## randomized differential test: workload, loads, kills, independent compare (SEED=1 DURATION=120 SNAPSHOT=portable SINK=spark)
	@SEAM_TEST_SNAPSHOT=$(SNAPSHOT) bash scripts/torture.sh --seed $(SEED) --duration $(DURATION) $(if $(SINK),--sink $(SINK))

faults: setup     ## every fault of a pipeline's second week under a writer, each with its way out and an independent compare
	@bash scripts/faults.sh

bench: setup      ## every benchmark case next to its baselines, one process (SCALE=0.2 REPEATS=3 CASES=full,peers,incremental,stream,validation,repair,resume,big_transaction,many_tables)
	@.venv/bin/python benchmarks/harness.py --scale $(SCALE) --repeats $(REPEATS) --cases $(CASES)

bench-stream: setup  ## the stream case of `make bench` alone
	@.venv/bin/python benchmarks/harness.py --repeats $(REPEATS) --cases stream

bench-validate: setup  ## the validation case of `make bench` alone
	@.venv/bin/python benchmarks/harness.py --scale $(SCALE) --repeats $(REPEATS) --cases validation

up: setup
	@$(SEAM) up

down:
	@$(SEAM) down

status:
	@$(SEAM) status

lock:             ## recompile requirements.txt from requirements.in
	@.venv/bin/uv pip compile -q --python-version 3.11 requirements.in -o requirements.txt

clean: down       ## stop the stack and delete its state (all embedded data)
	@if [ -L .seam/postgres/data ]; then rm -rf "$$(readlink -f .seam/postgres/data)"; fi
	rm -rf .seam
