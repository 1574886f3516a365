"""Scores from nbgrader's gradebook: a grade sheet for the LMS and a per-exercise table.

* ``grades.csv``: a first row ``(max points)``, then one row per student (every student of the class
  list, ``make roster``), one column per assignment plus ``total``; work not handed in counts 0 (as
  nbgrader's own ``nbgrader export`` records it). Columns in assignment order (every assignment at least
  one student handed in), students sorted: ready for an LMS import. Written answers not yet graded by
  hand count 0 until they are, and ``ungraded`` names those assignments (their score is not final);
  ``late`` names the assignments handed in after their due date; ``stopped`` what a sandbox limit stopped in
  the last grading (``03_softmax 3.1: stopped after 30 s``: that exercise scored 0).
* ``exercises.csv``: one row per student, assignment and exercise (``score`` empty while a written
  answer waits for a human grader), for the instructor.
"""

from __future__ import annotations

import csv
from pathlib import Path

from nbgrader.api import Gradebook, MissingEntry

from attncourse.coursedir import Course
from attncourse.exercise_cells import exercise_name

EXERCISE_COLUMNS = ("student", "assignment", "exercise", "score", "max_score")


def _ex_key(name: str) -> tuple:
    """Sort ``ex2`` before ``ex10``."""
    return (0, int(name[2:])) if name[2:].isdigit() else (1, name)


MAX_ROW = "(max points)"


def sheet(course: Course) -> tuple[list[str], list[dict], dict]:
    """``(columns, rows, maximum)``: ``student``, each assignment, ``total``, ``ungraded`` (assignments whose
    written answers wait for a grader: their score is not final), ``late`` and ``stopped``; missing work is 0."""
    with course.gradebook() as gb:
        # assignments someone handed in: a chapter released but not yet assigned gets no column of zeros
        names = [a.name for a in sorted(gb.assignments, key=lambda a: a.name) if a.submissions]
        rows = [_student_row(gb, student, names) for student in sorted(s.id for s in gb.students)]
        maximum = {"student": MAX_ROW, **{a.name: a.max_score for a in gb.assignments if a.name in names}}
    maximum.update(total=sum(maximum[name] for name in names), ungraded="", late="", stopped="")
    stopped = course.stops()
    for row in rows:
        row["stopped"] = "; ".join(f"{key.split('/')[1]} {why}" for key, found in sorted(stopped.items())
                                   if key.split("/")[0] == row["student"] for why in found)
    return ["student", *names, "total", "ungraded", "late", "stopped"], rows, maximum


def _student_row(gb: Gradebook, student: str, names: list[str]) -> dict:
    """One student's scores (0 for work not handed in), what still waits for a grader, what came in late."""
    row, ungraded, late = {"student": student}, [], []
    for name in names:
        try:
            submission = gb.find_submission(name, student)
        except MissingEntry:
            row[name] = 0.0
            continue
        row[name] = submission.score
        ungraded += [name] if awaits_grader(submission) else []
        late += [name] if submission.total_seconds_late > 0 else []
    row.update(total=sum(row[name] for name in names), ungraded=" ".join(ungraded), late=" ".join(late))
    return row


def pending_grade(grade) -> bool:
    """A grade a person still has to give (an answer graded by hand, not graded yet)."""
    return bool(grade.needs_manual_grade and grade.manual_score is None)


def awaits_grader(submission) -> bool:
    """Whether any answer of an assignment's submission still waits for a person's grade."""
    return any(pending_grade(grade) for notebook in submission.notebooks for grade in notebook.grades)


def exercise_rows(course: Course) -> list[dict]:
    """Rows of ``EXERCISE_COLUMNS`` for every submitted notebook; score None while awaiting a grader."""
    rows = []
    with course.gradebook() as gb:
        for assignment in sorted(gb.assignments, key=lambda a: a.name):
            for submission in sorted(assignment.submissions, key=lambda s: s.student_id):
                for notebook in submission.notebooks:
                    rows += _exercise_rows(submission.student_id, assignment.name, notebook.grades)
    return rows


def _exercise_rows(student: str, assignment: str, grades) -> list[dict]:
    """Sum each exercise's grade cells; score None while a written answer awaits a human grader."""
    rows: dict[str, dict] = {}
    for grade in grades:
        name = exercise_name(grade.name)
        row = rows.setdefault(name, {"student": student, "assignment": assignment, "exercise": name,
                                     "score": 0.0, "max_score": 0.0})
        row["max_score"] += grade.max_score
        pending = pending_grade(grade)
        row["score"] = None if pending or row["score"] is None else row["score"] + grade.score
    return [rows[name] for name in sorted(rows, key=_ex_key)]


def _number(value) -> str:
    return "" if value is None else f"{value:g}" if isinstance(value, float | int) else str(value)


def write_csv(columns, rows: list[dict], path: Path) -> None:
    """A CSV of ``rows`` with ``columns``; numbers written without trailing zeros, None as empty."""
    with open(path, "w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=columns)
        writer.writeheader()
        writer.writerows({key: _number(row[key]) for key in columns} for row in rows)


def format_table(columns, rows: list[dict]) -> str:
    """Rows as a fixed-width text table."""
    widths = [max(len(c), *(len(_number(r[c])) for r in rows)) for c in columns]
    lines = ["  ".join(c.ljust(w) for c, w in zip(columns, widths, strict=True))]
    lines += ["  ".join(_number(r[c]).ljust(w) for c, w in zip(columns, widths, strict=True)) for r in rows]
    return "\n".join(lines)


def export(course: Course) -> tuple[Path, Path, str]:
    """Write ``grades.csv`` and ``exercises.csv`` in the course directory; their paths and the sheet as text."""
    columns, rows, maximum = sheet(course)
    sheet_path, exercises_path = course.root / "grades.csv", course.root / "exercises.csv"
    write_csv(columns, [maximum, *rows], sheet_path)
    write_csv(EXERCISE_COLUMNS, exercise_rows(course), exercises_path)
    return sheet_path, exercises_path, format_table(columns, [*rows, maximum])
