"""The course material: exercise format, student release, autograding, launch buttons on the site.

The autograding tests run nbgrader on every chapter (one full-marks student, one who hands in the
untouched release, one with a single wrong answer in one chapter), through the same
``python -m course`` commands as ``make student`` / ``make autograde``.
"""

from __future__ import annotations

import csv
import importlib.util
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest
import yaml

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # the course package lives beside attnlib, not inside it

from course.checks import count_problems, notebook_problems  # noqa: E402
from course.exercises import (  # noqa: E402
    BEGIN_HIDDEN,
    BEGIN_SOLUTION,
    END_HIDDEN,
    END_SOLUTION,
    autograded_points,
    exercise_name,
    exercises,
    hidden_test_lines,
    nbgrader,
    solution_lines,
)
from course.grades import COLUMNS  # noqa: E402
from course.nbgrader_course import assignments, autograde, submissions  # noqa: E402

BOOK = ROOT / "book"
HTML = Path(os.environ.get("ATTNLIB_SITE_HTML", ROOT / "_build" / "html"))  # as in test_site.py
CHAPTERS = assignments(BOOK)
STEMS = [p.stem for p in CHAPTERS]
REPOSITORY_URL = yaml.safe_load((ROOT / "_config.yml").read_text(encoding="utf-8"))["repository"]["url"]
REPO = REPOSITORY_URL.removeprefix("https://github.com/")  # owner/name, as the launch buttons use it


def read(path: Path):
    return nbformat.read(path, as_version=4)


def run_course(*args: str) -> str:
    """``python -m course ...`` as the Makefile runs it; its stdout."""
    command = [sys.executable, "-m", "course", "--book", str(BOOK), *args]
    done = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, check=False)
    assert done.returncode == 0, f"python -m course {' '.join(args)} failed:\n{done.stdout}\n{done.stderr}"
    return done.stdout


def load_extension():
    """book/_ext/nbgrader_site.py, imported by path as Sphinx does through local_extensions."""
    spec = importlib.util.spec_from_file_location("nbgrader_site", ROOT / "book" / "_ext" / "nbgrader_site.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


# --- the chapters follow CONTRIBUTING.md's exercise format ----------------------------------------

@pytest.mark.parametrize("path", CHAPTERS, ids=STEMS)
def test_chapter_has_three_exercises_and_hidden_tests(path):
    assert count_problems(read(path)) == []


@pytest.mark.parametrize("path", CHAPTERS, ids=STEMS)
def test_chapter_follows_exercise_format(path):
    assert notebook_problems(read(path), path.stem) == []


def test_format_check_finds_deviations():
    cell = nbformat.v4.new_code_cell("x = 1", metadata={"nbgrader": {
        "grade": True, "solution": False, "locked": True, "task": False, "points": 2,
        "grade_id": "01_x-ex1-solution", "schema_version": 3}})
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_markdown_cell("### Exercise 1.1: t (3 points)"), cell])
    problems = notebook_problems(nb, "01_x")
    assert any("expected grade_id 01_x-ex<k>-tests" in p for p in problems)
    assert any("hide-input" in p for p in problems)
    assert any("(3 points)" in p and "2 points" in p for p in problems)
    assert any("at least 3 exercises" in p for p in problems)
    assert any("hidden tests" in p for p in problems)


def test_submissions_layout_is_checked(tmp_path):
    (tmp_path / "ada" / "99_nonexistent").mkdir(parents=True)
    with pytest.raises(ValueError, match="expected <student>/<assignment>/"):
        submissions(tmp_path, ["01_dot_products"])
    with pytest.raises(ValueError, match="found none"):
        submissions(tmp_path / "ada" / "99_nonexistent", ["01_dot_products"])
    with pytest.raises(ValueError, match="outside"):
        autograde(BOOK, tmp_path, tmp_path / "ada")


# --- the website hides the markers -----------------------------------------------------------------

