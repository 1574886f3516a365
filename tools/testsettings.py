"""The test settings, in one place: the tiers, strict nbval's flags, the one-thread environment, the parts of
the timing summary and how the tests share the workers. Standard library only: the Makefile, tools/testrun.py,
tools/execute.py, tools/pytest_scheduler.py and the root conftest.py read it.

From the shell (the Makefile): ``python tools/testsettings.py nbval`` prints strict nbval's flags,
``... one-thread`` the environment as ``NAME=value`` words, ``... changed-chapters`` the chapters ``make check``
runs (changed since ``CHECK_BASE``, committed or not; nothing when none changed), ``... cpu-paths`` torch's CPU
code paths on this machine, narrowest first.
"""

from __future__ import annotations

import functools
import json
import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]

# The tiers, by what their tests exercise (each folder's __init__.py says more).
TIERS = {
    "lib": "tests/lib",  # attnlib: maths, views, widgets, plots, models, interpret; fast but for the `slow` ones
    "book": "tests/book",  # the chapters: their float32 runs and the strict-nbval policy (the root conftest.py)
    "site": "tests/site",  # the built site in headless Chromium: pages, accessibility, the print edition
    "course": "tests/course",  # nbgrader: releases, grading, the students' environment and JupyterLab
}
CHAPTERS = "book"  # every notebook here runs under strict nbval (NBVAL); the root conftest.py holds its policy

NBVAL = ("--nbval", "--nbval-current-env", "--nbval-sanitize-with", "tests/book/nbval_sanitize.cfg")

# Every test process and chapter kernel computes on one thread. A float sum is then added up in one order on
# every machine, so a printed last digit does not depend on the cores (tools/execute.py stores the outputs
# with it, strict nbval compares with it); and xdist's workers already keep every core busy, while torch on
# two threads beside another busy process spins and waits (the induction training: 3 s alone, 48 s with
# two threads under xdist).
ONE_THREAD = {"OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1"}

# The CPU code paths torch's kernels can take (ATEN_CPU_CAPABILITY), narrowest first. torch picks the widest
# the CPU has at run time, and float results differ between paths in their last bits (summation order, FMA,
# vectorised exp/log), so a stored output may hold only what every path reproduces (CONTRIBUTING.md, "Numbers
# every CPU reproduces"). `make test` runs every chapter three times, each run under another path: strict nbval
# under the machine's own (widest), the students'-venv release run, which compares every glued value with the
# book's, under the narrowest (`default`), the float32 run under a third where there is one (see `run_paths`).
CPU_PATHS = ("default", "avx2", "avx512")  # x86-64; an ARM build of torch knows default and its own (sve256)
CPU_PATH_VARIABLE = "ATEN_CPU_CAPABILITY"

# `make check`: lint, the library's tests but the slow and browser ones, strict nbval on the chapters changed
# since this branch left CHECK_BASE.
CHECK_BASE = "main"
CHECK_MARKERS = "not slow and not browser"

# --- the parts of the timing summary, and how `make test` shares the workers (tools/pytest_scheduler.py) ----
PARTS = ("unit", "notebooks", "browser", "course")
# A test's part: the first path prefix here that its file starts with; else `browser` when it is so marked;
# else `unit`. tools/testrun.py runs unit + notebooks beside the book build, browser + course after it.
PART_BY_PATH = {"book/": "notebooks", "tests/book/": "notebooks", "tests/course/": "course"}
# Files whose tests are independent runs: every test its own group (one chapter's float32 run each).
SPREAD = {"tests/book/test_chapters_float32.py"}
# One group per page of the site: the tests of a page run together (axe reads the light and dark mode of one
# load), the pages spread over the workers; a test without a page is a group of its own.
BY_PAGE = {"tests/site/test_accessibility.py"}
# Files that join another file's group: they share a session fixture that two processes may not build at
# once (the students' venv, tests/course/students.py), so one worker runs both.
TOGETHER = {"tests/course/test_release.py": "tests/course/test_jupyterlab.py"}
# Where each group's time in the last run is kept (the longest groups start first in the next one).
HISTORY = REPO / "_build" / "test-times" / "groups.json"
# What features of the tests cost, measured where they run (tests/costs.py writes a file per test process;
# tools/testrun.py empties the folder before a run and prints the sums after it).
COSTS = REPO / "_build" / "test-times" / "costs"


