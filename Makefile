# The two commands of the README: `make demo` (the main job) and `make test` (the suite).
# Each sets itself up: a virtualenv in .venv with adaptedge and everything it needs.

PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed-all-dev

.PHONY: demo test install check bench clean

demo: $(STAMP)
	$(BIN)/adaptedge demo

test: $(STAMP)
	@command -v mosquitto >/dev/null 2>&1 || [ -x /usr/sbin/mosquitto ] || \
	  echo "note: mosquitto is not installed; broker tests will be skipped (apt-get install -y mosquitto)"
	$(BIN)/python -m pytest

install: $(STAMP)

PACKAGES := protocol edge cloud trainer simulator

$(STAMP): pyproject.toml $(PACKAGES:%=%/pyproject.toml) protocol/src/adaptedge/protocol/_speedups.c
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet $(PACKAGES:%=-e ./%) -e '.[all,dev]'
	touch $(STAMP)

check: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/mypy

bench: $(STAMP)
	$(BIN)/python -m benchmarks.protocol

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache *.egg-info
