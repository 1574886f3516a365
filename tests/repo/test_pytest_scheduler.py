"""tools/pytest_scheduler.py with tools/testsettings.py's rules: which worker group and which summary part each
test belongs to, and the order groups start in."""

from __future__ import annotations

import json
from types import SimpleNamespace

import pytest

from tools import pytest_scheduler as scheduler
from tools import testsettings


def test_parts_follow_tier_and_marker():
    assert scheduler.part("book/03_softmax.ipynb::Cell 4", {}) == "notebooks"
    assert scheduler.part("tests/book/test_chapters_float32.py::test_chapter_runs_in_float32[03_softmax]",
                          {}) == "notebooks"
    assert scheduler.part("tests/course/test_course.py::test_page[x]", {"browser": 1}) == "course"
    assert scheduler.part("tests/site/test_site.py::test_no_console_errors[book/intro]", {"browser": 1}) == "browser"
    assert scheduler.part("tests/lib/test_views_bertviz.py::test_in_chromium", {"browser": 1}) == "browser"
    assert scheduler.part("tests/lib/test_softmax.py::test_rows_sum_to_one", {}) == "unit"


def test_a_notebook_is_one_group_and_each_float32_run_its_own():
    cells = {scheduler.group(f"book/03_softmax.ipynb::Cell {i}") for i in range(5)}
    assert cells == {"book/03_softmax.ipynb"}
    runs = [f"tests/book/test_chapters_float32.py::test_chapter_runs_in_float32[{c}]" for c in ("01_a", "02_b")]
    assert [scheduler.group(r) for r in runs] == runs
    assert scheduler.group("tests/site/test_site.py::test_x[book/intro]") == "tests/site/test_site.py"
    assert (scheduler.group("tests/site/test_accessibility.py::test_axe[book/intro.html-light]")
            == "tests/site/test_accessibility.py::book/intro.html")
    assert (scheduler.group("tests/course/test_release.py::test_x")
            == scheduler.group("tests/course/test_jupyterlab.py::test_y"))


def test_every_file_the_rules_name_exists():
    """A rule keyed by a path that no longer exists (a file moved, renamed) would silently stop applying."""
    named = {*testsettings.SPREAD, *testsettings.BY_PAGE, *testsettings.TOGETHER, *testsettings.TOGETHER.values(),
             *testsettings.TIERS.values(), *testsettings.PART_BY_PATH, testsettings.CHAPTERS}
    missing = sorted(name for name in named if not (testsettings.REPO / name).exists())
    assert missing == []
    assert set(testsettings.PART_BY_PATH.values()) <= set(testsettings.PARTS)


def item(nodeid: str, slow: bool = False):
    return SimpleNamespace(nodeid=nodeid, get_closest_marker=lambda name: object() if slow and name == "slow" else None)


def test_groups_start_longest_first_and_keep_their_order(tmp_path, monkeypatch):
    monkeypatch.setattr(testsettings, "HISTORY", tmp_path / "groups.json")
    items = [item("tests/lib/test_a.py::t1"), item("book/01_x.ipynb::Cell 0"), item("book/01_x.ipynb::Cell 1"),
             item("tests/lib/test_b.py::t1"), item("tests/lib/test_a.py::t2")]
    ordered = sorted(items, key=scheduler._longest_first(items))
    assert [i.nodeid for i in ordered][:2] == ["book/01_x.ipynb::Cell 0", "book/01_x.ipynb::Cell 1"]  # no history
    (tmp_path / "groups.json").write_text(json.dumps({"tests/lib/test_b.py": 50.0, "book/01_x.ipynb": 20.0,
                                                      "tests/lib/test_a.py": 1.0}))
    ordered = sorted(items, key=scheduler._longest_first(items))
    assert [i.nodeid for i in ordered] == ["tests/lib/test_b.py::t1", "book/01_x.ipynb::Cell 0",
                                           "book/01_x.ipynb::Cell 1", "tests/lib/test_a.py::t1",
                                           "tests/lib/test_a.py::t2"]


def test_unknown_part_is_a_usage_error():
    config = SimpleNamespace(getoption=lambda name: "unit,nonsense")
    with pytest.raises(pytest.UsageError, match="nonsense"):
        scheduler._select_parts(config, [])
