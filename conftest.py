"""The chapters' policy, for every run of nbval over ``book/`` (``make test``, ``make check``, ``make test-book``,
``pytest --nbval-lax book/NN_x.ipynb``).

The chapters are committed without outputs and the site's build executes them, so a run over them checks what
the book claims, not stored digits: nbval runs with ``--nbval-lax`` (every cell runs; an error, a failed
assertion included, fails its cell), and

- every cell runs: a cell tagged ``nbval-skip`` (or ``# NBVAL_SKIP``) fails, since what it asserts would go
  unchecked (a cell that must raise is tagged ``raises-exception``, which the book build honours too);
- every chapter kernel computes on one thread (``tools.testsettings.ONE_THREAD``), and ``--kernel-env NAME=VALUE``
  sets a variable in the chapters' kernels only (``make test`` runs them on torch's plain CPU path in float32:
  ``tools.testsettings.BOOK_RUN``), not in the tests beside them;
- after an autograded chapter's last cell, its recorded answers are graded in the kernel that has just run it
  (``tests/book/recorded_answers.py``, a plugin of its own).

This file is the repository root's conftest so that it applies to every such run, and ``book/`` holds content only.
"""

from __future__ import annotations

import os

import pytest

from tools.testsettings import ONE_THREAD  # the repository's root is on sys.path (pyproject's pythonpath)

pytest_plugins = ["tests.book.recorded_answers"]

os.environ.update(ONE_THREAD)  # nbval starts each kernel with this process's environment


def pytest_addoption(parser):
    parser.addoption("--kernel-env", action="append", default=[], metavar="NAME=VALUE",
                     help="an environment variable for the chapters' kernels only (repeatable)")


def _kernel_env(config) -> dict[str, str]:
    pairs = [text.partition("=") for text in config.getoption("kernel_env")]
    wrong = [name for name, sign, _ in pairs if not (name and sign)]
    if wrong:
        raise pytest.UsageError(f"--kernel-env: expected NAME=VALUE, got {', '.join(map(repr, wrong))}")
    return {name: value for name, _, value in pairs}


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_setup(item):
    """A chapter's kernel starts when its first cell is set up: with ``--kernel-env``'s variables, which the test
    process itself does not keep."""
    env = _kernel_env(item.config) if item.path.suffix == ".ipynb" else {}
    saved = {name: os.environ.get(name) for name in env}
    os.environ.update(env)
    try:
        yield
    finally:
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


def _refuse(item, reason: str):
    def runtest():
        pytest.fail(f"{item.nodeid}: {reason}", pytrace=False)

    return runtest


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config, items):
    """Refuse a skipped chapter cell (see the module docstring)."""
    if not (getattr(config.option, "nbval", False) or getattr(config.option, "nbval_lax", False)):
        return
    from nbval.plugin import IPyNbCell  # noqa: PLC0415 - nbval is a test dependency only

    for item in items:
        if isinstance(item, IPyNbCell) and item.options["skip"]:
            item.runtest = _refuse(item, "every cell of a chapter runs, so that what it asserts is checked: drop "
                                         "nbval-skip (a cell that must raise is tagged raises-exception)")
