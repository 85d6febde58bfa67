# `make test` and `make demo` are the whole set-up on a fresh machine:
# each creates .venv and installs orchard into it when missing.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.orchard-installed

.PHONY: test test-all demo clean

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[dev]'
	touch $(STAMP)

test: $(STAMP)
	$(BIN)/python -m pytest

test-all: $(STAMP)
	$(BIN)/python -m pytest -m ''

demo: $(STAMP)
	$(BIN)/orchard demo

clean:
	rm -rf $(VENV) build src/*.egg-info .pytest_cache
