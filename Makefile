# ctxpipe developer tasks. `make test` is the one test command (see README "Testing");
# `make unit` is the fast tier for the edit-test loop.
SHELL := /bin/bash
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
# Reinstall only when pyproject.toml or the constraints changed (or the venv is new).
STAMP := $(VENV)/.ctxpipe-installed
# torch==2.13.0 (the CPU build) and any other pin of this environment: the library's metadata
# leaves torch unpinned, an unpinned install would fetch a multi-GB CUDA build.
PIP_INSTALL = $(BIN)/python -m pip install -c constraints.txt

.PHONY: test unit lint install clean demo chaos docs wheel-smoke

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)

$(STAMP): pyproject.toml constraints.txt | $(BIN)/python
	$(PIP_INSTALL) -e '.[test]'
	touch $@

install: $(STAMP)

# The whole suite: unit (no servers) + integration/e2e (own PostgreSQL + Redis on free ports).
test: export HF_HUB_OFFLINE := 1
test: export TRANSFORMERS_OFFLINE := 1
test: $(STAMP)
	$(BIN)/pytest -q

# The unit tier alone: no servers, no model (torch is never imported), seconds. Each property
# test runs a fifth of its examples (profile edit-loop, tests/unit/property_examples.py; `make
# test` runs them all). Bytecode is cached even where the environment turns it off: else every
# run compiles the package and assertion-rewrites the test files again, seconds of the tier.
# The tests' temporary roots go to a RAM-backed filesystem where the machine has one: the tier
# creates and deletes some 15,000 files and directories, whose metadata cost a disk more time
# than the tests themselves (fsync is already stubbed out in this tier: durability is not
# what it tests; a run writes some 35 MB). A directory of its own per run, removed after it;
# the usual temporary directory where no RAM-backed one with 1 GiB free exists.
RAM_TMP ?= /dev/shm
unit: export HF_HUB_OFFLINE := 1
unit: export TRANSFORMERS_OFFLINE := 1
unit: export PYTHONDONTWRITEBYTECODE :=
unit: $(STAMP)
	@dir=$(RAM_TMP); \
	free=$$(df -Pk "$$dir" 2>/dev/null | awk 'NR == 2 { print $$4 }'); \
	[ "$${free:-0}" -ge 1048576 ] || dir=$${TMPDIR:-/tmp}; \
	base=$$(mktemp -d -p "$$dir" ctxpipe-unit.XXXXXX) || exit 1; \
	$(BIN)/pytest -q tests/unit --hypothesis-profile=edit-loop --basetemp="$$base"; \
	rc=$$?; rm -rf "$$base"; exit $$rc

# The main job on the embedded default: start the local stack (PostgreSQL + pgvector, Redis,
# Celery workers, beat, Flower, the HTTP API), commit every examples/*.json through Celery, show
# the memory tree and the outbox, then commit + find one session through the Python client on
# the API. The stack keeps running: `$(BIN)/ctxpipe dev down` stops all of it; `make demo` again
# finds it running (or starts it anew) and passes again.
demo: export HF_HUB_OFFLINE := 1
demo: export TRANSFORMERS_OFFLINE := 1
demo: $(STAMP)
	$(BIN)/ctxpipe dev up
	$(BIN)/ctxpipe db migrate
	$(BIN)/ctxpipe demo
	$(BIN)/ctxpipe search "how was the Airflow DAG fixed?" -a acme -u alice --agent helper
	$(BIN)/python examples/api_demo.py

# No memory lost under faults: >= 200 LoCoMo sessions through a dev stack while worker nodes are
# SIGKILLed, Redis restarts (once with its data deleted) and PostgreSQL stops; the FS is then
# compared node by node with a reference built in process (bench/chaos.py --help).
chaos: export HF_HUB_OFFLINE := 1
chaos: export TRANSFORMERS_OFFLINE := 1
chaos: $(STAMP)
	$(BIN)/python bench/chaos.py --sessions 200

# The docs site (mkdocs-material + mkdocstrings); the configuration and HTTP API pages are
# generated from Settings and the OpenAPI document (docs/hooks/reference.py). Output: site/.
docs: export NO_MKDOCS_2_WARNING := 1
docs: export HF_HUB_OFFLINE := 1
docs: $(STAMP)
	$(BIN)/mkdocs build --strict

# The wheel as a user installs it, from a directory with no source tree (.ci/wheel-smoke.sh).
wheel-smoke:
	bash .ci/wheel-smoke.sh

lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy

clean:
	rm -rf .pytest_cache .ruff_cache site
