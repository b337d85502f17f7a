# ccpo-lab: every set-up step lives here (CI runs `make test` on a clean clone).
SHELL := /bin/bash
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
PIP := $(BIN)/python -m pip
CONSTRAINTS := -c constraints.txt -c requirements.lock
STAMP := $(VENV)/.installed
RESULTS ?= results
export RAY_AUTH_MODE ?= disabled
export PYTHONUNBUFFERED := 1

.PHONY: setup demo test test-fast lint bench slurm-up slurm-down clean

setup: $(STAMP)

# Re-installs only when the project's dependency files change. pip keeps the wheels it
# builds (jericho, fast-downward) in its cache, so later set-ups are fast.
$(STAMP): pyproject.toml constraints.txt requirements.lock
	test -x $(BIN)/python || $(PY) -m venv $(VENV)
	$(PIP) install -q --upgrade pip wheel setuptools $(CONSTRAINTS)
	$(PIP) install -q $(CONSTRAINTS) -e '.[dev]'
	touch $(STAMP)

# The embedded default study end to end: 5 arms x 3 seeds on the CPU backend (completed
# runs are skipped on a rerun), the step-1 identity check, and the report (printed once,
# and written with its plots to results/demo/report/).
demo: setup
	$(BIN)/ccpo-lab sweep sweeps/demo.yaml --results $(RESULTS) --wait
	$(BIN)/ccpo-lab verify $(RESULTS)/demo
	$(BIN)/ccpo-lab report $(RESULTS)/demo --out $(RESULTS)/demo/report

# The whole suite, slow integration tests included, with a real local Slurm brought up
# first and always brought down after. With CCPO_LAB_VERL_AGENT naming a verl-agent
# checkout (.ci/run sets it when ../shared/verl-agent-796ed31 exists), first the trainer
# environment is built and the contract tests run in it (scripts/verl-agent-contract.sh),
# then the suite runs with CCPO_LAB_TRAINER_PYTHON set, so the rehearsal end-to-end test
# drives verl-agent's real trainer.
TRAINER_VENV ?= $(HOME)/.cache/ccpo-lab/verl-agent-cpu
test: setup
	-@scripts/tex-deps.sh  # best effort: pdflatex + booktabs for tests/report/test_latex.py
	-@scripts/skypilot-env.sh  # best effort: SkyPilot's parser, in its own venv (tests/launch/test_skypilot.py)
	@set -o pipefail; status=0; \
	if [ -x scripts/slurm-local.sh ]; then scripts/slurm-local.sh up || { echo "slurm-up failed"; exit 1; }; fi; \
	if [ -n "$$CCPO_LAB_VERL_AGENT" ]; then \
	  start=$$(date +%s); \
	  scripts/verl-agent-contract.sh "$$CCPO_LAB_VERL_AGENT" --venv "$(TRAINER_VENV)" || status=$$?; \
	  echo "== trainer environment and contract tests: $$(( $$(date +%s) - start )) s"; \
	  export CCPO_LAB_TRAINER_PYTHON="$(TRAINER_VENV)/bin/python"; \
	fi; \
	$(BIN)/python -m pytest -q $(PYTEST_ARGS) || status=$$?; \
	if [ -x scripts/slurm-local.sh ]; then scripts/slurm-local.sh down || true; fi; \
	exit $$status

test-fast: setup
	$(BIN)/python -m pytest -q -m "not slow" $(PYTEST_ARGS)

lint: setup
	$(BIN)/ruff check ccpo_lab tests benchmarks
	$(BIN)/mypy

bench: setup
	@for b in benchmarks/bench_*.py; do echo "== $$b"; $(BIN)/python $$b || exit 1; done

slurm-up:
	scripts/slurm-local.sh up

slurm-down:
	scripts/slurm-local.sh down

clean:
	rm -rf $(VENV) .pytest_cache .ruff_cache
