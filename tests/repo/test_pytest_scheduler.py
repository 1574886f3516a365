"""tools/pytest_scheduler.py: which tests pytest-xdist hands whole to one worker, the order groups start in, and
that the plugin is still needed (pytest-xdist's own loadgroup still does not group on the pinned versions)."""

from __future__ import annotations

import os
import subprocess
import sys
from types import SimpleNamespace

import pytest

from tools import pytest_scheduler as scheduler
from tools import testsettings


def test_a_notebook_and_a_file_are_one_group_a_site_page_its_own():
    cells = {scheduler.group(f"book/03_softmax.ipynb::Cell {i}") for i in range(5)}
    assert cells == {"book/03_softmax.ipynb"}
    assert scheduler.group("tests/site/test_site.py::test_x[book/intro]") == "tests/site/test_site.py"
    assert (scheduler.group("tests/site/test_accessibility.py::test_axe[book/intro.html-light]")
            == "tests/site/test_accessibility.py::book/intro.html")
    assert (scheduler.group("tests/course/test_release.py::test_x")
            == scheduler.group("tests/course/test_jupyterlab.py::test_y"))


def test_every_file_the_rules_name_exists():
    """A rule keyed by a path that no longer exists (a file moved, renamed) would silently stop applying."""
    named = {*scheduler.BY_PAGE, *scheduler.TOGETHER, *scheduler.TOGETHER.values(), *testsettings.TIERS.values(),
             testsettings.CHAPTERS}
    assert sorted(name for name in named if not (testsettings.REPO / name).exists()) == []


def _item(nodeid: str, slow: bool = False):
    return SimpleNamespace(nodeid=nodeid, get_closest_marker=lambda name: object() if slow and name == "slow" else None)


def test_in_a_worker_chapters_and_slow_groups_start_first_and_keep_their_order():
    items = [_item("t/test_a.py::t1"), _item("book/01_x.ipynb::Cell 0"), _item("book/01_x.ipynb::Cell 1"),
             _item("t/test_b.py::t1"), _item("t/test_a.py::t2", slow=True)]
    scheduler.pytest_collection_modifyitems(SimpleNamespace(workerinput={}), items)
    expected = ["t/test_a.py::t1", "book/01_x.ipynb::Cell 0", "book/01_x.ipynb::Cell 1",
                "t/test_a.py::t2", "t/test_b.py::t1"]
    assert [i.nodeid for i in items] == expected


@pytest.mark.slow
def test_pytest_xdists_own_loadgroup_still_does_not_group(tmp_path):
    """pytest-xdist#1386: when this fails, ``--dist loadgroup`` groups again and tools/pytest_scheduler.py can go."""
    module = ("import os, pytest\n@pytest.mark.xdist_group(name='g')\n@pytest.mark.parametrize('i', range(6))\n"
              "def test_x(i):\n    print(os.environ['PYTEST_XDIST_WORKER'])\n")
    (tmp_path / "test_grouped.py").write_text(module)
    # xdist alone: the other installed plugins (nbval, hypothesis, ...) cost 14 of the run's 15 CPU-s and group nothing
    done = subprocess.run([sys.executable, "-m", "pytest", "-p", "xdist", "-p", "no:cacheprovider", "-n", "2", "--dist",
                           "loadgroup", "-v", str(tmp_path)], capture_output=True, text=True, cwd=tmp_path, check=False,
                          env={**os.environ, "PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1"})
    workers = {line.split("]")[0].strip("[") for line in done.stdout.splitlines() if "PASSED" in line}
    assert done.returncode == 0, done.stdout[-2000:]
    assert workers == {"gw0", "gw1"}, f"loadgroup kept the group in {workers}: drop tools/pytest_scheduler.py"