def test_extension_strips_markers_and_hidden_tests():
    strip = load_extension().strip_nbgrader_markers
    source = "def f(x):\n    ### BEGIN SOLUTION\n    return 2 * x\n    ### END SOLUTION\n"
    assert strip(source) == "def f(x):\n    return 2 * x"
    tests = "assert f(1) == 2\n### BEGIN HIDDEN TESTS\nassert f(3) == 6\n### END HIDDEN TESTS\nprint('ok')"
    assert strip(tests) == "assert f(1) == 2\nprint('ok')"


def test_extension_and_course_agree_on_the_markers():
    # the Sphinx extension cannot import course/ (not installed); its copy of the markers must match
    extension = load_extension()
    assert extension.SOLUTION_MARKERS == (BEGIN_SOLUTION, END_SOLUTION)
    assert (extension.HIDDEN_BEGIN, extension.HIDDEN_END) == (BEGIN_HIDDEN, END_HIDDEN)


# --- make student: nbgrader's release ------------------------------------------------------------

@pytest.fixture(scope="module")
def release(tmp_path_factory) -> Path:
    """A course directory after ``python -m course student``."""
    root = tmp_path_factory.mktemp("course-release")
    run_course("--course", str(root), "student")
    return root


def released(root: Path, stem: str) -> Path:
    return root / "release" / stem / f"{stem}.ipynb"


def split_lines(nb) -> tuple[set[str], set[str]]:
    """(lines of solution regions, answer cells and hidden tests; every other line) of a notebook."""
    secret, public = set(), set()
    for cell in nb.cells:
        hidden = solution_lines(cell) + hidden_test_lines(cell)
        secret.update(line.strip() for line in hidden)
        public.update(line.strip() for line in cell["source"].splitlines() if line not in hidden)
    return secret, public


def withheld_lines(nb) -> set[str]:
    """Non-trivial lines of ``nb`` that occur only in what nbgrader withholds, in every chapter."""
    public = set().union(*(split_lines(read(path))[1] for path in CHAPTERS))
    return {line for line in split_lines(nb)[0] - public if len(line) >= 10}


def notebook_lines(nb) -> set[str]:
    """Every line of a notebook: cell sources and text outputs."""
    outputs = [out for cell in nb.cells for out in cell.get("outputs", [])]
    text = [cell["source"] for cell in nb.cells] + [str(out.get("text", "")) for out in outputs]
    text += [str(value) for out in outputs for value in out.get("data", {}).values()]
    return {line.strip() for chunk in text for line in chunk.splitlines()}


@pytest.mark.slow
@pytest.mark.parametrize("path", CHAPTERS, ids=STEMS)
def test_release_has_stubs_and_no_hidden_tests(release, path):
    student = read(released(release, path.stem))
    source = [c for c in read(path).cells if nbgrader(c).get("solution") and c["cell_type"] == "code"]
    stubs = [c for c in student.cells if nbgrader(c).get("solution") and c["cell_type"] == "code"]
    assert len(stubs) == len(source) > 0
    assert all("raise NotImplementedError()" in c["source"] for c in stubs)
    text = "\n".join(c["source"] for c in student.cells)
    for marker in (BEGIN_SOLUTION, END_SOLUTION, "HIDDEN TESTS"):
        assert marker not in text
    assert all(not c.get("outputs") for c in student.cells if c["cell_type"] == "code")


@pytest.mark.parametrize("path", CHAPTERS, ids=STEMS)
def test_leak_check_sees_the_solutions_in_the_source(path):
    nb = read(path)
    secret = withheld_lines(nb)
    assert secret, "no solution lines found to check"
    for cell in nb.cells:
        lines = {line.strip() for line in solution_lines(cell) + hidden_test_lines(cell)}
        assert not lines or lines & secret, (
            f"{path.name}: a solution or hidden test whose every line is short or also public, so a leak "
            f"of it could not be seen: {sorted(lines)}")


@pytest.mark.slow
def test_no_solution_line_in_any_release(release):
    everything = set().union(*(notebook_lines(read(released(release, s))) for s in STEMS))
    for path in CHAPTERS:
        secret = withheld_lines(read(path))
        assert secret, f"{path.name}: no solution lines found to check"
        leaked = sorted(secret & everything)
        assert leaked == [], f"{path.name}: solution lines in the student release: {leaked}"


