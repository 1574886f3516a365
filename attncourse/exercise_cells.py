"""The format of the chapters' exercises and releases: one small module, the standard library alone.

What a chapter file is (``NN_name.ipynb``, one nbgrader assignment each), the nbgrader markers, grade ids, roles and
points CONTRIBUTING.md prescribes, the stub a solution region becomes, and where the student releases are committed.
The course kit (nbgrader) and the website's build (Sphinx: ``attnsite.nbgrader_site``'s two editions) both read
them here, so neither needs the other's stack to import it. The one reader of the marker lines is ``marked_lines``.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]  # the repository
RELEASE_FOLDER = "course/release"  # the student notebooks, committed: the site's downloads and launch buttons open them
RELEASE_DIR = ROOT / RELEASE_FOLDER
CHAPTER = re.compile(r"^(?P<number>\d{2})_(?P<name>\w+)$")  # a chapter's file stem: 07_causal
CODE_STUB = "# YOUR CODE HERE\nraise NotImplementedError()"  # a solution region in a release (nbgrader is told so)
BEGIN_SOLUTION, END_SOLUTION = "### BEGIN SOLUTION", "### END SOLUTION"
BEGIN_HIDDEN, END_HIDDEN = "### BEGIN HIDDEN TESTS", "### END HIDDEN TESTS"
SOLUTION, HIDDEN = "solution", "hidden"  # the two kinds of region the markers delimit
MARKERS = {BEGIN_SOLUTION: (SOLUTION, True), END_SOLUTION: (SOLUTION, False),
           BEGIN_HIDDEN: (HIDDEN, True), END_HIDDEN: (HIDDEN, False)}  # marker line -> (region, opens it?)
GRADE_ID = re.compile(r"^(?P<notebook>.+)-ex(?P<k>\d+)-(?P<part>solution|tests|answer|code)$")
HEADING = re.compile(r"^### Exercise (?P<n>\d+)\.(?P<k>\d+): .+ \((?P<points>\d+(?:\.\d+)?) points?\)\s*$", re.M)
ROLES = {  # (cell type, grade, solution, locked) -> grade_id part
    ("code", False, True, False): "solution",
    ("code", True, False, True): "tests",
    ("markdown", True, True, False): "answer",
    ("code", True, True, False): "code",  # code a written exercise asks for, graded by hand
}


@dataclass
class Exercise:
    """One exercise: its name (``ex2``), points, and whether a test cell grades it automatically."""

    name: str
    points: float = 0.0
    autograded: bool = False
    hidden_tests: bool = False


def chapter_number(stem: str) -> int | None:
    """``07_causal`` -> 7; None for a page that is no chapter (``intro``, ``background``)."""
    match = CHAPTER.match(stem)
    return int(match["number"]) if match else None


def chapters(book: Path) -> list[Path]:
    """The chapter notebooks of ``book`` in order, one nbgrader assignment each (``01_dot_products.ipynb``)."""
    return sorted(p for p in Path(book).glob("*.ipynb") if chapter_number(p.stem) is not None)


def nbgrader(cell) -> dict:
    """The cell's ``nbgrader`` metadata, ``{}`` when it has none."""
    return cell.get("metadata", {}).get("nbgrader", {})


def exercise_name(grade_id: str) -> str:
    """``01_dot_products-ex2-tests`` -> ``ex2``; a grade_id off the convention is its own name."""
    match = GRADE_ID.match(grade_id)
    return f"ex{match['k']}" if match else grade_id


def marked_lines(source: str) -> Iterator[tuple[str, str | None, str | None]]:
    """Each line of a cell source as ``(line, region, marker)``.

    ``marker`` is the marker a marker line is (``BEGIN_SOLUTION`` ...), else None; ``region`` is the region
    (``SOLUTION`` or ``HIDDEN``) a line sits strictly inside, or a marker line opens or closes, else None.
    """
    inside = None
    for line in source.splitlines():
        marker = line.strip() if line.strip() in MARKERS else None
        if marker is None:
            yield line, inside, None
            continue
        region, opens = MARKERS[marker]
        inside = region if opens else None
        yield line, region, marker


def regions(source: str, begin: str, end: str) -> list[str]:
    """The lines strictly between each ``begin`` and ``end`` marker line of a cell source."""
    region = MARKERS[begin][0]
    if MARKERS[end] != (region, False):
        raise ValueError(f"expected the end marker of {begin!r}, got {end!r}")
    return [line for line, inside, marker in marked_lines(source) if marker is None and inside == region]


def visible_source(source: str) -> str:
    """A test cell's source as the student release has it: hidden-test regions gone, markers included."""
    return "\n".join(line for line, region, _ in marked_lines(source) if region != HIDDEN)


def solution_lines(cell) -> list[str]:
    """What nbgrader withholds from students in this cell: solution regions, whole answer cells."""
    meta = nbgrader(cell)
    if not meta.get("solution"):
        return []
    if cell["cell_type"] == "markdown":
        return cell["source"].splitlines()
    return regions(cell["source"], BEGIN_SOLUTION, END_SOLUTION)


def hidden_test_lines(cell) -> list[str]:
    """The lines of the cell's hidden-test regions."""
    return regions(cell["source"], BEGIN_HIDDEN, END_HIDDEN) if cell["cell_type"] == "code" else []


def exercises(nb) -> dict[str, Exercise]:
    """Every graded exercise of a notebook by name, from its grade cells, in notebook order."""
    found: dict[str, Exercise] = {}
    for cell in nb.cells:
        meta = nbgrader(cell)
        if not meta.get("grade"):
            continue
        name = exercise_name(meta.get("grade_id", ""))
        ex = found.setdefault(name, Exercise(name))
        ex.points += float(meta.get("points", 0))
        if cell["cell_type"] == "code" and not meta.get("solution"):
            ex.autograded = True
            ex.hidden_tests = ex.hidden_tests or bool(hidden_test_lines(cell))
    return found


def autograded_points(nb) -> dict[str, float]:
    """``{exercise: points}`` for the exercises a test cell grades automatically."""
    return {name: ex.points for name, ex in exercises(nb).items() if ex.autograded}
