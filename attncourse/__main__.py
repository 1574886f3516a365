"""``python -m attncourse [--course DIR] student|autograde [FOLDER]|feedback|grades|publish|check``: see __init__."""

from __future__ import annotations

import argparse
import os
import sys
import warnings
from pathlib import Path

import nbformat

from attncourse.autograde import autograde, forget
from attncourse.collect import import_roster, import_zip, set_due
from attncourse.conformance import notebook_problems
from attncourse.coursedir import DEFAULT_ROOT, Course, CourseBusy
from attncourse.exercise_cells import RELEASE_DIR, chapters
from attncourse.publish import publish
from attncourse.release import release
from attncourse.report import feedback, grade_sheet
from attncourse.repository import stamp
from attncourse.sandbox import SandboxUnavailable


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m attncourse", description=__doc__)
    parser.add_argument("--book", type=Path, default=Path("book"), help="folder of the chapter notebooks")
    parser.add_argument("--course", type=Path, default=Path(os.environ.get("COURSE") or DEFAULT_ROOT),
                        help=f"nbgrader course directory, kept between runs (default $COURSE or {DEFAULT_ROOT})")
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("student", help="bring source/ and release/ up to date (nbgrader generate_assignment)")
    grade = sub.add_parser("autograde", help="add a folder's submissions, autograde the new and changed ones")
    grade.add_argument("submissions", type=Path, nargs="?",
                       help="folder laid out as <student>/<assignment>/<notebook>.ipynb (default: the course's "
                            "submitted/ only)")
    grade.add_argument("--jobs", type=int, default=os.cpu_count() or 1,
                       help="grade this many submissions at once on worker processes (default: the cores; 1: here)")
    grade.add_argument("--dask", metavar="ADDRESS",
                       help="grade on Dask distributed: 'local' (a LocalCluster of --jobs processes) or a "
                            "scheduler's address, e.g. tcp://10.0.0.5:8786")
    fb = sub.add_parser("feedback", help="nbgrader generate_feedback for every submission whose answers are graded")
    fb.add_argument("--force", action="store_true", help="also for submissions whose written answers wait for a grader")
    sub.add_parser("grades", help="grades.csv (a row per student, a column per assignment, total) and exercises.csv")
    sub.add_parser("publish", help=f"the student notebooks the website and launch buttons give out, into {RELEASE_DIR}")
    sub.add_parser("check", help="report chapters that do not follow CONTRIBUTING.md's exercise format")
    regrade = sub.add_parser("regrade", help="grade every submission of an assignment again (e.g. a test was fixed)")
    regrade.add_argument("assignment")
    regrade.add_argument("--jobs", type=int, default=os.cpu_count() or 1, help="as for autograde")
    regrade.add_argument("--dask", metavar="ADDRESS", help="as for autograde")
    roster = sub.add_parser("roster", help="the class list into the gradebook (nbgrader db student import)")
    roster.add_argument("file", type=Path, help="CSV with an id column (first_name, last_name, email optional)")
    zipped = sub.add_parser("import-zip", help="an LMS's zip of submissions into submitted/ (nbgrader zip_collect)")
    zipped.add_argument("archive", type=Path)
    zipped.add_argument("assignment")
    zipped.add_argument("--pattern", help="a regular expression with (?P<student_id>...) and (?P<file_id>...) for "
                                          "the file names (default: Canvas's <login>_<id>_<id>_<file>)")
    due = sub.add_parser("due", help="set an assignment's due date; later submissions are flagged late")
    due.add_argument("assignment")
    due.add_argument("when", help='e.g. "2026-12-01 17:00:00 UTC" or "2026-12-01 17:00:00 Europe/Berlin"')
    bench = sub.add_parser("bench", help="grade a synthetic class with 1 and N workers (and Dask): notebooks/min")
    bench.add_argument("--chapter", default="01_dot_products", help="the assignment the class hands in")
    bench.add_argument("--students", type=int, default=8, help="the size of the synthetic class")
    bench.add_argument("--jobs", type=int, default=os.cpu_count() or 1, help="workers of the parallel runs")
    bench.add_argument("--no-dask", dest="dask", action="store_false", help="leave out the Dask LocalCluster run")
    return parser


def _student(args) -> int:
    for path in release(args.book, Course(args.course)).written:
        print(path)
    return 0


def _report(title: str, lines: list[str]) -> None:
    if lines:
        print(f"{title}:\n  " + "\n  ".join(lines))


