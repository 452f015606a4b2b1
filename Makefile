# quotaplane — the two commands a newcomer needs are `make run` and `make test`.
#
# The environment (.venv/) is made from any Python >= 3.11 on PATH (PYTHON=… picks one):
#   * with uv (on PATH or in ~/.local/bin): `uv venv` + `uv pip install`;
#   * without uv: `python -m venv`, uv installed *inside* that venv with its pip, then as above
#     (a distribution Python's `pip install --user` is refused by PEP 668; a venv is not);
#   * a Python without ensurepip (Debian without python3-venv): `venv --without-pip`, and uv put in
#     .venv/bootstrap with the system pip's --target (which PEP 668 allows);
#   * if uv cannot be had at all: pip inside the venv installs the project.
PYTHON ?= $(shell for p in python3 python3.14 python3.13 python3.12 python3.11 python; do \
	command -v $$p >/dev/null 2>&1 && $$p -c 'import sys; sys.exit(sys.version_info < (3, 11))' 2>/dev/null \
	&& { echo $$p; break; }; done)
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed
EXTRAS := server,cli,client,sim,postgres,kube,dev
HOST   ?= 127.0.0.1
PORT   ?= 9080
#: extra pytest arguments, e.g. `make test PYTEST_ARGS="tests/server -x"`
PYTEST_ARGS ?=

.PHONY: run test test-long bench lint env clean faults

$(STAMP): pyproject.toml
	@set -e; \
	if [ -z "$(PYTHON)" ]; then \
	  echo "make: no Python >= 3.11 found on PATH (tried python3, python3.14 … python3.11); install one" \
	       "or name it: make PYTHON=/path/to/python3.12 …" >&2; exit 1; fi; \
	uv=$$(command -v uv 2>/dev/null || true); \
	if [ -z "$$uv" ] && [ -x "$(HOME)/.local/bin/uv" ]; then uv="$(HOME)/.local/bin/uv"; fi; \
	if [ -z "$$uv" ] && [ -x $(BIN)/uv ]; then uv=$(BIN)/uv; fi; \
	if [ -z "$$uv" ] && [ -x $(VENV)/bootstrap/bin/uv ]; then uv=$(VENV)/bootstrap/bin/uv; fi; \
	if [ -n "$$uv" ]; then \
	  [ -x $(BIN)/python ] || "$$uv" venv --quiet --python "$(PYTHON)" $(VENV); \
	else \
	  echo "make: uv not found: creating $(VENV) with $(PYTHON) -m venv and installing uv inside it"; \
	  if [ ! -x $(BIN)/python ]; then \
	    "$(PYTHON)" -m venv $(VENV) 2>/dev/null || { rm -rf $(VENV); "$(PYTHON)" -m venv --without-pip $(VENV); }; \
	  fi; \
	  if $(BIN)/python -m pip --version >/dev/null 2>&1; then \
	    $(BIN)/python -m pip install --quiet uv && uv=$(BIN)/uv || true; \
	  else \
	    "$(PYTHON)" -m pip install --quiet --root-user-action=ignore --target $(VENV)/bootstrap uv && uv=$(VENV)/bootstrap/bin/uv || true; \
	  fi; \
	fi; \
	if [ -n "$$uv" ] && [ -x "$$uv" ]; then \
	  "$$uv" pip install --quiet --python $(BIN)/python -e ".[$(EXTRAS)]"; \
	else \
	  echo "make: uv could not be installed; installing with pip (slower)"; \
	  $(BIN)/python -m pip install --quiet -e ".[$(EXTRAS)]"; \
	fi
	@touch $(STAMP)

env: $(STAMP)

run: $(STAMP)
	$(BIN)/quotaplane serve --config examples/queues.yaml --store sqlite:///quotaplane-state.db --host $(HOST) --port $(PORT)

#: test processes for `make test` (pytest-xdist; each file runs whole on one of them, since a file's
#: module fixtures — a served app, a browser — are shared by its tests); 0 runs everything in one
TEST_JOBS ?= 2

test: $(STAMP)
	$(BIN)/python -m pytest -n $(TEST_JOBS) --dist loadfile -m "not serial" $(PYTEST_ARGS)
	$(BIN)/python -m pytest -n $(TEST_JOBS) -m serial $(PYTEST_ARGS) || [ $$? -eq 5 ]   # 5: none selected

# the random-fault tests at the issue's full count (1,000 injected failures each; `make test` runs 300):
# `.ci/run` runs it after `make test`
test-long: $(STAMP)
	QUOTAPLANE_FAULT_COUNT=1000 $(BIN)/python -m pytest tests/hardening/test_fault_injection.py $(PYTEST_ARGS)

# the fault suite's long form (tests/faults, docs/operations.md): EACH faults of each kind on a
# PostgreSQL of its own that is really restarted; the short form runs in `make test`
faults: $(STAMP)
	nice -n 10 $(BIN)/python -m tests.faults.run --own-server --each $${EACH:-100} --out faults-report.json

bench: $(STAMP)
	@mkdir -p benchmarks/results
	@for b in benchmarks/[!_]*.py; do echo "== $$b"; $(BIN)/python $$b || exit 1; done

lint: $(STAMP)
	$(BIN)/ruff check src tests benchmarks tools examples
	$(BIN)/mypy --strict src

clean:
	rm -rf $(VENV) .mypy_cache .ruff_cache .pytest_cache
