"""Submissions into the course: a folder of them, an LMS's zip, the class list and due dates.

``submitted/<student>/<a>/<a>.ipynb`` gains what a submissions folder brings (names normalised where
unambiguous, with nbgrader's ``timestamp.txt``); ``make autograde`` (attncourse/autograde.py) then grades the new and
changed ones. The class list and the due dates go into ``gradebook.db`` through nbgrader itself.
"""

from __future__ import annotations

import hashlib
import shutil
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path

import nbformat
from nbgrader.utils import parse_utc

from attncourse.coursedir import TIMESTAMP, Course
from attncourse.result import Result


@dataclass
class Batch:
    """What a submissions folder holds: notebooks to grade, names normalised, submissions refused."""

    found: dict[tuple[str, str], Path] = field(default_factory=dict)  # (student, assignment) -> notebook
    renamed: list[str] = field(default_factory=list)
    refused: list[str] = field(default_factory=list)  # "<student>/<assignment>: why"
    empty: list[str] = field(default_factory=list)  # "<student>/<assignment>": a folder with nothing in it


def _visible_dirs(folder: Path) -> list[Path]:
    return sorted(p for p in folder.iterdir() if p.is_dir() and not p.name.startswith((".", "_")))


def _notebook_of(folder: Path, assignment: str) -> tuple[Path | None, str | None]:
    """The one notebook of an assignment folder and, if it is misnamed, a note; or None and why not."""
    exact = folder / f"{assignment}.ipynb"
    if exact.is_file():
        return exact, None
    notebooks = sorted(p for p in folder.glob("*.ipynb") if not p.name.startswith("."))
    if not notebooks:
        return None, "no notebook in the folder"
    if len(notebooks) > 1:
        return None, f"expected one notebook named {assignment}.ipynb, got {[p.name for p in notebooks]}"
    return notebooks[0], f"graded {notebooks[0].name} as {assignment}.ipynb"


def _readable(path: Path) -> str | None:
    """Why nbgrader could not read the notebook, or None when it can."""
    try:
        nbformat.validate(nbformat.read(path, as_version=4))
    except Exception as error:  # noqa: BLE001 - any unreadable file is reported, never fatal to the batch
        return f"{path.name} is not a readable notebook ({type(error).__name__}: {str(error)[:120]})"
    return None


def scan(folder: Path, known: list[str]) -> Batch:
    """Every ``<student>/<assignment>/`` of ``folder``; misnamed notebooks normalised, bad ones refused."""
    batch = Batch()
    for student in _visible_dirs(Path(folder)):
        for sub in _visible_dirs(student):
            where = f"{student.name}/{sub.name}"
            if sub.name not in known:
                batch.refused.append(f"{where}: no assignment {sub.name!r} (expected one of {known})")
                continue
            if not any(sub.iterdir()):
                batch.empty.append(where)  # nothing handed in (yet): not an error, and no reason to fail later runs
                continue
            notebook, note = _notebook_of(sub, sub.name)
            why = note if notebook is None else _readable(notebook)
            if why:
                batch.refused.append(f"{where}: {why}")
                continue
            if note:
                batch.renamed.append(f"{where}: {note}")
            batch.found[(student.name, sub.name)] = notebook
    return batch


def sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def collect(batch: Batch, course: Course) -> None:
    """Copy the batch's notebooks into ``submitted/`` under nbgrader's names (an identical copy is left as is)."""
    for (student, assignment), notebook in batch.found.items():
        target = course.notebook("submitted", assignment, student)
        if target.is_file() and target.resolve() == notebook.resolve():
            continue
        if not target.is_file() or sha(target) != sha(notebook):
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(notebook, target)
            _timestamp(notebook, target.parent / TIMESTAMP)


def _timestamp(notebook: Path, target: Path) -> None:
    """The submission's time for nbgrader: the folder's own ``timestamp.txt`` (nbgrader's exchange and
    ``zip_collect`` write one), else the notebook's modification time (kept by LMS downloads and copies)."""
    given = notebook.parent / TIMESTAMP
    if given.is_file():
        shutil.copy2(given, target)
        return
    when = datetime.fromtimestamp(notebook.stat().st_mtime, timezone.utc)
    target.write_text(when.strftime("%Y-%m-%d %H:%M:%S.%f UTC"), encoding="utf-8")


def import_roster(course: Course, csv_file: Path) -> Result:
    """The class list into the gradebook with nbgrader's own ``nbgrader db student import`` (a CSV with an
    ``id`` column, optionally ``first_name``, ``last_name``, ``email``): every student gets a row of the sheet."""
    done = course.nbgrader("db", "student", "import", str(Path(csv_file).resolve()))
    return Result(log=done["log"], failed=[] if done["success"] else [f"nbgrader db student import {csv_file}"])


# An LMS download's file names, e.g. Canvas's "<login>_<id>_<id>_<file>" (with LATE_ after the login when late).
LMS_NAMES = r"(?:.*/)?(?P<student_id>[^_/]+)_(?:LATE_)?\d+_\d+_(?P<file_id>[^/]+)$"


def import_zip(course: Course, archive: Path, assignment: str, pattern: str = LMS_NAMES) -> Result:
    """An LMS's zip of submissions into ``submitted/`` with nbgrader's own ``zip_collect``: the zip goes to
    ``downloaded/<assignment>/archive/``; ``pattern`` (nbgrader's ``FileNameCollectorPlugin.named_regexp``) reads
    the student and the file from each name; ``written`` lists the assignment's notebooks now in ``submitted/``.
    ``autograde`` then grades them."""
    target = course.root / "downloaded" / assignment / "archive"
    target.mkdir(parents=True, exist_ok=True)
    shutil.copy2(archive, target / Path(archive).name)
    done = course.nbgrader("zip_collect", assignment, "--force", f"--FileNameCollectorPlugin.named_regexp={pattern}")
    found = sorted(course.step_root("submitted").glob(f"*/{assignment}/*.ipynb"))
    return Result(written=found, log=done["log"], failed=[] if done["success"] else [f"nbgrader zip_collect {archive}"])


def set_due(course: Course, assignment: str, due: str) -> Result:
    """The assignment's due date in the gradebook (nbgrader's ``parse_utc``: "2026-12-01 17:00:00 Europe/Berlin");
    autograde then compares each submission's timestamp with it: the grade sheet flags late work. ``log`` is the
    date stored, in UTC."""
    with course.gradebook() as gb:
        known = sorted(a.name for a in gb.assignments)
        if assignment not in known:
            return Result(failed=[f"expected a released assignment ({known}), got {assignment!r}"])
        return Result(log=str(gb.update_or_create_assignment(assignment, duedate=parse_utc(due)).duedate))
