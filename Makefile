# `make lab` opens the course, `make test` runs every test; both set up .venv first if needed.
PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed
# Test workers: three on two cores. A third of the suite's time is spent waiting (servers starting, browsers, sleeps
# that order events, grading limits), so two workers left 40 % of two cores idle: 12 min 34 s with two, 11 min 49 s
# with three, measured on a quiet 2-core machine (2026-11-27). Every time limit in the tests scales with the load.
JOBS   ?= 3
# Extra options for JupyterLab, e.g. make lab LAB_ARGS="--no-browser --port=8889"
LAB_ARGS ?=

.PHONY: install lab test test-fast bench release references execute site clean

# The environment, PyTorch (a CPU build where PyPI's would bring CUDA libraries), then the course: utils/bootstrap.py,
# which says each step before it starts and, in its last line, what each took and what comes next (THEN_<goal>).
THEN_lab       := starting JupyterLab
THEN_test      := running the tests
THEN_test-fast := running the fast tests
THEN_site      := building the website
$(STAMP): pyproject.toml
	@$(PYTHON) -m utils.bootstrap --venv $(VENV) --extras lab,dev --then "$(THEN_$(firstword $(MAKECMDGOALS)))"
	@touch $(STAMP)

install: $(STAMP)

lab: install
	@$(BIN)/attn lab $(LAB_ARGS)

test: install
	$(BIN)/ruff check .
	$(BIN)/python -m pytest -n $(JOBS) --dist loadgroup

# A maintainer's loop (under 2 minutes): lint, unit tests, notebook 01's grading round trips; no notebook executed.
test-fast: install
	$(BIN)/ruff check .
	$(BIN)/python -m pytest -n $(JOBS) --dist loadgroup -m "not slow"

bench: install
	$(BIN)/attn bench

release: install
	$(BIN)/attn release

references: install
	$(BIN)/attn references

execute: install
	$(BIN)/attn execute

# The course website in English and Chinese, into _site/ (from the notebooks' stored outputs: none is executed).
site: install
	$(BIN)/attn site

# Only what make builds: never the gradebook, submissions or exchange (a class's work lives there).
clean:
	rm -rf $(VENV) .pytest_cache
