"""``python -m course student|autograde <folder>|check``: see the package docstring."""

from __future__ import annotations

import argparse
import sys
import warnings
from pathlib import Path

import nbformat

from course import grades
from course.checks import notebook_problems
from course.nbgrader_course import assignments, autograde, release


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m course", description=__doc__)
    parser.add_argument("--book", type=Path, default=Path("book"), help="folder of the chapter notebooks")
    parser.add_argument("--course", type=Path, default=Path("_build/course"), help="nbgrader course directory")
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("student", help="student versions under <course>/release/ (nbgrader generate_assignment)")
    grade = sub.add_parser("autograde", help="grade a submitted/-like folder, print and save the scores")
    grade.add_argument("submissions", type=Path, help="folder laid out as <student>/<assignment>/<notebook>.ipynb")
    sub.add_parser("check", help="report chapters that do not follow CONTRIBUTING.md's exercise format")
    return parser


def _student(args) -> int:
    for path in release(args.book, args.course):
        print(path)
    return 0


def _autograde(args) -> int:
    pairs = autograde(args.book, args.course, args.submissions)
    rows = grades.collect(args.course, pairs)
    grades.write_csv(rows, args.course / "grades.csv")
    print(grades.format_table(rows))
    print(f"\nwritten to {args.course / 'grades.csv'} (an empty score waits for manual grading)")
    return 0


def _check(args) -> int:
    bad = 0
    for path in assignments(args.book):
        problems = notebook_problems(nbformat.read(path, as_version=4), path.stem)
        bad += bool(problems)
        print(f"{path}: " + ("ok" if not problems else "\n  " + "\n  ".join(problems)))
    return 1 if bad else 0


def main(argv: list[str] | None = None) -> int:
    """Run one command; the exit status is non-zero when it failed."""
    # nbgrader 0.9.6's gradebook trips SQLAlchemy's autoflush warnings on every autograde; harmless noise.
    warnings.filterwarnings("ignore", message=".*not in session.*")
    args = _parser().parse_args(argv)
    return {"student": _student, "autograde": _autograde, "check": _check}[args.command](args)


if __name__ == "__main__":
    sys.exit(main())
