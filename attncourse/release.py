"""``make student``: the chapters as nbgrader assignments, ``source/<a>/`` and ``release/<a>/`` of the course.

``source/<a>/<a>.ipynb`` is the chapter in plain Markdown (attncourse/markup.py), its glued numbers put into the
prose from the chapter as this checkout computes it (the build's execution cache, attnsite/execution.py), rewritten
only when that changed; ``release/<a>/`` is regenerated (nbgrader ``generate_assignment``) only then, or when it
is missing.
"""

from __future__ import annotations

from pathlib import Path

import nbformat

from attncourse.coursedir import Course, write_if_changed
from attncourse.exercise_cells import chapters
from attncourse.markup import Bibliography, equation_numbers, release_links, student_notebook
from attncourse.result import Result
from attnsite.execution import executed


def student_sources(book: Path) -> dict[str, nbformat.NotebookNode]:
    """``{assignment: chapter in plain Markdown}`` for every chapter of ``book``."""
    notebooks = {p.stem: executed(p) for p in chapters(book)}  # the glued numbers its prose shows
    numbers = equation_numbers(notebooks)
    bibfile = Path(book) / "references.bib"
    bib = Bibliography(bibfile) if bibfile.is_file() else None
    links = release_links(book, notebooks)
    return {stem: student_notebook(nb, stem, numbers, bib, links) for stem, nb in notebooks.items()}


def prepare(book: Path, course: Course) -> list[str]:
    """Bring ``source/`` and the config up to date; the assignments whose source changed."""
    course.write_config()
    return [stem for stem, nb in student_sources(book).items()
            if write_if_changed(course.notebook("source", stem), nbformat.writes(nb) + "\n")]


def failure(outcome: dict) -> str | None:
    """nbgrader's log and error when a run failed, else None."""
    return None if outcome["success"] else f"{outcome.get('log', '')}\n{outcome.get('error', '')}".strip()


def release(book: Path, course: Course) -> Result:
    """Student versions under ``release/<a>/<a>.ipynb``, regenerated for changed or missing ones; ``written``
    lists every assignment's release, in order."""
    changed = set(prepare(book, course))
    names = [p.stem for p in chapters(book)]
    for name in names:
        if name in changed or not course.notebook("release", name).is_file():
            why = failure(course.api.generate_assignment(name, force=True, create=True))
            if why:
                raise RuntimeError(f"nbgrader generate_assignment {name} failed:\n{why}")
    return Result(written=[course.notebook("release", name) for name in names])
