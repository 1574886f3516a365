"""attnsite/execution.py: the chapters' execution cache holds what the current code computes, and nothing older.

A chapter executed once is read from the cache (no second execution); a chapter whose code changed is executed
again; a change to attnlib's files empties the whole cache. The whole book behaves the same way in ``make book``
(a fresh clone executes every chapter once, a second build none, an edited chapter alone: measured in issue #42's
note); here on a notebook of two cells, in a cache of its own.
"""

from __future__ import annotations

import nbformat
import pytest

from attnsite import execution

pytestmark = pytest.mark.slow  # starts a kernel


@pytest.fixture
def chapter(tmp_path, monkeypatch):
    monkeypatch.setattr(execution, "cache_folder", lambda: tmp_path / "cache")
    path = tmp_path / "chapter.ipynb"
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell("x = 6 * 7"), nbformat.v4.new_code_cell("x")])
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nbformat.write(nb, path)
    return path


def count_executions(monkeypatch) -> list:
    import jupyter_cache.executors.utils as utils  # noqa: PLC0415

    runs, real = [], utils.single_nb_execution
    monkeypatch.setattr(utils, "single_nb_execution", lambda nb, **kw: runs.append(1) or real(nb, **kw))
    return runs


def result(nb) -> str:
    return nb.cells[1].outputs[0]["data"]["text/plain"]


def test_a_chapter_is_executed_once_and_again_only_when_its_code_or_attnlib_changes(chapter, monkeypatch):
    runs = count_executions(monkeypatch)
    assert result(execution.executed(chapter)) == "42" and len(runs) == 1
    assert result(execution.executed(chapter)) == "42" and len(runs) == 1, "executed again, code unchanged"
    nb = nbformat.read(chapter, as_version=4)
    nb.cells[0].source = "x = 6 * 8"
    nbformat.write(nb, chapter)
    assert result(execution.executed(chapter)) == "48" and len(runs) == 2, "its code changed"
    monkeypatch.setattr(execution, "cache_key", lambda: "another attnlib")
    assert result(execution.executed(chapter)) == "48" and len(runs) == 3, "attnlib changed: the cache is emptied"


def test_a_failing_cell_raises_with_its_traceback(chapter):
    nb = nbformat.read(chapter, as_version=4)
    nb.cells[0].source = "assert 6 * 7 == 41, 'the claim does not hold'"
    nbformat.write(nb, chapter)
    with pytest.raises(RuntimeError, match="the claim does not hold"):
        execution.executed(chapter)
