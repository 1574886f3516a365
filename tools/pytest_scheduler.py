"""A pytest plugin: the groups of tests pytest-xdist hands whole to one worker (tests/conftest.py loads it).

pytest-xdist's own ``--dist loadgroup`` does not group on the pinned pytest 9.2 + pytest-xdist 3.8: its
``xdist_group`` marks reach the scheduler by rewriting node ids, which pytest 9.2 no longer takes (pytest-xdist#1386,
open; ``tests/repo/test_pytest_scheduler.py`` checks that it still fails, so this plugin can go when it is fixed).
So ``make test`` runs ``--dist loadscope`` with xdist's scope scheduler fed our groups:

- a file is a group (a notebook's cells share one kernel; a module's fixtures are built once), except
- ``BY_PAGE``: one group per page of the site, so the pages spread over the workers while the tests of one page
  share its load (axe reads the light and dark mode of one load);
- ``TOGETHER``: files that join another file's group, because they share a session fixture that two processes may
  not build at once (the students' venv, tests/course/students.py).

Groups are handed out in collection order, so in each worker the notebooks and the tests marked slow come first:
the long ones do not start last.
"""

from __future__ import annotations

import re

import pytest

BY_PAGE = {"tests/site/test_accessibility.py"}
TOGETHER = {"tests/course/test_release.py": "tests/course/test_jupyterlab.py"}
PAGE_PARAM = re.compile(r"\[([^\]]*?\.html)")


def group(nodeid: str) -> str:
    """The group of a test (all of it runs in one worker): its file; its file and page in a ``BY_PAGE`` file; the
    other file's group for a file in ``TOGETHER``."""
    path = nodeid.split("::", 1)[0]
    if path in TOGETHER:
        return TOGETHER[path]
    if path in BY_PAGE:
        page = PAGE_PARAM.search(nodeid)
        return f"{path}::{page[1]}" if page else nodeid
    return path


def heavy_first(item) -> int:
    """Sort key: 0 for a chapter's cells and the tests marked slow (whole groups move), 1 for the rest."""
    return 0 if item.nodeid.split("::", 1)[0].endswith(".ipynb") or item.get_closest_marker("slow") else 1


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config, items):
    if hasattr(config, "workerinput"):  # an xdist worker: the scheduler takes the groups in this order
        heavy = {group(item.nodeid) for item in items if heavy_first(item) == 0}
        items.sort(key=lambda item: group(item.nodeid) not in heavy)  # stable: a group's order is kept


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config, log):
    """xdist's scope scheduler with our groups as scopes."""
    from xdist.scheduler import LoadScopeScheduling  # noqa: PLC0415 - xdist is there when this hook runs

    class GroupScheduling(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            return group(nodeid)

    return GroupScheduling(config, log)