# --- make autograde: full marks, zero, one wrong answer ------------------------------------------

def wrong_target() -> tuple[str, str]:
    """The chapter and exercise to answer wrongly: the first chapter with two autograded exercises."""
    points = {stem: autograded_points(read(path)) for stem, path in zip(STEMS, CHAPTERS, strict=True)}
    stem = next((s for s in STEMS if len(points[s]) >= 2), STEMS[0])
    return stem, next(iter(points[stem]))


def answer(release_cell, source_cell, wrong: bool) -> str:
    """The student's solution cell: the reference answer typed in, or a wrong one in its place."""
    if not wrong:
        return "\n".join(line for line in source_cell["source"].splitlines()
                         if line.strip() not in (BEGIN_SOLUTION, END_SOLUTION))
    lines = release_cell["source"].splitlines()
    i = next(i for i, line in enumerate(lines) if line.strip() == "raise NotImplementedError()")
    indent = lines[i][: len(lines[i]) - len(lines[i].lstrip())]
    lines[i] = indent + ("return None" if indent else "pass")
    return "\n".join(lines)


def one_wrong_answer(release_path: Path, source_path: Path, wrong_exercise: str):
    """The student release with every code exercise answered right except ``wrong_exercise``."""
    nb, source = read(release_path), read(source_path)
    by_id = {nbgrader(c).get("grade_id"): c for c in source.cells}
    for cell in nb.cells:
        gid = nbgrader(cell).get("grade_id")
        if cell["cell_type"] == "code" and nbgrader(cell).get("solution"):
            cell["source"] = answer(cell, by_id[gid], exercise_name(gid) == wrong_exercise)
    return nb


@pytest.fixture(scope="module")
def grades(release, tmp_path_factory) -> dict[tuple[str, str, str], tuple[str, str]]:
    """``python -m course autograde`` over three students; ``{(student, assignment, exercise): (score, max)}``."""
    folder = tmp_path_factory.mktemp("submitted")
    for stem, path in zip(STEMS, CHAPTERS, strict=True):
        for student, notebook in (("reference", path), ("untouched", released(release, stem))):
            (folder / student / stem).mkdir(parents=True)
            shutil.copy(notebook, folder / student / stem / f"{stem}.ipynb")
    stem, exercise = wrong_target()
    (folder / "one_wrong" / stem).mkdir(parents=True)
    nbformat.write(one_wrong_answer(released(release, stem), BOOK / f"{stem}.ipynb", exercise),
                   folder / "one_wrong" / stem / f"{stem}.ipynb")
    root = tmp_path_factory.mktemp("course-grade")
    printed = run_course("--course", str(root), "autograde", str(folder))
    assert "reference" in printed and "total so far" in printed
    with open(root / "grades.csv", newline="") as f:
        reader = csv.DictReader(f)
        assert tuple(reader.fieldnames) == COLUMNS
        return {(r["student"], r["assignment"], r["exercise"]): (r["score"], r["max_score"]) for r in reader}


def scores(grades, student: str, stem: str) -> dict[str, tuple[float | None, float]]:
    return {ex: (float(s) if s else None, float(m)) for (who, a, ex), (s, m) in grades.items()
            if who == student and a == stem}


@pytest.mark.slow
@pytest.mark.parametrize("path", CHAPTERS, ids=STEMS)
def test_reference_gets_full_marks(grades, path):
    expected = autograded_points(read(path))
    got = scores(grades, "reference", path.stem)
    assert {ex: got[ex] for ex in expected} == {ex: (p, p) for ex, p in expected.items()}
    written = set(exercises(read(path))) - set(expected)
    assert all(got[ex][0] is None for ex in written), "written answers wait for a human grader"


@pytest.mark.slow
@pytest.mark.parametrize("path", CHAPTERS, ids=STEMS)
def test_untouched_release_scores_zero(grades, path):
    got = scores(grades, "untouched", path.stem)
    assert set(got) == set(exercises(read(path)))
    assert all(score == 0 for score, _ in got.values())


