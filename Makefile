# Two commands do everything on a fresh machine: `make book` and `make test`.
# Every target sets up .venv (and node_modules for the site's vendored JavaScript) when missing, and
# `make book` / `make test` install the Debian packages they need (tools/debian-packages: apt-get as
# root; otherwise they stop at once and print the one command to run).

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
# command=Debian package: npm for the site's vendored libraries, Chromium for the browser tests
BOOK_PACKAGES := ensurepip=python3-venv npm=npm node=nodejs
# bubblewrap (and prlimit) for the sandbox every autograde runs student code in (attncourse/sandbox.py)
COURSE_PACKAGES := bwrap=bubblewrap prlimit=util-linux
TEST_PACKAGES := $(BOOK_PACKAGES) $(COURSE_PACKAGES) chromium=chromium chromedriver=chromium-driver \
	pdftotext=poppler-utils
# nbval's flags and the one-thread environment of every test process, from the one settings module
# (read when a recipe runs, after .venv exists).
TESTSETTINGS = $(PY) tools/testsettings.py
NBVAL      = $(shell $(TESTSETTINGS) nbval)
ONE_THREAD = $(shell $(TESTSETTINGS) one-thread)
# Which website `make book` builds: student (published: no solutions, no hidden tests) or instructor.
EDITION ?= student
export ATTNLIB_EDITION := $(EDITION)
# The nbgrader course directory: kept for the whole term, never deleted by make (make student COURSE=...).
COURSE ?= course-work

.PHONY: setup book serve test check lint test-lib test-repo test-book test-site test-course strip lab student autograde regrade roster due import-zip feedback grades grade-bench bench clean pdf

setup: $(STAMP)

.PHONY: book-packages test-packages course-packages
book-packages:
	@PYTHON=$(PYTHON) tools/debian-packages $(BOOK_PACKAGES)
course-packages:
	@PYTHON=$(PYTHON) tools/debian-packages $(COURSE_PACKAGES)
test-packages:
	@PYTHON=$(PYTHON) tools/debian-packages $(TEST_PACKAGES)

$(STAMP): requirements.txt requirements-dev.txt pyproject.toml course/pyproject.toml $(wildcard package-lock.json) | book-packages
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -r requirements-dev.txt
	if [ -f package-lock.json ]; then npm ci --no-audit --no-fund --loglevel=error; fi
	touch $(STAMP)

# The build executes the chapters (committed without outputs) through jupyter-cache in _build/.jupyter_cache:
# the first build executes every chapter, a rebuild only those whose code changed (all of them when attnlib or a
# pinned package changed: attnsite/execution.py). A failing cell, a failed assertion included, fails the build.
book: $(STAMP) | book-packages
	$(BIN)/jupyter-book build . --warningiserror --keep-going
	@echo "The book is at file://$(CURDIR)/$(HTML)/index.html  (make serve: http://127.0.0.1:$(PORT)/)"

# The print edition: the built site printed by Chromium into one PDF per edition (attnsite/print_book.py):
# _build/pdf/attention-step-by-step.pdf (exercises without solutions) and ...-instructors.pdf (with them).
# The instructors' PDF prints the instructor edition, built beside the student site in _build/instructor/.
pdf: book
	$(PY) -m attnsite.print_book --site $(HTML)
	ATTNLIB_EDITION=instructor $(BIN)/jupyter-book build . --warningiserror --keep-going --path-output _build/instructor
	$(PY) -m attnsite.print_book --site _build/instructor/_build/html --instructor

serve: book
	$(PY) -m http.server --bind 127.0.0.1 --directory $(HTML) $(PORT)

lint: $(STAMP)
	$(BIN)/ruff check .

# Everything: lint, the book build (it executes every chapter; the browser tests read it), every tier of tests/
# (tools/testsettings.py), every chapter once more under nbval on another CPU path and in float32 with the recorded
# answers graded, the site in a browser and the course; each stage's time at the end. tools/testrun.py runs the
# build beside the tests that do not need what it makes, then, beside them, those marked `built` (the site's, and the
# course's that read the site or the build's execution cache), with pytest-xdist on every core (TEST_WORKERS=N to
# choose); ARGS="-k ..." go to pytest.
test: $(STAMP) | test-packages
	$(PY) tools/testrun.py $(ARGS)

# The quick check before a commit (under a minute): lint, the tests of attnlib and the repository but those marked
# slow or browser (tests/lib, tests/repo), and nbval on the chapters changed since main, committed or not.
check: $(STAMP)
	$(PY) tools/testrun.py --check $(ARGS)

# One tier at a time (all of it, slow and browser tests included; ARGS="-k ..." go to pytest):
# test-lib    attnlib's tests (tests/lib)
# test-repo   the repository's own checks: layout, one home per fact, the test plumbing (tests/repo)
# test-book   every chapter under nbval (every cell runs, every assertion holds, the recorded answers are graded),
#             and the chapters' own tests (tests/book); ARGS="--kernel-env ATEN_CPU_CAPABILITY=default" runs the
#             chapters' kernels on another CPU path, "--kernel-env ATTNLIB_DTYPE=float32" in float32
# test-site   the built site in headless Chromium (tests/site; run `make book` first)
# test-course nbgrader releases and grading, the students' environment, JupyterLab (tests/course)
test-lib: $(STAMP)
	env $(ONE_THREAD) $(BIN)/pytest tests/lib $(ARGS)

