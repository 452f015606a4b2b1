# quotaplane — the two commands a newcomer needs are `make run` and `make test`.
PYTHON ?= python3.11
VENV   := .venv
BIN    := $(VENV)/bin
UV     := $(shell command -v uv 2>/dev/null || echo $(HOME)/.local/bin/uv)
STAMP  := $(VENV)/.installed

.PHONY: run test bench lint env clean

$(UV):
	$(PYTHON) -m pip install --quiet --user uv || $(PYTHON) -m pip install --quiet uv

$(STAMP): pyproject.toml | $(UV)
	@command -v uv >/dev/null 2>&1 && UVBIN=uv || UVBIN=$(UV); \
	if [ ! -x $(BIN)/python ]; then $$UVBIN venv --quiet --python $(PYTHON) $(VENV); fi; \
	$$UVBIN pip install --quiet --python $(BIN)/python -e ".[server,cli,client,sim,postgres,kube,dev]"
	@touch $(STAMP)

env: $(STAMP)

run: $(STAMP)
	$(BIN)/quotaplane serve --config examples/queues.yaml --store sqlite:///quotaplane-state.db --host 127.0.0.1 --port 9080

test: $(STAMP)
	$(BIN)/python -m pytest

bench: $(STAMP)
	@mkdir -p benchmarks/results
	@for b in benchmarks/[!_]*.py; do echo "== $$b"; $(BIN)/python $$b || exit 1; done

lint: $(STAMP)
	$(BIN)/ruff check src tests benchmarks tools examples
	$(BIN)/mypy --strict src

clean:
	rm -rf $(VENV) .mypy_cache .ruff_cache .pytest_cache
