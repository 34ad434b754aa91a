# `make demo` and `make test` set up .venv from nothing, then run.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed

.PHONY: demo test lint clean

$(STAMP): pyproject.toml constraints.txt
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -m pip install -q -c constraints.txt -e '.[torch,test,dev]'
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
