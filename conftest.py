"""Strict nbval on the chapters covers every output the website shows.

The site is built from the outputs stored in these notebooks (``_config.yml``: ``execute_notebooks: off``),
and ``make test`` runs every chapter under strict nbval (``--nbval``), so an output the site shows must be
one that nbval has just compared with what the current code computes. Therefore, for every code cell whose
output the site shows (any cell not tagged ``remove-output`` or ``remove-cell``):

- ``nbval-ignore-output`` (or ``# NBVAL_IGNORE_OUTPUT``) does not exempt it: its output is compared all the
  same. An output that truly differs from run to run is either sanitized (``tests/book/nbval_sanitize.cfg``) or
  hidden from the site with ``remove-output``;
- ``nbval-skip`` (or ``# NBVAL_SKIP``) fails, and so does a cell stored unexecuted (``execution_count: null``),
  which nbval would pass without comparing: execute the notebook and commit it executed.

It also runs every chapter kernel on one thread (``ONE_THREAD``), and after each autograded chapter's last
cell grades the course's recorded answers in that chapter's kernel (the ``recorded answers`` item below).

This file is the repository root's conftest, so that every nbval run over ``book/`` (``make test``, ``make check``,
``make test-book``, ``pytest --nbval book/NN_x.ipynb``) applies it, and ``book/`` holds content only.
"""

from __future__ import annotations

import os

import pytest

from tools.testsettings import ONE_THREAD  # the repository's root is on sys.path (pyproject's pythonpath)

HIDDEN_ON_SITE = {"remove-output", "remove-cell"}

# Every chapter kernel computes on one thread (tools/testsettings.py's ONE_THREAD says why); tools/execute.py,
# which stores the outputs, runs the kernels with the same settings.
os.environ.update(ONE_THREAD)  # nbval starts each kernel with this process's environment


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
    _add_recorded_answers(items)


# --- the recorded answers of an autograded chapter, graded in the kernel nbval ran it in ----------------
#
# course/variants.py says what is checked (a wrong answer loses points, an alternative gets full marks...).
# nbgrader's autograde runs a submission top to bottom; after nbval's last cell this kernel has done exactly
# that with the reference solutions, so each recorded answer runs here as the answer cell, followed by the
# exercise's tests, with no execution of the chapter of its own.


class RecordedAnswers(pytest.Item):
    """``<chapter>.ipynb::recorded answers``: runs after the chapter's last cell, in its nbval kernel."""

    def runtest(self):
        import nbformat  # noqa: PLC0415

        from course import variants  # noqa: PLC0415 - the course package, beside book/

        stem = self.path.stem
        nb = nbformat.read(self.path, as_version=4)
        answers = variants.load_answers(stem)
        missing = variants.format_problems(nb, answers)
        assert missing == [], f"{stem}'s recorded answers: " + "; ".join(missing)
        kernel = self.parent.kernel
        if kernel is None or not kernel.is_alive():
            pytest.fail(f"{stem}: the chapter's kernel is not running (did a cell time out?)", pytrace=False)
        timeout = float(self.config.option.nbval_cell_timeout)
        results = variants.grade(lambda source: _execute(kernel, source, timeout), nb, stem, answers)
        unfair = variants.problems(results, answers)
        assert unfair == [], f"{stem}: grading is unfair to recorded answers:\n" + "\n".join(unfair)

    def reportinfo(self):
        return self.path, None, f"{self.path.name}::recorded answers"


def _execute(kernel, source: str, timeout: float) -> list[dict]:
    """Run ``source`` in nbval's kernel; its outputs as notebook output dicts (errors included)."""
    msg_id = kernel.execute_cell_input(source, allow_stdin=False)
    kernel.await_reply(msg_id, timeout=timeout)
    outputs = []
    while True:
        msg = kernel.get_message(stream="iopub", timeout=timeout)
        if msg["parent_header"].get("msg_id") != msg_id:
            continue
        kind, content = msg["msg_type"], msg["content"]
        if kind == "status" and content["execution_state"] == "idle":
            return outputs
        if kind == "stream":
            outputs.append({"output_type": "stream", "name": content["name"], "text": content["text"]})
        elif kind in ("display_data", "execute_result"):
            outputs.append({"output_type": kind, "data": content["data"], "metadata": content.get("metadata", {}),
                            **({"execution_count": content.get("execution_count")} if kind == "execute_result"
                               else {})})
        elif kind == "error":
            outputs.append({"output_type": "error", "ename": content["ename"], "evalue": content["evalue"],
                            "traceback": content["traceback"]})
        elif kind == "clear_output":
            outputs.clear()


def _add_recorded_answers(items) -> None:
    """After the last collected cell of each chapter with autograded exercises, its recorded-answers item."""
    import nbformat  # noqa: PLC0415
    from nbval.plugin import IPyNbFile  # noqa: PLC0415

    from course.exercise_cells import autograded_points  # noqa: PLC0415

    last = {}
    for index, item in enumerate(items):
        if isinstance(item.parent, IPyNbFile) and not isinstance(item, RecordedAnswers):
            last[item.parent] = index
    for parent, index in sorted(last.items(), key=lambda pair: -pair[1]):  # from the end: indexes stay valid
        if autograded_points(nbformat.read(parent.path, as_version=4)):
            items.insert(index + 1, RecordedAnswers.from_parent(parent, name="recorded answers"))
