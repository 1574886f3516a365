"""A pytest plugin: how the tests share the cores and report their time (tests/conftest.py imports its hooks).

``make test`` (tools/testrun.py) runs pytest with pytest-xdist, ``-n <cores>``. The rules are data in
tools/testsettings.py (``PART_BY_PATH``, ``SPREAD``, ``BY_PAGE``, ``TOGETHER``); this module applies them:

- **Groups.** xdist schedules whole groups (``pytest_xdist_make_scheduler``), each run in one worker: a
  group is a file (a notebook's cells share one kernel; a module's fixtures are built once), except in the
  files in ``SPREAD``, whose tests are independent runs, one group each, in ``BY_PAGE``, where the
  tests of one page of the site make a group, and in ``TOGETHER``, which join another file's group (they
  share a session fixture that two workers may not build at once).
- **Longest first.** In the workers the groups are ordered by the time they took in the previous run
  (``HISTORY``, ``_build/test-times/groups.json``; without it, chapters and tests marked slow first), so the
  long ones do not start last.
- **Parts.** Each test counts toward one part of the timing summary (``PARTS``): by its file's path
  (``PART_BY_PATH``: strict nbval over the chapters and the book tier are ``notebooks``, the course tier is
  ``course``), else ``browser`` when it is marked so, else ``unit``. At the end pytest prints, per part, the
  summed time of its tests and the wall-clock span from its first test's start to its last test's end;
  ``ATTNLIB_TEST_TIMES`` (a JSON file) receives the same figures for tools/testrun.py's summary.
  ``--parts unit,notebooks`` runs only those parts.
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

import pytest

from tools import testsettings as settings

PAGE_PARAM = re.compile(r"\[([^\]]*?\.html)")


def _path(nodeid: str) -> str:
    return nodeid.split("::", 1)[0]


def part(nodeid: str, keywords) -> str:
    """The summary part a test counts toward (from its node id and keywords/markers)."""
    path = _path(nodeid)
    for prefix, name in settings.PART_BY_PATH.items():
        if path.startswith(prefix):
            return name
    return "browser" if "browser" in keywords else "unit"


def group(nodeid: str) -> str:
    """The group of a test (all of it runs in one worker): its file; its own node id in a SPREAD file; its
    file and page in a BY_PAGE file; the first file's group for a file in TOGETHER."""
    path = _path(nodeid)
    if path in settings.TOGETHER:
        return settings.TOGETHER[path]
    if path in settings.BY_PAGE:
        page = PAGE_PARAM.search(nodeid)
        return f"{path}::{page[1]}" if page else nodeid
    return nodeid if path in settings.SPREAD else path


def history() -> dict[str, float]:
    """Each group's seconds in the last xdist run (``{}`` before the first)."""
    try:
        return json.loads(settings.HISTORY.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}


def pytest_addoption(parser):
    parser.addoption("--parts", default=None, metavar="PART,...",
                     help=f"run only the tests of these parts of the summary ({', '.join(settings.PARTS)})")


def _select_parts(config, items) -> None:
    wanted = config.getoption("parts")
    if not wanted:
        return
    wanted = set(wanted.split(","))
    unknown = wanted - set(settings.PARTS)
    if unknown:
        raise pytest.UsageError(f"--parts: expected some of {', '.join(settings.PARTS)}, "
                                f"got {', '.join(sorted(unknown))}")
    keep = [item for item in items if part(item.nodeid, item.keywords) in wanted]
    config.hook.pytest_deselected(items=[item for item in items if item not in keep])
    items[:] = keep


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config, items):
    _select_parts(config, items)
    if hasattr(config, "workerinput"):  # an xdist worker: the scheduler takes the groups in this order
        items.sort(key=_longest_first(items))  # a stable sort: the order inside a group is kept


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config, log):
    """xdist's scope scheduler with our groups as scopes (xdist 3.8's loadgroup marks do not reach
    node ids under pytest 9, and nbval needs a notebook's cells in one worker whatever --dist says)."""
    from xdist.scheduler import LoadScopeScheduling  # noqa: PLC0415 - xdist is there when this hook runs

    class GroupScheduling(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            return group(nodeid)

    return GroupScheduling(config, log)


def _longest_first(items):
    """Sort key: minus the group's time in the last run; without one, chapters and slow tests first."""
    past, estimate = history(), {}
    for item in items:
        heavy = _path(item.nodeid).endswith(".ipynb") or item.get_closest_marker("slow") is not None
        key = group(item.nodeid)
        estimate[key] = max(estimate.get(key, 0.0), float("inf") if heavy else 0.0)
    return lambda item: -past.get(group(item.nodeid), estimate[group(item.nodeid)])


class Times:
    """Per part: summed test time (setup + call + teardown) and first start / last stop."""

    def __init__(self):
        self.parts: dict[str, dict[str, float]] = {}
        self.groups: dict[str, float] = {}

    def add(self, report) -> None:
        nodeid = report.nodeid
        entry = self.parts.setdefault(part(nodeid, report.keywords),
                                      {"seconds": 0.0, "start": report.start, "stop": report.stop, "tests": 0})
        entry["seconds"] += report.duration
        entry["start"], entry["stop"] = min(entry["start"], report.start), max(entry["stop"], report.stop)
        entry["tests"] += report.when == "call"
        self.groups[group(nodeid)] = self.groups.get(group(nodeid), 0.0) + report.duration

    def lines(self) -> list[str]:
        rows = []
        for name in sorted(self.parts, key=lambda p: settings.PARTS.index(p) if p in settings.PARTS else 99):
            e = self.parts[name]
            rows.append(f"  {name:10s} {e['tests']:5d} tests  {e['seconds']:7.1f} s of test time  "
                        f"{e['stop'] - e['start']:7.1f} s wall span")
        return rows


_times = Times()


def pytest_runtest_logreport(report):
    if not hasattr(report, "start"):
        return
    _times.add(report)


def pytest_terminal_summary(terminalreporter, config):
    if hasattr(config, "workerinput") or not _times.parts:  # an xdist worker: the controller reports
        return
    terminalreporter.write_sep("-", "time per part")
    for line in _times.lines():
        terminalreporter.write_line(line)
    target = os.environ.get("ATTNLIB_TEST_TIMES")
    if target:
        Path(target).parent.mkdir(parents=True, exist_ok=True)
        Path(target).write_text(json.dumps(_times.parts, indent=1), encoding="utf-8")
    if getattr(config.option, "dist", "no") != "no":
        settings.HISTORY.parent.mkdir(parents=True, exist_ok=True)
        merged = {**history(), **_times.groups}
        tmp = settings.HISTORY.with_suffix(".tmp")
        tmp.write_text(json.dumps(merged, indent=1, sort_keys=True), encoding="utf-8")
        tmp.replace(settings.HISTORY)
