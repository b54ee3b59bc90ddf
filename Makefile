# The two commands of the README: `make demo` (the main job) and `make test` (the suite).
# Each sets itself up: a virtualenv in .venv with adaptedge and everything it needs.

PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed-all-dev

.PHONY: demo test install check bench clean

demo: $(STAMP)
	$(BIN)/adaptedge demo

# The suite under coverage (subprocesses too, pytest-xdist's workers among them: pyproject.toml's
# [tool.coverage.*]), then one line per package. Two tiers: on a developer's machine the fast one,
# `-m 'not slow'` (the tests marked `slow` each take over a CPU second: training sweeps, real
# brokers, QEMU, the demo); in CI (CI set and not 0 or false, as CI services and .ci/run set it)
# or with `make test SLOW=1`, every test. Workers: one per core (PYTEST_WORKERS=0 runs in one
# process); a test file stays on one worker, so its module fixtures are built once. The recipe
# exits with pytest's status (make itself then says 0 or 2), which it also leaves in
# $(VENV)/.pytest-status for .ci/run (pytest's 5: no test collected).
PYTEST_WORKERS ?= auto
SLOW ?= $(if $(filter-out 0 false FALSE False,$(CI)),1,0)
TIER := $(if $(filter 1,$(SLOW)),,-m "not slow")
test: $(STAMP)
	@command -v mosquitto >/dev/null 2>&1 || [ -x /usr/sbin/mosquitto ] || \
	  echo "note: mosquitto is not installed; broker tests will be skipped (apt-get install -y mosquitto)"
	@echo "make test: $(if $(TIER),the fast tier; the slow tests run in CI or with make test SLOW=1,every test (CI or SLOW=1))"
	@$(BIN)/coverage erase
	$(BIN)/coverage run -m pytest -n $(PYTEST_WORKERS) --dist loadfile $(TIER) $(PYTEST_ARGS); \
	  status=$$?; echo $$status > $(VENV)/.pytest-status; \
	  $(BIN)/coverage combine --quiet && $(BIN)/python -m tests.support.coverage_summary; \
	  exit $$status

install: $(STAMP)

PACKAGES := protocol edge cloud trainer simulator

$(STAMP): pyproject.toml $(PACKAGES:%=%/pyproject.toml) protocol/src/adaptedge/protocol/_speedups.c \
	  trainer/src/adaptedge/trainer/methods/_tree_loops.c
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
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache *.egg-info .coverage .coverage.*
