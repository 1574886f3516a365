"""The recorded answers of an autograded chapter, graded in the kernel nbval has just run the chapter in.

``attncourse/variants.py`` says what is checked (a wrong answer loses points, an alternative gets full marks...).
nbgrader's autograde runs a submission top to bottom; after nbval's last cell the kernel has done exactly that
with the reference solutions, so each recorded answer runs there as the answer cell, followed by the exercise's
tests: ``<chapter>.ipynb::recorded answers``, an item added after the chapter's last cell, with no execution of
the chapter of its own. A pytest plugin, loaded by the root ``conftest.py``.
"""

from __future__ import annotations

import nbformat
import pytest


class RecordedAnswers(pytest.Item):
    """``<chapter>.ipynb::recorded answers``: runs after the chapter's last cell, in its nbval kernel."""

    def runtest(self):
        from attncourse import variants  # noqa: PLC0415

        stem = self.path.stem
        nb = nbformat.read(self.path, as_version=4)
        answers = variants.load_answers(stem)
        missing = variants.format_problems(nb, answers)
        assert missing == [], f"{stem}'s recorded answers: " + "; ".join(missing)
        kernel = self.parent.kernel
        if kernel is None or not kernel.is_alive():
            pytest.fail(f"{stem}: the chapter's kernel is not running (did a cell time out?)", pytrace=False)
        timeout = float(self.config.option.nbval_cell_timeout)
        results = variants.grade(lambda source: execute(kernel.kc, source, timeout), nb, stem, answers)
        unfair = variants.problems(results, answers)
        assert unfair == [], f"{stem}: grading is unfair to recorded answers:\n" + "\n".join(unfair)

    def reportinfo(self):
        return self.path, None, f"{self.path.name}::recorded answers"


def execute(client, source: str, timeout: float) -> list[dict]:
    """Run ``source`` with the kernel ``client``; its outputs as notebook output dicts (errors included)."""
    outputs: list = []

    def keep(msg: dict) -> None:
        kind = msg["msg_type"]
        if kind == "clear_output":
            outputs.clear()
        elif kind in ("stream", "display_data", "execute_result", "error"):
            outputs.append(nbformat.v4.output_from_msg(msg))

    client.execute_interactive(source, allow_stdin=False, timeout=timeout, output_hook=keep)
    return outputs


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(items):
    """After the last collected cell of each chapter with autograded exercises, its recorded-answers item."""
    from nbval.plugin import IPyNbFile  # noqa: PLC0415

    from attncourse.exercise_cells import autograded_points  # noqa: PLC0415

    last = {}
    for index, item in enumerate(items):
        if isinstance(item.parent, IPyNbFile):
            last[item.parent] = index
    for parent, index in sorted(last.items(), key=lambda pair: -pair[1]):  # from the end: indexes stay valid
        if autograded_points(nbformat.read(parent.path, as_version=4)):
            items.insert(index + 1, RecordedAnswers.from_parent(parent, name="recorded answers"))
