# Two commands do everything on a fresh machine: `make book` and `make test`.
# Every target sets up .venv (and node_modules for the site's vendored JavaScript) when missing.

PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
PY     := $(BIN)/python
STAMP  := $(VENV)/.installed
HTML   := _build/html
PORT   ?= 8000
export PIP_DISABLE_PIP_VERSION_CHECK := 1
export HF_HUB_OFFLINE := 1
export TRANSFORMERS_OFFLINE := 1
export TOKENIZERS_PARALLELISM := false

.PHONY: setup book serve test lint unit notebooks lab student autograde bench clean pdf

setup: $(STAMP)

$(STAMP): requirements.txt pyproject.toml $(wildcard package-lock.json)
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -r requirements.txt
	if [ -f package-lock.json ]; then npm ci --no-audit --no-fund --loglevel=error; fi
	touch $(STAMP)

book: $(STAMP)
	$(BIN)/jupyter-book build . --warningiserror --keep-going
	@echo "The book is at file://$(CURDIR)/$(HTML)/index.html  (make serve: http://127.0.0.1:$(PORT)/)"

# The print edition: the built site printed by Chromium into one PDF per edition (book/_ext/print_book.py):
# _build/pdf/attention-step-by-step.pdf (exercises without solutions) and ...-instructors.pdf (with them).
pdf: book
	$(PY) book/_ext/print_book.py --site $(HTML)
	$(PY) book/_ext/print_book.py --site $(HTML) --instructor

serve: book
	$(PY) -m http.server --bind 127.0.0.1 --directory $(HTML) $(PORT)

lint: $(STAMP)
	$(BIN)/ruff check .

# Everything: lint, the book build (the browser tests read it), then one pytest run over
# attnlib's tests, every chapter notebook under strict nbval, the site and the course.
test: $(STAMP) lint book
	$(BIN)/pytest tests book --nbval --nbval-current-env --nbval-sanitize-with tests/nbval_sanitize.cfg

unit: $(STAMP)
	$(BIN)/pytest tests -m "not browser"

notebooks: $(STAMP)
	$(BIN)/pytest book --nbval --nbval-current-env --nbval-sanitize-with tests/nbval_sanitize.cfg

lab: $(STAMP)
	$(BIN)/jupyter lab --notebook-dir=book $(if $(filter 0,$(shell id -u)),--allow-root)

# Course material with nbgrader (course/, book/instructors.md): student versions of every chapter under
# _build/course/release/, and autograding of a folder laid out as <student>/<assignment>/<notebook>.ipynb.
student: $(STAMP)
	$(PY) -m course student

autograde: $(STAMP)
	@test -n "$(SUBMISSIONS)" || { echo "usage: make autograde SUBMISSIONS=<folder>  (laid out as <folder>/<student>/<assignment>/<notebook>.ipynb)"; exit 2; }
	$(PY) -m course autograde "$(SUBMISSIONS)"

# Time and peak memory of attnlib's attention paths vs torch SDPA (CPU, and CUDA when present).
# Options: make bench BENCH_ARGS="--quick" or BENCH_ARGS="--lengths 512 1024 --batch 4 --heads 8".
bench: $(STAMP)
	$(PY) -m attnlib.bench $(BENCH_ARGS)

clean:
	rm -rf _build .pytest_cache .hypothesis