# attnlib's tests on another torch, for the range pyproject.toml declares (its ends are what this is run on):
# make test-torch TORCH=2.11.0. A venv per version in _build/torch-<version>, made as .venv is, with that torch in
# place of requirements.txt's pin (and the Triton it pins in place of requirements.txt's); then tests/lib but the
# slow tests. Not part of make test: any torch but the CPU wheel on disk is a CUDA build from PyPI (2.11.0: 5.9 GB in
# the venv, 11 min to install here; the tests 6.5 min).
TORCH ?= 2.11.0
TORCH_VENV = _build/torch-$(TORCH)
.PHONY: test-torch
test-torch:
	test -x $(TORCH_VENV)/bin/python || $(PYTHON) -m venv $(TORCH_VENV)
	grep -v '^torch==\|^triton==' requirements.txt > $(TORCH_VENV)/requirements.txt
	cp requirements-dev.txt $(TORCH_VENV)/requirements-dev.txt  # its -r requirements.txt: the copy beside it
	$(TORCH_VENV)/bin/python -m pip install --quiet "torch==$(TORCH)" -r $(TORCH_VENV)/requirements-dev.txt
	env $$($(TORCH_VENV)/bin/python tools/testsettings.py one-thread) \
		$(TORCH_VENV)/bin/python -m pytest tests/lib -m "not slow" -p no:cacheprovider $(ARGS)

test-repo: $(STAMP)
	env $(ONE_THREAD) $(BIN)/pytest tests/repo $(ARGS)

test-book: $(STAMP)
	env $(ONE_THREAD) $(BIN)/pytest tests/book book $(NBVAL) $(ARGS)

test-site: $(STAMP) | test-packages
	env $(ONE_THREAD) $(BIN)/pytest tests/site $(ARGS)

test-course: $(STAMP) | test-packages
	env $(ONE_THREAD) $(BIN)/pytest tests/course $(ARGS)

# Chapters are committed without outputs (the build computes them): `make strip` removes the outputs an
# editor saved (nbstripout, keeping the cell ids that tests and cross-references name); tests/book checks it.
strip: $(STAMP)
	$(BIN)/nbstripout --keep-id book/*.ipynb

# JupyterLab on what students get: a copy of the releases (course/release/, every number in the prose) in
# _build/lab/; a release newer than its copy replaces it, otherwise your changes to a copy stay.
LAB_DIR := _build/lab
lab: $(STAMP)
	mkdir -p $(LAB_DIR) && cp -u course/release/*.ipynb $(LAB_DIR)/
	$(BIN)/jupyter lab --notebook-dir=$(LAB_DIR) $(if $(filter 0,$(shell id -u)),--allow-root)

# Course material with nbgrader (attncourse/, book/instructors.md), in the course directory $(COURSE), which every
# command updates and none deletes: student releases, autograding of new or changed submissions (a folder laid
# out as <student>/<assignment>/<notebook>.ipynb, or the course's own submitted/), feedback, the grade sheet.
student: $(STAMP)
	$(PY) -m attncourse --course "$(COURSE)" student
	$(PY) -m attncourse --course "$(COURSE)" publish

# JOBS=N grades N submissions at once (default: the cores); DASK=local or DASK=tcp://host:8786 grades on Dask.
autograde: $(STAMP) | course-packages
	$(PY) -m attncourse --course "$(COURSE)" autograde $(if $(SUBMISSIONS),"$(SUBMISSIONS)") $(if $(JOBS),--jobs $(JOBS)) $(if $(DASK),--dask "$(DASK)")

# make regrade ASSIGNMENT=03_softmax (after fixing a test; autograde also notices a changed assignment by itself),
# make roster FILE=students.csv (the class list: an id column), make due ASSIGNMENT=03_softmax DUE="2026-12-01 17:00 UTC".
regrade: $(STAMP) | course-packages
	$(PY) -m attncourse --course "$(COURSE)" regrade "$(ASSIGNMENT)" $(if $(JOBS),--jobs $(JOBS)) $(if $(DASK),--dask "$(DASK)")

roster: $(STAMP)
	$(PY) -m attncourse --course "$(COURSE)" roster "$(FILE)"

due: $(STAMP)
	$(PY) -m attncourse --course "$(COURSE)" due "$(ASSIGNMENT)" "$(DUE)"

# make import-zip ZIP=downloads.zip ASSIGNMENT=03_softmax: an LMS's download into submitted/ (then make autograde).
import-zip: $(STAMP)
	$(PY) -m attncourse --course "$(COURSE)" import-zip "$(ZIP)" "$(ASSIGNMENT)"

# Held back while written answers wait for a grader; FORCE=1 sends them as they are.
feedback: $(STAMP)
	$(PY) -m attncourse --course "$(COURSE)" feedback $(if $(FORCE),--force)

# Notebooks per minute grading a synthetic class with 1 and JOBS workers and a Dask LocalCluster (same grades
# required); GRADE_BENCH_ARGS="--students 16 --chapter 03_softmax --no-dask".
grade-bench: $(STAMP) | course-packages
	$(PY) -m attncourse bench $(if $(JOBS),--jobs $(JOBS)) $(GRADE_BENCH_ARGS)

grades: $(STAMP)
	$(PY) -m attncourse --course "$(COURSE)" grades

# Time and peak memory of attnlib's attention paths vs torch SDPA (CPU, and CUDA when present).
# Options: make bench BENCH_ARGS="--quick" or BENCH_ARGS="--lengths 512 1024 --batch 4 --heads 8".
bench: $(STAMP)
	$(PY) -m attnlib.bench $(BENCH_ARGS)

clean:
	rm -rf _build .pytest_cache .hypothesis
