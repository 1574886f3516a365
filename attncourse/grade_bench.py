"""``make grade-bench``: how fast a class is graded with 1 worker, N workers and a Dask LocalCluster.

A synthetic class hands in one chapter: student ``i`` answers each autograded exercise with one of the recorded
answers (``course/answers/<chapter>.py``: the reference, an alternative, a wrong answer, a shortcut), so the
grades differ from student to student. Each way of grading starts from the same released course and grades the
whole class. The benchmark prints what the sandbox adds to starting a kernel, notebooks per minute, the speed-up
over 1 worker and the time 300 students x 8 assignments would take at that rate, and fails (exit 1) unless every
way gives the same grades.
"""

from __future__ import annotations

import os
import shutil
import tempfile
import time
from pathlib import Path

import nbformat

from attncourse import sandbox, variants
from attncourse.autograde import autograde
from attncourse.coursedir import Course
from attncourse.exercise_cells import autograded_points, nbgrader
from attncourse.grades import exercise_rows
from attncourse.release import release
from attncourse.sandbox import ONE_THREAD

CLASS, ASSIGNMENTS = 300, 8  # the term the figures are extrapolated to


def answer_sources(chapter: Path) -> dict[str, list[str]]:
    """``{grade_id of an answer cell: [sources a student might hand in]}`` from the recorded answers."""
    nb = nbformat.read(chapter, as_version=4)
    cells = {nbgrader(c).get("grade_id"): c for c in nb.cells}
    answers = variants.load_answers(chapter.stem)
    found = {}
    for exercise in autograded_points(nb):
        gid = f"{chapter.stem}-{exercise}-solution"
        named = [source for _, source in variants.named_variants(answers[exercise]) if source]
        found[gid] = [variants.reference_answer(cells[gid].source), *named]
    return found


def synthetic_class(released: Path, sources: dict[str, list[str]], students: int, inbox: Path) -> None:
    """``inbox/student-NNN/<assignment>/<assignment>.ipynb``: student i hands in answer i of each list."""
    stem = released.stem
    for i in range(students):
        nb = nbformat.read(released, as_version=4)
        for cell in nb.cells:
            options = sources.get(nbgrader(cell).get("grade_id"))
            if options:
                cell.source = options[i % len(options)]
        path = inbox / f"student-{i:03d}" / stem / f"{stem}.ipynb"
        path.parent.mkdir(parents=True, exist_ok=True)
        nbformat.write(nb, path)


def timed_run(book: Path, base: Path, root: Path, inbox: Path, jobs: int, dask: str | None) -> tuple:
    """Grade the class on a fresh copy of the released course: ``(notebooks graded, seconds, grades, failed)``."""
    shutil.copytree(base, root)
    start = time.perf_counter()
    result = autograde(book, Course(root), inbox, jobs=jobs, dask=dask)
    seconds = time.perf_counter() - start
    grades = sorted((r["student"], r["exercise"], r["score"]) for r in exercise_rows(Course(root)))
    return len(result.graded), seconds, grades, result.failed


def report(label: str, count: int, seconds: float, single: float | None) -> str:
    rate = 60 * count / seconds
    term_h = CLASS * ASSIGNMENTS / rate / 60
    speedup = "" if single is None else f"  {rate / single:.2f}x of 1 worker"
    return (f"{label:<28} {count} notebooks in {seconds:6.1f} s = {rate:5.2f} notebooks/min{speedup}; "
            f"{CLASS} students x {ASSIGNMENTS} assignments: {term_h:.1f} h")


def bench(book: Path, chapter: str, students: int, jobs: int, dask: bool) -> int:
    """Grade a synthetic class of ``students`` on ``chapter`` each way; print the figures; 0 when grades agree."""
    os.environ.update(ONE_THREAD)  # one thread per kernel in every run, as N kernels share the cores
    runs = [("1 worker", 1, None), (f"{jobs} workers", jobs, None)]
    runs += [(f"Dask LocalCluster, {jobs} workers", jobs, "local")] if dask else []
    with tempfile.TemporaryDirectory(prefix="grade-bench-") as folder:
        scratch = Path(folder)
        (scratch / "book").mkdir()
        shutil.copy(Path(book) / f"{chapter}.ipynb", scratch / "book")
        for extra in Path(book).glob("*.bib"):
            shutil.copy(extra, scratch / "book")
        released = release(scratch / "book", Course(scratch / "base")).written[0]
        synthetic_class(released, answer_sources(Path(book) / f"{chapter}.ipynb"), students, scratch / "inbox")
        if sandbox.sandboxed():
            print(f"the sandbox adds {sandbox.overhead_ms():.0f} ms to starting each kernel (median of 15 pairs "
                  "of `python -c pass` with and without it)")
        print(f"grading {students} submissions of {chapter} on {os.cpu_count()} cores, each way from scratch:")
        results, single = [], None
        for n, (label, workers, where) in enumerate(runs):
            count, seconds, grades, failed = timed_run(scratch / "book", scratch / "base", scratch / f"run{n}",
                                                       scratch / "inbox", workers, where)
            print(report(label, count, seconds, single) + (f"  FAILED: {failed}" if failed else ""), flush=True)
            single = single or 60 * count / seconds
            results.append((label, grades, failed))
    return _agreement(results, students)


def _agreement(results: list, students: int) -> int:
    """0 when every run graded every student and gave the same grades as the first; else 1, saying which."""
    first_label, first, _ = results[0]
    bad = [label for label, grades, failed in results if failed or grades != first]
    graded = {student for student, _, _ in first}
    if bad or len(graded) != students:
        print(f"NOT THE SAME: {bad or 'students missing'} differ from {first_label}")
        return 1
    print(f"identical grades in every run ({len(first)} exercise scores, {students} students)")
    return 0