@pytest.mark.slow
def test_one_wrong_answer_costs_exactly_its_points(grades):
    stem, wrong = wrong_target()
    expected = autograded_points(read(BOOK / f"{stem}.ipynb"))
    got = scores(grades, "one_wrong", stem)
    assert got[wrong] == (0, expected[wrong])
    assert {ex: got[ex] for ex in expected if ex != wrong} == {ex: (p, p) for ex, p in expected.items() if ex != wrong}


# --- the hidden setup cell that installs attnlib on Colab ---------------------------------------

def setup_cell(stem: str):
    cell = next(c for c in read(BOOK / f"{stem}.ipynb").cells if c.cell_type == "code")
    assert "remove-cell" in cell.metadata.get("tags", []), f"{stem}: the first code cell must be the hidden setup cell"
    return cell


def run_setup_cell(stem: str, monkeypatch, attnlib_present: bool) -> list:
    """Execute the chapter's setup cell with pip stubbed out; the commands it would have run."""
    calls = []
    real_find_spec = importlib.util.find_spec
    monkeypatch.setattr(subprocess, "run", lambda command, **kwargs: calls.append(command))
    monkeypatch.setattr(importlib.util, "find_spec",
                        lambda name, *a: real_find_spec(name, *a) if attnlib_present or name != "attnlib" else None)
    exec(compile(setup_cell(stem).source, f"{stem} setup cell", "exec"), {})
    return calls


@pytest.mark.parametrize("stem", STEMS)
def test_setup_cell_does_nothing_when_attnlib_is_present(stem, monkeypatch):
    assert run_setup_cell(stem, monkeypatch, attnlib_present=True) == []


@pytest.mark.parametrize("stem", STEMS)
def test_setup_cell_installs_attnlib_from_the_configured_repository(stem, monkeypatch):
    calls = run_setup_cell(stem, monkeypatch, attnlib_present=False)
    assert len(calls) == 1, f"{stem}: expected one pip install, got {calls}"
    command = calls[0]
    assert command[1:4] == ["-m", "pip", "install"], command
    assert f"attnlib[views,models] @ git+{REPOSITORY_URL}" in command, (
        f"{stem}: the setup cell must install from _config.yml's repository ({REPOSITORY_URL}), got {command}")


# --- launch and download buttons on the built site ----------------------------------------------

def chapter_page(stem: str) -> str:
    if not HTML.is_dir():
        pytest.fail(f"{HTML} is missing: run `make book` first (make test does)")
    page = HTML / "book" / f"{stem}.html"
    assert page.is_file(), f"{page} is missing: is book/{stem} in _toc.yml? run `make book`"
    return page.read_text()


@pytest.mark.browser  # reads the built site, like the browser tests (`make unit` runs without it)
@pytest.mark.parametrize("stem", STEMS)
def test_chapter_page_has_launch_and_download_buttons(stem):
    html = chapter_page(stem)
    colab = f"https://colab.research.google.com/github/{REPO}/blob/main/book/{stem}.ipynb"
    binder = f"https://mybinder.org/v2/gh/{REPO}/main?urlpath=lab/tree/book/{stem}.ipynb"
    assert f'href="{colab}"' in html
    assert f'href="{binder}"' in html
    assert re.search(rf'href="(\.\./)+_sources/book/{stem}\.ipynb"', html), "no .ipynb download button"
    assert (HTML / "_sources" / "book" / f"{stem}.ipynb").is_file()


@pytest.mark.browser  # reads the built site
@pytest.mark.parametrize("stem", STEMS)
def test_chapter_page_shows_no_nbgrader_markers(stem):
    html = chapter_page(stem)
    for marker in ("BEGIN SOLUTION", "END SOLUTION", "HIDDEN TESTS"):
        assert marker not in html
    setup_comment = setup_cell(stem).source.splitlines()[0].lstrip("# ")
    assert setup_comment not in html, "the setup cell must be hidden on the website"
