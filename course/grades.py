"""Per-student, per-exercise scores read from nbgrader's gradebook, as a table and a CSV."""

from __future__ import annotations

import csv
from pathlib import Path

from nbgrader.api import Gradebook

from course.exercises import exercise_name

COLUMNS = ("student", "assignment", "exercise", "score", "max_score")


def _ex_key(name: str) -> tuple:
    """Sort ``ex2`` before ``ex10``."""
    return (0, int(name[2:])) if name[2:].isdigit() else (1, name)


def _exercise_rows(student: str, assignment: str, grades) -> list[dict]:
    """Sum each exercise's grade cells; score None while a written answer awaits a human grader."""
    rows: dict[str, dict] = {}
    for grade in grades:
        name = exercise_name(grade.name)
        row = rows.setdefault(name, {"student": student, "assignment": assignment, "exercise": name,
                                     "score": 0.0, "max_score": 0.0})
        row["max_score"] += grade.max_score
        pending = grade.needs_manual_grade and grade.manual_score is None
        row["score"] = None if pending or row["score"] is None else row["score"] + grade.score
    return [rows[name] for name in sorted(rows, key=_ex_key)]


def collect(root: Path, pairs: list[tuple[str, str]]) -> list[dict]:
    """Rows of ``COLUMNS`` for each graded ``(student, assignment)``, from the course's gradebook."""
    rows = []
    with Gradebook(f"sqlite:///{Path(root).resolve() / 'gradebook.db'}") as gradebook:
        for student, assignment in pairs:
            notebook = gradebook.find_submission_notebook(assignment, assignment, student)
            rows += _exercise_rows(student, assignment, notebook.grades)
    return rows


def write_csv(rows: list[dict], path: Path) -> None:
    """``grades.csv`` with ``COLUMNS``; an empty score means it waits for manual grading."""
    with open(path, "w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=COLUMNS)
        writer.writeheader()
        writer.writerows({**row, "score": "" if row["score"] is None else f"{row['score']:g}",
                          "max_score": f"{row['max_score']:g}"} for row in rows)


def _line(student: str, assignment: str, exercise: str, score: str, max_score: str) -> str:
    return f"{student:<16} {assignment:<22} {exercise:<9} {score:>7} {max_score:>5}"


def format_table(rows: list[dict]) -> str:
    """A fixed-width table, one line per exercise and a total per student ("manual": awaits a grader)."""
    lines = [_line("student", "assignment", "exercise", "score", "max")]
    for student in dict.fromkeys(row["student"] for row in rows):
        mine = [row for row in rows if row["student"] == student]
        for row in mine:
            score = "manual" if row["score"] is None else f"{row['score']:g}"
            lines.append(_line(student, row["assignment"], row["exercise"], score, f"{row['max_score']:g}"))
        total, most = sum(row["score"] or 0 for row in mine), sum(row["max_score"] for row in mine)
        lines.append(_line(student, "total so far", "", f"{total:g}", f"{most:g}"))
    return "\n".join(lines)
