# Two entry points for a fresh machine (see README):
#   make audit   install what the audit needs into .venv (no test tools, no Ray), then run
#                the bundled default audit
#   make test    also install the test tools and the Ray extra, then run the test suite
#
# Measured on a fresh venv from a local package index (2-core CPU shared with other jobs,
# torch CPU wheel cached), torch step + suite step:
#   before (audit installed .[test,ray]): 1949 MB, 88 packages, 83 s + 690 s
#   after  (audit installs .):            1658 MB, 67 packages, 278 s + 528 s (load ~3x higher)
#
# torch is installed first, pinned to the CPU build, so the suite's loose `torch>=2.2`
# requirement is already satisfied and never pulls a multi-GB CUDA build.
# Elsewhere, point pip at PyTorch's CPU index:  make audit TORCH_INDEX=https://download.pytorch.org/whl/cpu

PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
TORCH_SPEC ?= torch==2.13.0
TORCH_INDEX ?=
OUT ?= audit-out
PIP := $(BIN)/python -m pip --disable-pip-version-check -q
# `make audit`'s install steps are not quiet: pip prints a line per package it collects,
# downloads or installs, so a first install (several minutes) is never silent
PIP_SHOW := $(BIN)/python -m pip --disable-pip-version-check
NOW = $$(date +%H:%M:%S)

.PHONY: audit test install install-test browser lint format clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)

$(VENV)/.installed: pyproject.toml | $(BIN)/python
	@echo "[$(NOW)] make: step 1/3: torch ($(TORCH_SPEC), CPU build) into $(VENV) (the largest download, ~200 MB)"
	@$(BIN)/python -c "import torch" 2>/dev/null && echo "  torch is already installed" || \
		$(PIP_SHOW) install "$(TORCH_SPEC)" $(if $(TORCH_INDEX),--index-url $(TORCH_INDEX))
	@echo "[$(NOW)] make: step 2/3: the suite and its dependencies (transformers, opacus, scikit-learn, ...)"
	$(PIP_SHOW) install -e .
	@echo "[$(NOW)] make: installed"
	@touch $@

# test tools (pytest, hypothesis, ruff, ...) and the Ray extra: only for `make test`/`lint`
$(VENV)/.installed-test: $(VENV)/.installed
	$(PIP) install -e ".[test,ray]"
	@touch $@

install: $(VENV)/.installed
install-test: $(VENV)/.installed-test

audit: install
	@echo "[$(NOW)] make: step 3/3: the default audit (trains 2 small BERT classifiers, runs 4 attacks and the ε audits on each; stages below)"
	$(BIN)/privacy-audit run --out $(OUT)

# The report's browser tests (tests/end_to_end/test_browser.py) need Chromium. Install it from
# Debian's packages when it is missing and we are root; otherwise say so and go on: the
# browser tests then fail (they are never skipped), so a missing browser is not missed.
# CHROMIUM=/path/to/chrome (environment or make's command line) uses that binary instead.
browser:
	@if command -v chromium >/dev/null 2>&1 || command -v chromium-browser >/dev/null 2>&1 \
		|| { [ -n "$$CHROMIUM" ] && [ -x "$$CHROMIUM" ]; }; then \
		:; \
	elif [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
		echo "make test: installing the system package chromium with apt-get (as root; the report's" \
			"browser tests need it). Set CHROMIUM=/path/to/chrome to use another, or install it" \
			"yourself first to skip this step."; \
		{ apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium; } \
		|| echo "make test: could not install chromium; tests/end_to_end/test_browser.py will FAIL" >&2; \
	else \
		echo "make test: Chromium is not installed and cannot be installed here (needs root" \
			"and apt-get); tests/end_to_end/test_browser.py will FAIL. Install it with:" \
			"sudo apt-get install chromium (or set CHROMIUM=/path/to/chrome)" >&2; \
	fi

# Two pytest-xdist workers with one torch thread each use both cores of a CI machine
# without oversubscribing them (about 4 minutes on 2 cores). TEST_WORKERS=0 runs serially.
# Collection (every worker imports every test file before the first dot) measured with
# `pytest --collect-only -q` on an idle 2-core machine, one run each: 15.4 s from a fresh
# clone (assertion rewriting compiles every test file) and 10.3 s with bytecode cached,
# before tests/reports/test_sentences.py stopped building its 192 runs at import; 12.3 s and 7.1 s
# after. Under load it is several times longer, hence the line printed before it.
TEST_WORKERS ?= 2
test: install-test browser
	@echo "[$(NOW)] make test: pytest starts $(TEST_WORKERS) worker(s); each collects the whole suite first (about 15 s on an idle 2-core machine, a minute or more under load), then prints a dot per test (about 10 minutes on 2 cores)"
	OMP_NUM_THREADS=1 $(BIN)/python -m pytest -n $(TEST_WORKERS)

lint: install-test
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

format: install-test
	$(BIN)/ruff format .
	$(BIN)/ruff check --fix .

clean:
	rm -rf $(VENV) $(OUT) .pytest_cache .ruff_cache *.egg-info
