"""``make autograde``: grade the course's new and changed submissions, and note what a person should look at.

A submission is autograded only when it is new, its bytes changed or its assignment's source changed
(``graded.json`` keeps both SHA-256s). Every submission's code runs in a sandbox and every verdict is decided
outside it; only this process, the coordinator, writes the gradebook (attncourse/parallel.py), for one worker, N
workers and Dask alike. Manual grades and comments live in ``gradebook.db``, which nbgrader keeps across
autogrades. ``autograded/`` notebooks get a grader-only cell after each written answer: the model answer and
rubric, which formgrader shows the grader and ``generate_feedback`` drops (tag ``grader-notes``).
"""

from __future__ import annotations

import os
import re
import stat
from pathlib import Path

import nbformat

from attncourse.collect import Batch, collect, scan, sha
from attncourse.coursedir import GRADER_NOTES_TAG, Course
from attncourse.exercise_cells import nbgrader
from attncourse.parallel import grade_many
from attncourse.release import release
from attncourse.result import Result
from attncourse.sandbox import Limits


def autograde(book: Path, course: Course, folder: Path | None, jobs: int = 1, dask: str | None = None) -> Result:
    """Add ``folder``'s submissions to the course and autograde the new or changed ones: here, one at a
    time (``jobs=1``), or on ``jobs`` worker processes or a Dask cluster (attncourse/parallel.py)."""
    names = [p.stem for p in release(book, course).written]
    batch = scan(folder, names) if folder is not None else Batch()
    collect(batch, course)
    submitted = course.step_root("submitted")
    course_batch = scan(submitted, names) if submitted.is_dir() else Batch()
    collect(course_batch, course)  # a notebook put into submitted/ by hand under another name
    result = Result(renamed=batch.renamed, failed=batch.refused + course_batch.refused,
                    empty=sorted(set(batch.empty + course_batch.empty)))
    ledger = course.ledger()
    pending = {}
    for (student, assignment), notebook in sorted(course_batch.found.items()):
        graded = course.folder("autograded", assignment, student).is_dir()
        digest, before = _digest(course, assignment, notebook), ledger.get(f"{student}/{assignment}", "")
        if graded and before == digest:
            result.unchanged.append((student, assignment))
            continue
        pending[(student, assignment)] = digest
        if graded and before.split()[0] == digest.split()[0]:
            result.retested.append(f"{student}/{assignment}")
    for pair, outcome in grade_many(course, list(pending), jobs, dask, limits_from_env()):
        _note(course, result, ledger, pair, pending[pair], outcome)
    course.save_ledger(ledger)
    return result


def _digest(course: Course, assignment: str, notebook: Path) -> str:
    """What a grade depends on: the submission's and the assignment's source's SHA-256 (a fixed hidden test
    changes the source, so every submission of it is graded again)."""
    return f"{sha(notebook)} {sha(course.notebook('source', assignment))}"


def forget(course: Course, assignment: str) -> Result:
    """Drop an assignment's submissions from ``graded.json``, so that the next autograde grades them all again;
    ``held`` names them."""
    ledger = course.ledger()
    dropped = [key for key in ledger if key.split("/")[1] == assignment]
    for key in dropped:
        del ledger[key]
    course.save_ledger(ledger)
    return Result(held=dropped)


def limits_from_env() -> Limits:
    """The sandbox's limits; ``COURSE_CELL_TIMEOUT`` and ``COURSE_CHAPTER_CELL_TIMEOUT`` (seconds) override the
    wall time per answer cell, test cell or call, and per cell of the chapter's own."""
    given = {"cell_s": os.environ.get("COURSE_CELL_TIMEOUT"),
             "chapter_cell_s": os.environ.get("COURSE_CHAPTER_CELL_TIMEOUT")}
    return Limits(**{key: float(value) for key, value in given.items() if value})


