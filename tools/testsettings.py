"""The test settings, one home each: the tiers, nbval's flags, the environment of ``make test``'s own run of the
chapters, and the one-thread environment (from its home, the course kit's sandbox, which sets every grading kernel's).
Nothing heavier than the standard library: the Makefile, tools/testrun.py, the root conftest.py and the course tests
read it.

From the shell (the Makefile): ``python tools/testsettings.py nbval`` prints nbval's flags, ``... one-thread``
and ``... book-run`` environments as ``NAME=value`` words, ``... changed-chapters`` the chapters ``make check``
runs (changed since ``CHECK_BASE``, committed or not; nothing when none changed).
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from attncourse import sandbox

REPO = Path(__file__).resolve().parents[1]

# The tiers, by what their tests exercise (each folder's __init__.py says more).
TIERS = {
    "lib": "tests/lib",  # attnlib: maths, views, widgets, plots, models, interpret; fast but for the `slow` ones
    "repo": "tests/repo",  # the repository itself: layout, one home per fact, the test plumbing in tools/
    "book": "tests/book",  # the chapters, beside nbval over book/ (the root conftest.py holds their policy)
    "site": "tests/site",  # the built site in headless Chromium: pages, accessibility, the print edition
    "course": "tests/course",  # nbgrader: releases, grading, the students' environment and JupyterLab
}
CHAPTERS = "book"

# The chapters are committed without outputs: nbval runs every cell and fails on any error, a failed assertion
# included (--nbval-lax); nothing is compared with stored digits.
NBVAL = ("--nbval-lax", "--nbval-current-env")

# Every test process and chapter kernel computes on one thread: xdist's workers already keep every core busy, and
# torch on two threads beside another busy process spins and waits (the induction training: 3 s alone, 48 s with
# two threads under xdist). The same setting as every grading kernel's: one home, attncourse.sandbox.
ONE_THREAD = sandbox.ONE_THREAD

# `make test` computes every chapter three ways, so each claim a chapter asserts is checked with its margin on
# more than one machine's arithmetic: the book build on torch's widest CPU code path in float64, the released
# notebooks in the students' environment on the plain path (tests/course), and this run of the chapters, which
# also grades the recorded answers: the plain path in float32, the precision of Apple's MPS (attnlib.exact_dtype).
BOOK_RUN = {"ATEN_CPU_CAPABILITY": "default", "ATTNLIB_DTYPE": "float32"}
STUDENT_RUN = {"ATEN_CPU_CAPABILITY": "default"}

# `make check`: lint, the fast tests (not slow, not browser) of attnlib and the repository, and the chapters
# changed since this branch left CHECK_BASE.
CHECK_BASE = "main"
CHECK_MARKERS = "not slow and not browser"


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


def _git(*args: str) -> list[str] | None:
    done = subprocess.run(["git", *args], cwd=REPO, capture_output=True, text=True, check=False)
    return done.stdout.splitlines() if done.returncode == 0 else None


def words(env: dict) -> str:
    """``env`` as ``NAME=value`` words for ``env`` on the command line."""
    return " ".join(f"{name}={value}" for name, value in env.items())


def main(argv: list[str]) -> int:
    commands = {
        "nbval": lambda: " ".join(NBVAL),
        "one-thread": lambda: words(ONE_THREAD),
        "book-run": lambda: words(BOOK_RUN),
        "changed-chapters": lambda: " ".join(changed_chapters()),
    }
    if len(argv) != 1 or argv[0] not in commands:
        print(f"usage: python tools/testsettings.py {{{','.join(commands)}}}; got {' '.join(argv) or 'nothing'}",
              file=sys.stderr)
        return 2
    print(commands[argv[0]]())
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