def cost_totals(folder: Path = COSTS) -> dict[str, dict]:
    """``{name: {"what", "unit", "cpu_s", "wall_s", "count"}}``: tests/costs.py's records summed over every test
    process's file."""
    out: dict[str, dict] = {}
    for path in sorted(folder.glob("*.json")) if folder.is_dir() else []:
        entry = json.loads(path.read_text(encoding="utf-8"))
        mine = out.setdefault(path.name.split(".")[0], {"what": entry["what"], "unit": entry["unit"],
                                                        "cpu_s": 0.0, "wall_s": 0.0, "count": 0})
        for key in ("cpu_s", "wall_s", "count"):
            mine[key] += entry[key]
    return out


def changed_chapters(base: str = CHECK_BASE) -> list[str]:
    """The chapters (``book/*.ipynb``, repository-relative) changed since this branch left ``base``, committed
    or not, that still exist (only the uncommitted ones when git knows no ``base``)."""
    since = _git("diff", "--name-only", f"{base}...HEAD")
    if since is None:
        print(f"testsettings: no branch {base!r} to compare with; checking the uncommitted changes only",
              file=sys.stderr)
    uncommitted = _git("status", "--porcelain", "--untracked-files=all") or []
    names = set(since or []) | {line[3:].split(" -> ")[-1] for line in uncommitted}
    return sorted(name for name in names
                  if Path(name).parent == Path(CHAPTERS) and name.endswith(".ipynb") and (REPO / name).is_file())


@functools.cache
def cpu_paths() -> list[str]:
    """The code paths torch offers on this machine, narrowest first, ending with the one it picks by itself
    (e.g. ``["default", "avx2"]`` on an AVX2 CPU, ``[..., "avx512"]`` with AVX-512). Asks torch, in a process of
    its own so the answer is not the one an inherited ``ATEN_CPU_CAPABILITY`` forces."""
    env = {name: value for name, value in os.environ.items() if name != CPU_PATH_VARIABLE}
    done = subprocess.run([sys.executable, "-c", "import torch; print(torch.backends.cpu.get_cpu_capability())"],
                          capture_output=True, text=True, env=env, check=False)
    widest = done.stdout.strip().lower()
    if done.returncode != 0 or not widest:
        print(f"testsettings: cannot ask torch for its CPU code path ({done.stderr.strip()[-300:]}); "
              "assuming only 'default'", file=sys.stderr)
        return ["default"]
    if widest in CPU_PATHS:
        return list(CPU_PATHS[: CPU_PATHS.index(widest) + 1])
    return ["default", widest]


def run_paths() -> dict[str, str]:
    """Which code path each run of the chapters in `make test` takes (the values of ``ATEN_CPU_CAPABILITY``;
    ``""``: torch's own choice, the widest): strict nbval the widest, the release run (which compares the glued
    values with the book's) the narrowest, the float32 run (which checks the chapters' assertions) a third path
    where the machine has one (``avx2`` on an AVX-512 CPU), else the widest, the fastest."""
    paths = cpu_paths()
    return {"nbval": "", "release": paths[0], "float32": paths[1] if len(paths) > 2 else ""}


def _git(*args: str) -> list[str] | None:
    done = subprocess.run(["git", *args], cwd=REPO, capture_output=True, text=True, check=False)
    return done.stdout.splitlines() if done.returncode == 0 else None


def main(argv: list[str]) -> int:
    commands = {
        "nbval": lambda: " ".join(NBVAL),
        "one-thread": lambda: " ".join(f"{name}={value}" for name, value in ONE_THREAD.items()),
        "changed-chapters": lambda: " ".join(changed_chapters()),
        "cpu-paths": lambda: " ".join(cpu_paths()),
    }
    if len(argv) != 1 or argv[0] not in commands:
        print(f"usage: python tools/testsettings.py {{{','.join(commands)}}}; got {' '.join(argv) or 'nothing'}",
              file=sys.stderr)
        return 2
    print(commands[argv[0]]())
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
