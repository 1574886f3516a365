"""Strict nbval on the chapters covers every output the website shows.

The site is built from the outputs stored in these notebooks (``_config.yml``: ``execute_notebooks: off``),
and ``make test`` runs every chapter under strict nbval (``--nbval``), so an output the site shows must be
one that nbval has just compared with what the current code computes. Therefore, for every code cell whose
output the site shows (any cell not tagged ``remove-output`` or ``remove-cell``):

- ``nbval-ignore-output`` (or ``# NBVAL_IGNORE_OUTPUT``) does not exempt it: its output is compared all the
  same. An output that truly differs from run to run is either sanitized (``tests/nbval_sanitize.cfg``) or
  hidden from the site with ``remove-output``;
- ``nbval-skip`` (or ``# NBVAL_SKIP``) fails, and so does a cell stored unexecuted (``execution_count: null``),
  which nbval would pass without comparing: execute the notebook and commit it executed.

This file sits beside the notebooks so that every nbval run over ``book/`` (``make test``,
``make notebooks``, ``pytest --nbval book/NN_x.ipynb``) applies it.
"""

from __future__ import annotations

import pytest

HIDDEN_ON_SITE = {"remove-output", "remove-cell"}


def shown_on_site(cell) -> bool:
    """True when the website shows this code cell's stored output (myst-nb's remove-* tags hide it)."""
    return not HIDDEN_ON_SITE & set(cell.get("metadata", {}).get("tags", []))


def _refuse(item, reason: str):
    def runtest():
        pytest.fail(f"{item.nodeid}: {reason}", pytrace=False)

    return runtest


def _apply_policy(item) -> None:
    if item.options["skip"]:
        item.runtest = _refuse(item, "the site shows this cell's stored output, so nbval may not skip it "
                                     "(drop nbval-skip, or hide the output with the remove-output tag)")
    elif item.cell.get("execution_count") is None:
        item.runtest = _refuse(item, "stored unexecuted (execution_count null), so nbval would not compare it: "
                                     "execute the notebook and commit it executed")
    elif not item.options["check"]:
        item.options["check"] = True  # nbval-ignore-output: compared all the same (see the module docstring)


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config, items):
    if not getattr(config.option, "nbval", False):  # --nbval-lax: only errors count, nothing to enforce
        return
    from nbval.plugin import IPyNbCell  # noqa: PLC0415 - nbval is a test dependency only

    for item in items:
        if isinstance(item, IPyNbCell) and shown_on_site(item.cell):
            _apply_policy(item)
