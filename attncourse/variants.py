"""Fair grading, checked on recorded answers: a wrong answer or a rule-breaking shortcut loses points, a correct
alternative gets full marks, and so does the reference solution.

``course/answers/<stem>.py`` records, for every autograded exercise of a chapter, a plausible ``wrong``
answer, a ``shortcut`` that breaks the exercise's stated rule (or None when it states none) and a correct
``alternative`` (the format is in that folder's files). Each may also be several, ``{"what it does": source}``:
one wrong answer per requirement the exercise states, a shortcut under an alias, an alternative with a helper
of its own. In a kernel that has run the whole chapter, as
nbgrader's autograde runs a submission, each of them and the reference solution is run as the answer cell
and followed by the exercise's visible test (as released to students) and its full test (hidden tests
included); nbgrader's own ``determine_grade`` scores each test run.

The kernel is the one strict nbval has just run the chapter in: the root ``conftest.py`` adds an item
``<chapter>.ipynb::recorded answers`` after a chapter's last cell, so grading the answers costs no chapter
execution of its own (``grade`` takes any ``execute(source) -> outputs`` function).
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

import nbformat

from attncourse.exercise_cells import BEGIN_SOLUTION, END_SOLUTION, autograded_points, nbgrader, visible_source

ANSWERS = Path(__file__).resolve().parents[1] / "course" / "answers"  # course/answers/<stem>.py
VARIANTS = ("wrong", "shortcut", "alternative")


def answers_dir() -> Path:
    """Where the recorded answers are: ``ATTNLIB_ANSWERS_DIR`` (the tests' own examples) or course/answers."""
    return Path(os.environ.get("ATTNLIB_ANSWERS_DIR", ANSWERS))


def load_answers(stem: str, folder: Path | None = None) -> dict:
    """``ANSWERS`` of ``<folder>/<stem>.py``: ``{exercise: {"wrong": …, "shortcut": … | None, "alternative": …}}``."""
    path = (folder or answers_dir()) / f"{stem}.py"
    if not path.is_file():
        raise FileNotFoundError(f"{stem} has autograded exercises, so it needs recorded answers in {path}; "
                                f"there is no such file")
    namespace: dict = {}
    exec(compile(path.read_text(encoding="utf-8"), str(path), "exec"), namespace)  # noqa: S102 - our own file
    return namespace["ANSWERS"]


def format_problems(nb, answers: dict) -> list[str]:
    """What is missing from a chapter's recorded answers: an exercise, or one of its variants."""
    expected = autograded_points(nb)
    problems = []
    if set(answers) != set(expected):
        problems.append(f"answers recorded for {sorted(answers)}, autograded exercises: {sorted(expected)}")
    for exercise, variants in answers.items():
        if any(isinstance(v, dict) and not all(v.values()) for v in variants.values()):
            problems.append(f"{exercise}: a named answer is empty")
        if not (variants.get("wrong") and variants.get("alternative") and "shortcut" in variants):
            problems.append(f"{exercise}: expected a 'wrong', a 'shortcut' (None allowed) and an 'alternative' "
                            f"answer, got {sorted(variants)}")
    return problems


def named_variants(variants: dict) -> list[tuple[str, str | None]]:
    """``[(name, source)]`` of one exercise's answers. Each kind is one source or ``{what it does: source}``
    (e.g. one wrong answer per requirement the exercise states), named ``wrong: <what>`` and so on."""
    found = []
    for kind, source in variants.items():
        if isinstance(source, dict):
            found += [(f"{kind}: {what}", one) for what, one in source.items()]
        else:
            found.append((kind, source))
    return found


def printed(outputs, tracebacks: bool = False) -> str:
    """What a run printed: streams, results, and for an error its name and message (or, with ``tracebacks``,
    its traceback, which quotes the cell's source: a test cell's own pass message among it)."""
    def error(out) -> str:
        return "\n".join(out["traceback"]) if tracebacks else f"{out['ename']}: {out['evalue']}\n"
    return "".join(error(out) if out.get("output_type") == "error" else
                   str(out.get("text", "")) + str(out.get("data", {}).get("text/plain", "")) for out in outputs)


def reference_answer(solution_source: str) -> str:
    return "\n".join(line for line in solution_source.splitlines()
                     if line.strip() not in (BEGIN_SOLUTION, END_SOLUTION))


def grade(execute: Callable[[str], list], nb, stem: str, answers: dict) -> dict:
    """``{(exercise, variant, "visible" | "full"): (score, max score, printed)}`` for every recorded answer
    and the reference (variant ``"reference"``), run by ``execute`` in a kernel that has run the chapter."""
    from nbgrader.utils import determine_grade  # noqa: PLC0415 - a grading tool, not a student package

    cells = {nbgrader(c).get("grade_id"): c for c in nb.cells}
    results = {}
    for exercise, variants in answers.items():
        solution, tests = cells[f"{stem}-{exercise}-solution"], cells[f"{stem}-{exercise}-tests"]
        for variant, source in [*named_variants(variants), ("reference", reference_answer(solution.source))]:
            if source is None:
                continue
            answer = execute(source)
            if any(out.get("output_type") == "error" for out in answer):
                raise AssertionError(f"{exercise} {variant}: the answer cell itself fails:\n"
                                     f"{printed(answer, tracebacks=True)}")
            for which, test in (("visible", visible_source(tests.source)), ("full", tests.source)):
                cell = nbformat.v4.new_code_cell(test, metadata={"nbgrader": dict(nbgrader(tests))})
                cell.outputs = [nbformat.from_dict(out) for out in execute(test)]
                score, most = determine_grade(cell)
                results[(exercise, variant, which)] = (score, most, printed(cell.outputs))
    return results


def problems(results: dict, answers: dict) -> list[str]:
    """Where grading is unfair: the reference or an alternative short of full marks, a wrong answer passing
    the visible test or getting full marks, a shortcut costing nothing."""
    found = []
    for exercise, variants in answers.items():
        names = [name for name, source in named_variants(variants) if source is not None]
        for name in ["reference", *names]:
            found += _unfair(exercise, name, {which: results[(exercise, name, which)] for which in ("visible", "full")})
    return found


def _unfair(exercise: str, name: str, scored: dict) -> list[str]:
    """What is unfair about one answer's ``{"visible": (score, max, printed), "full": ...}``."""
    kind, found = name.split(":", 1)[0], []
    if kind in ("reference", "alternative"):
        found += [f"{exercise}: the {name} scores {got}/{most} on its {which} test:\n{text}"
                  for which, (got, most, text) in scored.items() if got != most]
    elif kind == "wrong":
        got, most, text = scored["visible"]
        if got == most or "tests passed" in text:
            found.append(f"{exercise}: the recorded {name} answer passes the visible test:\n{text}")
        if scored["full"][0] >= most:
            found.append(f"{exercise}: the recorded {name} answer gets full marks")
    elif kind == "shortcut" and scored["full"][0] >= scored["full"][1]:
        found.append(f"{exercise}: breaking the stated rule ({name}) costs no points:\n{scored['full'][2]}")
    return found