def _autograde(args) -> int:
    if args.submissions is not None and args.course.resolve() in [args.submissions.resolve(),
                                                                   *args.submissions.resolve().parents]:
        args.submissions = None  # already inside the course: grade its submitted/ folder
    result = autograde(args.book, Course(args.course), args.submissions, jobs=max(1, args.jobs), dask=args.dask)
    _report("autograded", [f"{s}/{a}" for s, a in result.graded])
    _report("graded again because the assignment's tests changed", result.retested)
    _report("unchanged since last graded (kept)", [f"{s}/{a}" for s, a in result.unchanged])
    _report("renamed", result.renamed)
    _report("nothing handed in (empty folders, skipped)", result.empty)
    _report("STOPPED BY A LIMIT (that exercise scored 0; the rest of the class was graded)", result.stopped)
    _report("GRADED, BUT CHECK BY HAND", result.warnings)
    _report("COULD NOT GRADE", result.failed)
    _grades(args)
    if result.failed:
        print(f"\n{len(result.failed)} submission(s) could not be graded (listed above); the rest were.")
        return 1
    return 0


def _regrade(args) -> int:
    dropped = forget(Course(args.course), args.assignment).held
    print(f"grading {len(dropped)} submission(s) of {args.assignment} again")
    args.submissions = None
    return _autograde(args)


def _roster(args) -> int:
    outcome = import_roster(Course(args.course), args.file)
    print(outcome.log.strip())
    if outcome.ok:
        _grades(args)
    return 0 if outcome.ok else 1


def _import_zip(args) -> int:
    outcome = import_zip(Course(args.course), args.archive, args.assignment, *([args.pattern] if args.pattern else []))
    found = sorted(p.parent.parent.name for p in outcome.written)
    done = f"{args.assignment} of {found} in submitted/; make autograde grades them"
    print(done if outcome.ok else outcome.log.strip())
    return 0 if outcome.ok else 1


def _due(args) -> int:
    outcome = set_due(Course(args.course), args.assignment, args.when)
    if not outcome.ok:
        print(f"python -m attncourse due: {'; '.join(outcome.failed)}", file=sys.stderr)
        return 1
    print(f"{args.assignment} is due {outcome.log} UTC")
    return 0


def _feedback(args) -> int:
    result = feedback(Course(args.course), force=args.force)
    _report("feedback", [str(p) for p in result.written])
    _report("held back: written answers still to grade in formgrader (--force sends them as they are)", result.held)
    _report("COULD NOT GENERATE FEEDBACK", result.failed)
    return 0 if result.ok else 1


def _grades(args) -> int:
    result = grade_sheet(Course(args.course))
    sheet, per_exercise = result.written
    print(f"\n{result.log}\n\nwritten to {sheet} (the max points, then a row per student; missing work 0; ungraded: "
          f"written answers still to grade) and {per_exercise} (per exercise; an empty score waits for manual grading)")
    return 0


def _publish(args) -> int:
    for path in stamp(args.book.resolve().parent):  # _config.yml's repository URL, before the release copies it
        print(f"stamped the repository URL into {path}")
    for path in publish(args.book, Course(args.course)).written:
        print(path)
    return 0


def _check(args) -> int:
    bad = 0
    for path in chapters(args.book):
        problems = notebook_problems(nbformat.read(path, as_version=4), path.stem)
        bad += bool(problems)
        print(f"{path}: " + ("ok" if not problems else "\n  " + "\n  ".join(problems)))
    return 1 if bad else 0


def _bench(args) -> int:
    from attncourse.grade_bench import bench  # noqa: PLC0415 - a tool for instructors, not every command needs it

    return bench(args.book, args.chapter, args.students, args.jobs, args.dask)


COMMANDS = {"student": _student, "autograde": _autograde, "feedback": _feedback, "grades": _grades,
            "publish": _publish, "check": _check, "bench": _bench, "regrade": _regrade, "roster": _roster,
            "due": _due, "import-zip": _import_zip}
LOCKED = {"student", "autograde", "feedback", "grades", "regrade", "roster", "due", "import-zip"}  # write the course


def main(argv: list[str] | None = None) -> int:
    """Run one command; the exit status is non-zero when it failed."""
    # nbgrader 0.9.6's gradebook trips SQLAlchemy's autoflush warnings on every autograde; harmless noise.
    warnings.filterwarnings("ignore", message=".*not in session.*")
    args = _parser().parse_args(argv)
    if args.command not in LOCKED:
        return COMMANDS[args.command](args)
    try:
        with Course(args.course).lock():
            return COMMANDS[args.command](args)
    except CourseBusy as busy:
        print(f"python -m attncourse {args.command}: {busy}", file=sys.stderr)
        return 2
    except SandboxUnavailable as why:
        print(f"python -m attncourse {args.command}: {why}", file=sys.stderr)
        return 3


if __name__ == "__main__":
    sys.exit(main())
