"""Does a chapter follow CONTRIBUTING.md's exercise format? Each check returns the problems it finds."""

from __future__ import annotations

import re

from attncourse.exercise_cells import (
    BEGIN_HIDDEN,
    BEGIN_SOLUTION,
    END_HIDDEN,
    END_SOLUTION,
    GRADE_ID,
    HEADING,
    ROLES,
    chapter_number,
    exercise_name,
    exercises,
    nbgrader,
    visible_source,
)

MARKERS = (BEGIN_SOLUTION, END_SOLUTION, BEGIN_HIDDEN, END_HIDDEN)
PASSED = re.compile(r'passed\("Exercise \d+\.\d+"\)')
SCORE = re.compile(r"\w+\.score\(\)")


def _role(cell) -> str | None:
    """``solution``, ``tests`` or ``answer`` from the cell's nbgrader flags; None when unknown."""
    meta = nbgrader(cell)
    key = (cell["cell_type"], bool(meta.get("grade")), bool(meta.get("solution")), bool(meta.get("locked")))
    return ROLES.get(key)


def cell_problems(cell, stem: str) -> list[str]:
    """Problems of one nbgrader cell: flags, grade_id, schema, tags, markers, points."""
    meta, role = nbgrader(cell), _role(cell)
    gid = meta.get("grade_id", "?")
    match = GRADE_ID.match(gid)
    problems = []
    if role is None:
        problems.append(f"{gid}: nbgrader flags match no exercise cell kind of CONTRIBUTING.md")
    elif not match or match["notebook"] != stem or match["part"] != role:
        problems.append(f"{gid}: expected grade_id {stem}-ex<k>-{role}")
    if meta.get("schema_version") != 3 or meta.get("task"):
        problems.append(f"{gid}: expected schema_version 3 and task false")
    if meta.get("grade") and not meta.get("points"):
        problems.append(f"{gid}: a graded cell needs points > 0")
    if cell["cell_type"] == "code" and "hide-input" not in cell.get("metadata", {}).get("tags", []):
        problems.append(f"{gid}: expected tag hide-input")
    if role in ("solution", "code") and BEGIN_SOLUTION not in cell["source"]:
        problems.append(f"{gid}: the answer cell has no {BEGIN_SOLUTION} region")
    return problems


def stray_marker_problems(nb) -> list[str]:
    """Markers in cells nbgrader would not treat as exercise cells."""
    return [f"cell {i}: nbgrader marker outside an exercise cell"
            for i, cell in enumerate(nb.cells)
            if not nbgrader(cell) and any(m in cell["source"] for m in MARKERS)]


def heading_problems(nb, stem: str) -> list[str]:
    """Each graded exercise has a ``### Exercise N.k: title (P points)`` heading with its points."""
    headings = {f"ex{m['k']}": (m["n"], float(m["points"]))
                for cell in nb.cells if cell["cell_type"] == "markdown"
                for m in HEADING.finditer(cell["source"])}
    number = chapter_number(stem)
    chapter = None if number is None else str(number)
    problems = []
    for name, ex in exercises(nb).items():
        n, points = headings.get(name, (None, None))
        if points is None:
            problems.append(f"{name}: no heading '### Exercise N.k: title (P points)'")
        elif points != ex.points or (chapter and n != chapter):
            problems.append(f"{name}: heading says Exercise {n}.{name[2:]} ({points:g} points), "
                            f"cells give chapter {chapter} and {ex.points:g} points")
    return problems


def count_problems(nb) -> list[str]:
    """At least three exercises, at least one autograded with hidden tests."""
    found = exercises(nb).values()
    problems = []
    if len(found) < 3:
        problems.append(f"expected at least 3 exercises, got {len(found)}")
    if not any(ex.autograded and ex.hidden_tests for ex in found):
        problems.append("expected at least one autograded test cell with hidden tests, got none")
    return problems


def answer_cell_problems(nb, stem: str) -> list[str]:
    """Every ``### Exercise N.k`` heading has an answer cell (code solution or written answer) of its own."""
    answered = {exercise_name(nbgrader(c).get("grade_id", "")) for c in nb.cells if nbgrader(c).get("solution")}
    return [f"Exercise {m['n']}.{m['k']}: no answer cell (grade_id {stem}-ex{m['k']}-solution or -answer)"
            for cell in nb.cells if cell["cell_type"] == "markdown"
            for m in HEADING.finditer(cell["source"]) if f"ex{m['k']}" not in answered]


def pass_message_problems(nb) -> list[str]:
    """Each test cell ends with ``passed("Exercise N.k")`` or a ``Credit("Exercise N.k", ...)``'s score."""
    problems = []
    for cell in nb.cells:
        meta = nbgrader(cell)
        if cell["cell_type"] != "code" or not meta.get("grade") or meta.get("solution"):
            continue
        visible = [line for line in visible_source(cell["source"]).splitlines() if line.strip()]
        last, text = (visible[-1].strip() if visible else ""), "\n".join(visible)
        ok = PASSED.fullmatch(last) or (SCORE.fullmatch(last) and "Credit(\"Exercise " in text)
        if not ok:
            problems.append(f"{meta.get('grade_id', '?')}: expected the test cell to end with passed(\"Exercise N.k\") "
                            f"or a Credit's .score() (attnlib.exercises), got {last!r}")
    return problems


def notebook_problems(nb, stem: str) -> list[str]:
    """Every format problem of a chapter notebook (empty when it follows CONTRIBUTING.md and COMMON's convention)."""
    cells = [cell for cell in nb.cells if nbgrader(cell)]
    problems = [p for cell in cells for p in cell_problems(cell, stem)]
    return (problems + stray_marker_problems(nb) + heading_problems(nb, stem) + count_problems(nb)
            + answer_cell_problems(nb, stem) + pass_message_problems(nb))
