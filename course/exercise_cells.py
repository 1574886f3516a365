"""The chapters' exercises, read from the nbgrader metadata and markers CONTRIBUTING.md prescribes."""

from __future__ import annotations

import re
from dataclasses import dataclass

BEGIN_SOLUTION, END_SOLUTION = "### BEGIN SOLUTION", "### END SOLUTION"
BEGIN_HIDDEN, END_HIDDEN = "### BEGIN HIDDEN TESTS", "### END HIDDEN TESTS"
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


def nbgrader(cell) -> dict:
    """The cell's ``nbgrader`` metadata, ``{}`` when it has none."""
    return cell.get("metadata", {}).get("nbgrader", {})


def exercise_name(grade_id: str) -> str:
    """``01_dot_products-ex2-tests`` -> ``ex2``; a grade_id off the convention is its own name."""
    match = GRADE_ID.match(grade_id)
    return f"ex{match['k']}" if match else grade_id


def regions(source: str, begin: str, end: str) -> list[str]:
    """The lines strictly between each ``begin`` and ``end`` marker line of a cell source."""
    lines, inside = [], False
    for line in source.splitlines():
        if line.strip() == begin:
            inside = True
        elif line.strip() == end:
            inside = False
        elif inside:
            lines.append(line)
    return lines


def visible_source(source: str) -> str:
    """A test cell's source as the student release has it: hidden-test regions gone, markers included."""
    kept, hidden = [], False
    for line in source.splitlines():
        if line.strip() == BEGIN_HIDDEN:
            hidden = True
        elif line.strip() == END_HIDDEN:
            hidden = False
        elif not hidden:
            kept.append(line)
    return "\n".join(kept)


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