def _note(course: Course, result: Result, ledger: dict, pair: tuple[str, str], digest: str, outcome: dict) -> None:
    """Book one graded submission: the grader notes, the ledger (saved at once), or why it failed."""
    student, assignment = pair
    key = f"{student}/{assignment}"
    result.stopped += [f"{student} {stop}" for stop in outcome.get("stops", [])]
    course.save_stops(key, outcome.get("stops", []))
    if not outcome["success"]:
        log = course.save_log(f"autograde-{student}-{assignment}", outcome)
        result.failed.append(f"{key}: nbgrader autograde failed: {nbgrader_reason(outcome)} (nbgrader's log: {log})")
        ledger.pop(key, None)
        return
    result.warnings += _top_failures(course, student, assignment)
    _grader_notes(course, student, assignment)
    ledger[key] = digest
    result.graded.append(pair)
    course.save_ledger(ledger)


EXCEPTION_LINE = re.compile(r"^\s*(?:[\w.]+\.)?\w*(?:Error|Exception|Exit|Interrupt)\w*: .+$", re.M)
NBGRADER_GENERIC = "Please see the"  # nbgrader's own last line, which names no error


def nbgrader_reason(outcome: dict) -> str:
    """What went wrong in a failed nbgrader run, in its own words: the exceptions its log records (nbgrader's
    last line only says "Please see the above traceback", and the traceback is in the log, not the error)."""
    text = f"{outcome.get('log', '')}\n{outcome.get('error', '')}"
    found = [line.strip() for line in EXCEPTION_LINE.findall(text) if NBGRADER_GENERIC not in line]
    unique = list(dict.fromkeys(found))
    if unique:
        return " / ".join(unique[:3])
    lines = [line for line in text.splitlines() if line.strip()]
    return lines[-1].strip() if lines else "no message"


def _top_failures(course: Course, student: str, assignment: str) -> list[str]:
    """A chapter cell (no exercise's) that raised in the autograded notebook: every exercise after it may
    have lost its points for that reason, not for its answer, so a person should look."""
    nb = nbformat.read(course.notebook("autograded", assignment, student), as_version=4)
    for number, cell in enumerate(nb.cells):
        errors = [out for out in cell.get("outputs", []) if out.get("output_type") == "error"]
        meant = "raises-exception" in cell.metadata.get("tags", [])  # a chapter's own demonstration of an error
        if cell.cell_type == "code" and errors and not nbgrader(cell) and not meant:
            later = sum(1 for c in nb.cells[number:] if nbgrader(c).get("grade") and c.cell_type == "code")
            return [f"{student}/{assignment}: cell {number} (not an exercise) raised {errors[0]['ename']}: "
                    f"{str(errors[0]['evalue'])[:100]}; the {later} graded code cell(s) after it may have lost "
                    f"their points for that, not for their answers"]
    return []


def _grader_notes(course: Course, student: str, assignment: str) -> None:
    """After each answer graded by hand in the autograded notebook, a grader-only cell: model answer and rubric."""
    path = course.notebook("autograded", assignment, student)
    source = nbformat.read(course.notebook("source", assignment), as_version=4)
    answers = {nbgrader(c).get("grade_id"): c.source for c in source.cells
               if nbgrader(c).get("grade") and nbgrader(c).get("solution")}  # graded by hand
    nb = nbformat.read(path, as_version=4)
    cells = []
    for cell in nb.cells:
        if GRADER_NOTES_TAG in cell.metadata.get("tags", []):
            continue
        cells.append(cell)
        gid = nbgrader(cell).get("grade_id")
        if gid in answers:
            model = answers[gid] if cell.cell_type == "markdown" else f"```python\n{answers[gid]}\n```"
            note = nbformat.v4.new_markdown_cell(
                f"**For the grader only ({gid}): model answer and rubric.** Feedback leaves this cell out.\n\n"
                + model, metadata={"tags": [GRADER_NOTES_TAG]})
            cells.append(note)
    nb.cells = cells
    _rewrite_read_only(path, nb)


def _rewrite_read_only(path: Path, nb) -> None:
    """Write ``nb`` over ``path``, which nbgrader's autograde left read-only (``Autograde.permissions``, 444),
    and give it back its permissions: any instructor can add the notes, nobody edits the graded file by accident."""
    mode = path.stat().st_mode
    path.chmod(mode | stat.S_IWUSR)
    try:
        nbformat.write(nb, path)
    finally:
        path.chmod(mode)
