# `make demo` and `make test` set up .venv from nothing, then run.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed
# This machine keeps the CPU torch wheel in /opt/wheels; elsewhere pip resolves it from the index.
FIND_LINKS := $(if $(wildcard /opt/wheels),--find-links /opt/wheels)

.PHONY: demo test lint clean

$(STAMP): pyproject.toml constraints.txt
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q $(FIND_LINKS) -c constraints.txt -e '.[torch,test,dev]'
	touch $@

demo: $(STAMP)
	$(BIN)/glassformer walkthrough hello-world

test: $(STAMP)
	$(BIN)/python -m pytest -q -n 2

lint: $(STAMP)
	$(BIN)/ruff check glassformer tests benchmarks
	$(BIN)/ruff format --check glassformer tests benchmarks

clean:
	rm -rf $(VENV) .pytest_cache
