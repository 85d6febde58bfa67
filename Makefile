# `make test` and `make demo` are the whole set-up on a fresh machine:
# each creates .venv and installs orchard into it when missing.
#   make lint       ruff (src, tests, benchmarks) and mypy --strict (src)
#   make test       lint, then the fast tier (everything not marked slow) in 4 pytest-xdist workers,
#                   each test file on one worker (its module fixtures built once); 4, not one per
#                   core: the tests mostly wait (on processes, polls, the shared measurement lock)
#   make test-slow  the slow tier: whole lab runs, a browser, dask clusters, long measurements, in 2
#                   workers by file (measured runs of both take turns on the run's lock, as in the fast
#                   tier), the files declaring the most time first (tests/conftest.py), so the tier ends
#                   on short ones; its 30 slowest cases are printed, so a CI log says where the time went
#   make test-all   both tiers
#   make agents     the pinned agent CLIs the tests run for real, into .agents/ (.ci/agents; the test
#                   targets call it; a CLI that cannot install fails it, and its tests skip with the
#                   reason, printed by -rs, or fail under CI=true)
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.orchard-installed
# `orchard history`'s detector, without the dependencies of its own CLI (pyproject.toml, docs/history.md)
OTAVA := apache-otava==0.8.0
# pytest rewrites the asserts of every module of a package that declares a plugin (hypothesis,
# libtmux, anyio, ... : 157 modules, ~5 s per process, paid again by each xdist worker); with
# autoload off it loads only the plugins the tests use, named here. Bytecode is written even where the
# environment says not to (PYTHONDONTWRITEBYTECODE=1): else every `orchard` a test starts compiles
# orchard's modules again (~0.2 s of CPU each) and every worker rewrites every test module's asserts.
# HYPOTHESIS_NO_PLUGINS: hypothesis, imported by every worker's collection, would otherwise scan every installed
# package's entry points and import trio for its plugin (~0.25 s of CPU a worker; no test uses trio).
PYTEST := PYTHONDONTWRITEBYTECODE= PYTEST_DISABLE_PLUGIN_AUTOLOAD=1 HYPOTHESIS_NO_PLUGINS=1 $(BIN)/python -m pytest \
	-p xdist.plugin -p pytest_timeout -p _hypothesis_pytestplugin -rs

.PHONY: lint agents test test-slow test-all demo clean

$(STAMP): pyproject.toml Makefile
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip uninstall --quiet -y orchard 2>/dev/null || true  # its name before orchard-lab
	$(BIN)/python -m pip install --quiet -e '.[lab,dev,history]'
	$(BIN)/python -m pip install --quiet --no-deps $(OTAVA)
	touch $(STAMP)

lint: $(STAMP)
	$(BIN)/ruff check src tests benchmarks
	$(BIN)/mypy

agents:
	.ci/agents

test: lint agents
	$(PYTEST) -n 4 --dist loadfile

test-slow: $(STAMP) agents
	$(PYTEST) -m slow -n 2 --dist loadfile --no-loadscope-reorder --durations=30

test-all: test test-slow

demo: $(STAMP)
	$(BIN)/orchard demo

clean:
	rm -rf $(VENV) .agents build src/*.egg-info .pytest_cache .mypy_cache .ruff_cache
