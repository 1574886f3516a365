"""The course material: exercise format, student release and editions, fair grading, a term of nbgrader.

What each group executes (the rest reads files):

* format, markup, leak and edition checks: no kernel. ``release`` runs nbgrader ``generate_assignment``
  on every chapter once (no execution) into a throw-away course directory.
* recorded answers (``course/answers/<stem>.py``: wrong, shortcut, alternative): graded by
  ``book/<stem>.ipynb::recorded answers`` (attncourse/variants.py, added by the root conftest.py) in the kernel
  strict nbval has just run the chapter in, no execution of its own: each answer and the reference, each
  followed by the exercise's visible test (as released) and its full test, scored by nbgrader's own
  ``determine_grade``: the guarantee one nbgrader autograde per variant would give (same cells, same
  scoring). Here: every autograded exercise has its answers, and the item grades (on a tiny chapter).
* the scripted term and the bad batch: nbgrader's real ``autograde``/``generate_feedback``/gradebook on
  tiny assignments written here (one code and one written exercise each), as an ordinary user (under
  ``setpriv`` without root's DAC override when run as root, then from a copy of the repository whose ``.venv`` is
  a symlink to this one, the term's under ``/home``, the bad batch's under ``/srv``; the term's folders have
  spaces in their names): 9 + 6 tiny notebook executions, the term's on the default workers, the bad batch's one
  at a time. Workers and Dask: 3 x 3 tiny executions. The LMS zip import, the lock and the reports' pieces
  execute nothing.
* the student edition of the built site (it reads ``make book``'s output).

The instructors' JupyterHub recipe is run, and chapter 6 in the environment it makes, by test_jupyterlab.py.
"""

from __future__ import annotations

import csv
import functools
import html
import importlib.util
import os
import re
import shutil
import subprocess
import sys
import textwrap
import zipfile
from html.parser import HTMLParser
from pathlib import Path

import nbformat
import pytest
import yaml
from nbclient import NotebookClient

from attncourse import repository, variants
from attncourse.__main__ import main as course_main
from attncourse.collect import scan
from attncourse.conformance import count_problems, notebook_problems
from attncourse.coursedir import GRADER_NOTES_TAG, Course
from attncourse.exercise_cells import (
    BEGIN_HIDDEN,
    BEGIN_SOLUTION,
    CODE_STUB,
    END_HIDDEN,
    END_SOLUTION,
    RELEASE_DIR,
    autograded_points,
    chapters,
    hidden_test_lines,
    marked_lines,
    nbgrader,
    solution_lines,
)
from attncourse.markup import Bibliography, equation_numbers, plain_markdown, student_notebook
from attnsite import nbgrader_site
from tests.course import drift
from tests.course.placements import copy_of_repository, placed_folder, python_of

ROOT = Path(__file__).resolve().parents[2]
BOOK = ROOT / "book"
ANSWERS = ROOT / "course" / "answers"
HTML = Path(os.environ.get("ATTNLIB_SITE_HTML", ROOT / "_build" / "html"))  # as in test_site.py
CHAPTERS = chapters(BOOK)
STEMS = [p.stem for p in CHAPTERS]
REPOSITORY_URL = yaml.safe_load((ROOT / "_config.yml").read_text(encoding="utf-8"))["repository"]["url"]
REPO = REPOSITORY_URL.removeprefix("https://github.com/")  # owner/name, as the launch buttons use it
# what make book builds: the releases take the chapters' numbers from its execution cache (attncourse.release), and
# the student edition's tests read the built site; make test runs this file once the build is done
pytestmark = pytest.mark.built
BOOK_ONLY_MARKUP = ("{eq}`", "{cite", "{bibliography}", "```{", ":::{", "{numref}`", "{ref}`", "{doc}`", "{glue")


def read(path: Path):
    return nbformat.read(path, as_version=4)


def course(*args, book: Path = BOOK) -> int:
    """``python -m attncourse --book <book> ...`` in this process (the Makefile runs the same ``main``)."""
    return course_main(["--book", str(book), *map(str, args)])


# --- the chapters follow CONTRIBUTING.md's exercise format ----------------------------------------

@pytest.mark.parametrize("path", CHAPTERS, ids=STEMS)
def test_chapter_has_three_exercises_and_hidden_tests(path):
    assert count_problems(read(path)) == []


@pytest.mark.parametrize("path", CHAPTERS, ids=STEMS)
def test_chapter_follows_exercise_format(path):
    """Flags, grade ids, headings, an answer cell for every exercise, one pass message in every test cell."""
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
    assert any("Exercise 1.1: no answer cell" in p for p in problems)
    assert any("passed(" in p and "'x = 1'" in p for p in problems)


# --- the website's two editions (attnsite/nbgrader_site.py) --------------------------------------

def test_editions_rewrite_exercise_code():
    strip = nbgrader_site.strip_nbgrader_markers
    source = "def f(x):\n    ### BEGIN SOLUTION\n    return 2 * x\n    ### END SOLUTION\n"
    assert strip(source, "student") == "def f(x):\n" + textwrap.indent(CODE_STUB, "    ")  # the release's stub
    assert strip(source, "instructor") == "def f(x):\n    return 2 * x"
    tests = "assert f(1) == 2\n### BEGIN HIDDEN TESTS\nassert f(3) == 6\n### END HIDDEN TESTS\nprint('ok')"
    assert strip(tests, "student") == "assert f(1) == 2\nprint('ok')"
    assert "assert f(3) == 6" in strip(tests, "instructor") and "###" not in strip(tests, "instructor")


def test_marked_lines_name_each_line_s_region_and_marker():
    """The one reader of the markers (the course's checks and the site's editions read sources through it)."""
    source = f"a\n  {BEGIN_SOLUTION}\n  b\n  {END_SOLUTION}\n{BEGIN_HIDDEN}\nc\n{END_HIDDEN}\nd"
    assert list(marked_lines(source)) == [
        ("a", None, None), (f"  {BEGIN_SOLUTION}", "solution", BEGIN_SOLUTION), ("  b", "solution", None),
        (f"  {END_SOLUTION}", "solution", END_SOLUTION), (BEGIN_HIDDEN, "hidden", BEGIN_HIDDEN),
        ("c", "hidden", None), (END_HIDDEN, "hidden", END_HIDDEN), ("d", None, None)]
    assert "\n".join(nbgrader_site.strip_nbgrader_markers(source, "instructor").split("\n")[1:3]) == \
        "  b\n# Hidden tests: graded, left out of the student release"


def split_lines(nb) -> tuple[set[str], set[str]]:
    """(lines of solution regions, answer cells and hidden tests; every other line) of a notebook."""
    secret, public = set(), set()
    for cell in nb.cells:
        hidden = solution_lines(cell) + hidden_test_lines(cell)
        secret.update(line.strip() for line in hidden)
        public.update(line.strip() for line in cell["source"].splitlines() if line not in hidden)
    return secret, public


def withheld_lines(nb) -> set[str]:
    """Non-trivial lines of ``nb`` that occur only in what nbgrader withholds, in every chapter.

    A line the site publishes anyway on a page that is no assignment (the background page's self-check answers
    open with the same ``:class: dropdown`` as a solution) gives nothing away, so it counts as public too; so does
    a line of attnlib's source, which students install and the pages print (``inspect.getsource``: chapter 10's
    answers open with ``def mask_mod(b, h, q_idx, kv_idx):`` as attnlib.flex's variants do)."""
    published = sorted(p for p in BOOK.glob("*.ipynb") if p not in CHAPTERS)
    public = set().union(*(split_lines(read(path))[1] for path in [*CHAPTERS, *published]))
    public |= {line.strip() for path in (ROOT / "attnlib").rglob("*.py")
               for line in path.read_text(encoding="utf-8").splitlines()}
    return {line for line in split_lines(nb)[0] - public if len(line) >= 10}


def edition_lines(path: Path, which: str) -> set[str]:
    """Every line of a chapter as the ``which`` edition of the site renders its cells' sources."""
    extension = nbgrader_site
    os.environ["ATTNLIB_EDITION"] = which
    try:
        nb = nbformat.reads(extension.student_markdown(path.read_text()) if which == "student"
                            else path.read_text(), as_version=4)
    finally:
        os.environ.pop("ATTNLIB_EDITION")
    text = [extension.strip_nbgrader_markers(c.source, which) if c.cell_type == "code" else c.source
            for c in nb.cells]
    return {line.strip() for chunk in text for line in chunk.splitlines()}


@pytest.mark.parametrize("path", CHAPTERS, ids=STEMS)
def test_instructor_edition_has_solutions_and_hidden_tests_student_edition_none(path):
    secret = withheld_lines(read(path))
    assert secret, f"{path.name}: no solution lines found to check"
    assert secret <= edition_lines(path, "instructor")
    assert not secret & edition_lines(path, "student")


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


# --- make student: nbgrader's release, in plain Markdown ------------------------------------------

@pytest.fixture(scope="module")
def release(tmp_path_factory) -> Path:
    """A course directory after ``python -m attncourse student`` (generate_assignment, no execution)."""
    root = tmp_path_factory.mktemp("course-release")
    assert course("--course", root, "student") == 0
    return root


def released(root: Path, stem: str) -> Path:
    return root / "release" / stem / f"{stem}.ipynb"


def notebook_lines(nb) -> set[str]:
    """Every line of a notebook: cell sources and text outputs."""
    outputs = [out for cell in nb.cells for out in cell.get("outputs", [])]
    text = [cell["source"] for cell in nb.cells] + [str(out.get("text", "")) for out in outputs]
    text += [str(value) for out in outputs for value in out.get("data", {}).values()]
    return {line.strip() for chunk in text for line in chunk.splitlines()}


@pytest.mark.parametrize("path", CHAPTERS, ids=STEMS)
def test_release_has_stubs_and_no_hidden_tests(release, path):
    student = read(released(release, path.stem))
    source = [c for c in read(path).cells if nbgrader(c).get("solution") and c["cell_type"] == "code"]
    stubs = [c for c in student.cells if nbgrader(c).get("solution") and c["cell_type"] == "code"]
    assert len(stubs) == len(source) > 0
    dedented = ["\n".join(line.strip() for line in c["source"].splitlines()) for c in stubs]
    assert all(CODE_STUB in text for text in dedented), "expected exercise_cells.CODE_STUB in every answer cell"
    text = "\n".join(c["source"] for c in student.cells)
    for marker in (BEGIN_SOLUTION, END_SOLUTION, "HIDDEN TESTS"):
        assert marker not in text
    assert all(not c.get("outputs") for c in student.cells if c["cell_type"] == "code")


@pytest.mark.parametrize("path", CHAPTERS, ids=STEMS)
def test_release_is_plain_markdown_without_widget_state(release, path):
    student = read(released(release, path.stem))
    markdown = "\n".join(c.source for c in student.cells if c.cell_type == "markdown")
    for markup in BOOK_ONLY_MARKUP:
        assert markup not in markdown, f"{path.name}: book-only markup {markup!r} in the student release"
    assert "widgets" not in student.metadata
    labels = re.findall(r"\$\$[ \t]*\((eq-[\w-]+)\)", "\n".join(c.source for c in read(path).cells))
    tags = re.findall(r"\\tag\{(\d+\.\d+)\}", markdown)
    assert len(tags) == len(labels), "every labelled equation keeps a number"
    if "{cite" in "\n".join(c.source for c in read(path).cells):
        assert re.search(r"\(\w[\w' -]*( et al\.| and \w+)?, \d{4}", markdown), "citations become (Author, year)"
        assert re.search(r"^- .+\(\d{4}\)\. ", markdown, re.M), "the bibliography becomes a plain list"


def test_book_only_markup_becomes_plain_markdown(tmp_path):
    bib = tmp_path / "references.bib"
    bib.write_text("@article{doe2020x,\n  title = {On {X}},\n  author = {Doe, Jane and Ro, Al and Li, Bo},\n"
                   "  journal = {J. Y},\n  year = {2020}\n}\n")
    one = nbformat.v4.new_notebook(cells=[nbformat.v4.new_markdown_cell("$$\na = b\n$$ (eq-one-a)")])
    two = nbformat.v4.new_notebook(metadata={"widgets": {"state": {}}}, cells=[
        nbformat.v4.new_code_cell("glue('r', 0.8213)", outputs=[nbformat.v4.new_output(
            "display_data", data={"text/plain": "0.8213"}, metadata={"scrapbook": {"name": "r"}})]),
        nbformat.v4.new_markdown_cell("$$\nc = d\n$$ (eq-two-c)\n\nBy {eq}`eq-two-c` and {eq}`eq-one-a`, "
                                      "as {cite}`ch2-doe2020x` found, at {glue:text}`r:.2f`."),
        nbformat.v4.new_markdown_cell("```{warning}\nMind the mask.\n```\n\n```{bibliography}\n"
                                      ":filter: docname in docnames\n```")])
    numbers = equation_numbers({"01_one": one, "02_two": two})
    student = student_notebook(two, "02_two", numbers, Bibliography(bib))
    text = "\n".join(c.source for c in student.cells if c.cell_type == "markdown")
    assert "c = d \\tag{2.1}" in text
    assert "By (2.1) and ([1.1](01_one.ipynb)), as (Doe et al., 2020) found, at 0.82." in text
    assert "> **Warning**\n>\n> Mind the mask." in text
    assert "- Doe, Jane; Ro, Al; Li, Bo (2020). On X. *J. Y*." in text
    assert "widgets" not in student.metadata and "widgets" in two.metadata  # the chapter is left alone


def test_directives_nest_in_the_release():
    """markdown-it reads the fences (attncourse/markup.py): an admonition holding a code fence and another admonition
    becomes a quote holding both, the inner one quoted in turn; a fence indented in a list item stays as written
    (the documented limit: the release leaves what it cannot place as a block quote)."""
    source = ("::::{note} Mind the shapes\n:class: tip\nQ is (Lq, Dk):\n```python\nq = torch.randn(2, 3)\n```\n"
              ":::{warning}\nNot K.\n:::\n::::\n\nAfter.\n\n- a list\n  ```{note}\n  kept\n  ```\n")
    assert plain_markdown(source, "01_x", {}, None, "") == (
        "> **Mind the shapes**\n>\n> Q is (Lq, Dk):\n> ```python\n> q = torch.randn(2, 3)\n> ```\n"
        "> > **Warning**\n> >\n> > Not K.\n\nAfter.\n\n- a list\n  ```{note}\n  kept\n  ```\n")


def test_no_solution_line_in_any_release(release):
    everything = set().union(*(notebook_lines(read(released(release, s))) for s in STEMS))
    for path in CHAPTERS:
        leaked = sorted(withheld_lines(read(path)) & everything)
        assert leaked == [], f"{path.name}: solution lines in the student release: {leaked}"


def test_committed_student_notebooks_are_up_to_date(release):
    """course/release/ is what the site's downloads and launch buttons give out: the current release."""
    committed = sorted(p.name for p in RELEASE_DIR.glob("*.ipynb"))
    assert committed == [f"{s}.ipynb" for s in STEMS], "run `make student` and commit course/release/"
    for stem in STEMS:  # the prose's numbers were computed where `make student` ran: drift.py's tolerance
        ours, theirs = read(released(release, stem)), read(RELEASE_DIR / f"{stem}.ipynb")
        assert [c.id for c in theirs.cells] == [c.id for c in ours.cells], (
            f"course/release/{stem}.ipynb is out of date (other cells): run `make student` and commit it")
        for mine, committed in zip(ours.cells, theirs.cells, strict=True):
            assert {**committed, "source": ""} == {**mine, "source": ""}, f"{stem} {mine.id}: run `make student`"
            assert drift.difference(committed.source, mine.source) is None, (
                f"course/release/{stem}.ipynb, cell {mine.id}, is out of date: "
                f"{drift.difference(committed.source, mine.source)}: run `make student` and commit it")


# --- fair grading: recorded answers (course/answers/<stem>.py, attncourse/variants.py) -----------------------
#
# Each autograded chapter's recorded answers are graded by `book/<stem>.ipynb::recorded answers`, an item
# the root conftest.py adds after the chapter's cells under strict nbval, in the kernel that ran the chapter
# (make test's notebooks part). Here: every such chapter has them, and that item really grades.

AUTOGRADED = [p for p in CHAPTERS if autograded_points(read(p))]


@pytest.mark.parametrize("path", AUTOGRADED, ids=[p.stem for p in AUTOGRADED])
def test_recorded_answers_cover_every_autograded_exercise(path):
    assert variants.format_problems(read(path), variants.load_answers(path.stem, ANSWERS)) == []


def test_nbval_adds_recorded_answers_after_every_autograded_chapter():
    done = subprocess.run([sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider",
                           "--nbval", "--nbval-current-env", *map(str, AUTOGRADED)],
                          cwd=ROOT, capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-2000:]
    listed = [line for line in done.stdout.splitlines() if "::" in line]
    for path in AUTOGRADED:
        mine = [line for line in listed if line.startswith(f"book/{path.name}::")]
        assert mine and mine[-1] == f"book/{path.name}::recorded answers", (path.name, mine[-3:])


def _tiny_chapter_with_answers(folder: Path, wrong: str) -> Path:
    """A tiny autograded chapter whose exercise needs a name the chapter defines, executed and stored, with
    the root conftest.py beside it and recorded answers in ``folder/answers``."""
    folder.mkdir(parents=True)
    stem = tiny_assignment(folder, 1, "scaled")
    path = folder / f"{stem}.ipynb"
    nb = read(path)
    nb.cells.insert(0, nbformat.v4.new_code_cell("FACTOR = 2"))
    solution = next(c for c in nb.cells if nbgrader(c).get("grade_id") == f"{stem}-ex1-solution")
    solution.source = solution.source.replace("return 2 * x", "return FACTOR * x")
    NotebookClient(nb, timeout=120, kernel_name="python3", resources={"metadata": {"path": str(folder)}}).execute()
    nbformat.write(nb, path)
    shutil.copy(ROOT / "conftest.py", folder / "conftest.py")
    (folder / "answers").mkdir()
    (folder / "answers" / f"{stem}.py").write_text("ANSWERS = " + repr({"ex1": {
        "wrong": wrong, "shortcut": None, "alternative": "def double(x):\n    return x * FACTOR"}}))
    return path


def _nbval(path: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "ATTNLIB_ANSWERS_DIR": str(path.parent / "answers"), "PYTHONPATH": str(ROOT)}
    return subprocess.run([sys.executable, "-m", "pytest", "-v", "-p", "no:cacheprovider", "--rootdir",
                           str(path.parent), "--nbval", "--nbval-current-env", path.name],
                          cwd=path.parent, capture_output=True, text=True, timeout=300, check=False, env=env)


def test_recorded_answers_are_graded_in_the_chapters_kernel(tmp_path):
    """After the chapter's cells, in their kernel (FACTOR comes from the chapter), as nbgrader would grade."""
    fair = _nbval(_tiny_chapter_with_answers(tmp_path / "fair", "def double(x):\n    return FACTOR + x"))
    assert fair.returncode == 0 and "::recorded answers PASSED" in fair.stdout, fair.stdout[-3000:]
    unfair = _nbval(_tiny_chapter_with_answers(tmp_path / "unfair", "def double(x):\n    return x + x"))
    assert unfair.returncode == 1 and "::recorded answers FAILED" in unfair.stdout, unfair.stdout[-3000:]
    assert "the recorded wrong answer passes the visible test" in unfair.stdout


# --- a term of nbgrader on two tiny assignments -----------------------------------------------------

def tiny_assignment(book: Path, n: int, name: str) -> str:
    """``book/0n_<name>.ipynb``: a code exercise (2 points, hidden test) and a written one (1 point)."""
    stem = f"0{n}_{name}"
    cells = [
        nbformat.v4.new_markdown_cell(f"# {n}. {name}\n\n## Exercises\n\n### Exercise {n}.1: double it (2 points)"),
        nbformat.v4.new_code_cell(
            "def double(x):\n    ### BEGIN SOLUTION\n    return 2 * x\n    ### END SOLUTION",
            metadata={"tags": ["hide-input"], "nbgrader": {
                "grade": False, "solution": True, "locked": False, "task": False,
                "grade_id": f"{stem}-ex1-solution", "schema_version": 3}}),
        nbformat.v4.new_code_cell(
            f"assert double(1) == 2\n{BEGIN_HIDDEN}\nassert double(-3) == -6\n{END_HIDDEN}\n"
            f"print('Exercise {n}.1: tests passed')",
            metadata={"tags": ["hide-input"], "nbgrader": {
                "grade": True, "solution": False, "locked": True, "task": False, "points": 2,
                "grade_id": f"{stem}-ex1-tests", "schema_version": 3}}),
        nbformat.v4.new_markdown_cell(f"### Exercise {n}.2: why (1 point)\n\nWhy is doubling linear?"),
        nbformat.v4.new_markdown_cell(
            ":::{admonition} Solution\n:class: dropdown\nBecause 2(x + y) = 2x + 2y.\n\n"
            "**Rubric** (1 point):\n- 1: states additivity\n:::",
            metadata={"nbgrader": {"grade": True, "solution": True, "locked": False, "task": False, "points": 1,
                                   "grade_id": f"{stem}-ex2-answer", "schema_version": 3}}),
    ]
    nbformat.write(nbformat.v4.new_notebook(cells=cells, metadata={"kernelspec": {
        "name": "python3", "display_name": "Python 3", "language": "python"}}), book / f"{stem}.ipynb")
    return stem


def submit(inbox: Path, student: str, root: Path, stem: str, code: str, written: str = "It is.",
           name: str | None = None) -> Path:
    """A student's copy of the release, with ``code`` in the answer cell, saved under ``inbox``."""
    nb = read(released(root, stem))
    for cell in nb.cells:
        if nbgrader(cell).get("solution"):
            cell.source = code if cell.cell_type == "code" else written
    path = inbox / student / stem / (name or f"{stem}.ipynb")
    path.parent.mkdir(parents=True, exist_ok=True)
    nbformat.write(nb, path)
    return path


RIGHT, WRONG = "def double(x):\n    return x + x", "def double(x):\n    return x * x"


def sheet(root: Path) -> dict[str, dict[str, str]]:
    with open(root / "grades.csv", newline="") as f:
        rows = list(csv.DictReader(f))
    return {row.pop("student"): row for row in rows}


def autograded_mtimes(root: Path) -> dict[str, float]:
    return {str(p.relative_to(root)): p.stat().st_mtime for p in (root / "autograded").rglob("*.ipynb")}


def manual_grade(root: Path, stem: str, student: str, score: float) -> None:
    """What a TA does in formgrader: a manual score and a comment on the written answer."""
    with Course(root).gradebook() as gb:
        grade = gb.find_grade(f"{stem}-ex2-answer", stem, stem, student)
        grade.manual_score = score
        comment = gb.find_comment(f"{stem}-ex2-answer", stem, stem, student)
        comment.manual_comment = "Additivity, well said."
        gb.db.commit()


def manual_state(root: Path, stem: str, student: str) -> tuple:
    with Course(root).gradebook() as gb:
        grade = gb.find_grade(f"{stem}-ex2-answer", stem, stem, student)
        comment = gb.find_comment(f"{stem}-ex2-answer", stem, stem, student)
        return grade.manual_score, comment.manual_comment


CAP_DAC_OVERRIDE = 1  # linux/capability.h: bypass file read, write and execute permission checks
WITHOUT_DAC = ["setpriv", "--bounding-set=-dac_override,-dac_read_search"]


def overrides_permissions() -> bool:
    """Whether this process ignores file permissions (root with CAP_DAC_OVERRIDE in its effective set)."""
    status = Path("/proc/self/status").read_text()
    effective = int(re.search(r"^CapEff:\s*([0-9a-f]+)", status, re.M)[1], 16)
    return bool(effective >> CAP_DAC_OVERRIDE & 1)


def as_ordinary_user(place: str):
    """Run the test as an ordinary user sees files: where this process overrides file permissions (root, as in CI),
    the test runs in a child pytest under ``setpriv`` with the DAC override dropped, so a read-only file is
    read-only, as it is for an instructor who is not root; the child must pass. It runs from a copy of this
    repository under ``place`` (``/home``, ``/srv``) whose ``.venv`` is a symlink to this venv, its course folders
    beside it: paths with spaces, where the sandbox must find the Python, the venv and attnlib (issue #47)."""
    def decorate(test):
        @functools.wraps(test)
        def run(*args, tmp_path, **kwargs):
            if not overrides_permissions():
                return test(*args, tmp_path=tmp_path, **kwargs)
            if shutil.which("setpriv") is None:
                pytest.fail("root without setpriv (util-linux): cannot test grading as an ordinary user")
            with placed_folder(place) as folder:
                checkout = copy_of_repository(folder / "the repository")
                env = {name: value for name, value in os.environ.items() if name != "PYTHONPATH"}
                child = subprocess.run(
                    [*WITHOUT_DAC, str(python_of(checkout)), "-m", "pytest", "-q", "-p", "no:cacheprovider",
                     "--tb=short", "--show-capture=no", "--basetemp", str(folder / "test folders"),
                     f"tests/course/test_course.py::{test.__name__}"],
                    cwd=checkout, capture_output=True, text=True, timeout=900, check=False, env=env)
            assert child.returncode == 0, f"as an ordinary user:\n{child.stdout[-6000:]}{child.stderr[-2000:]}"
            assert "1 passed" in child.stdout, child.stdout[-2000:]
        return run
    return decorate


def test_child_tests_run_without_the_dac_override(tmp_path):
    """What ``as_ordinary_user`` relies on: under setpriv, root cannot write a read-only file."""
    target = tmp_path / "read-only.txt"
    target.write_text("graded")
    target.chmod(0o444)
    probe = f"open({str(target)!r}, 'a')"
    done = subprocess.run([*WITHOUT_DAC, sys.executable, "-c", probe], capture_output=True, text=True, check=False)
    if overrides_permissions():
        assert done.returncode == 1 and "PermissionError" in done.stderr, done.stderr[-500:]
    else:
        assert done.returncode != 0, "an ordinary user wrote a read-only file"


def formgrader_page(root: Path, student: str, assignment: str) -> str:
    """The grader's page of a submission as formgrader renders it: its exporter (``HTMLExporter`` with the
    configuration formgrader loads from the course directory, plus its own template) on the autograded notebook."""
    from nbconvert.exporters import HTMLExporter  # noqa: PLC0415 - grading tools only
    from nbgrader.server_extensions.formgrader.formgrader import FormgradeExtension  # noqa: PLC0415

    extension, here = FormgradeExtension(), os.getcwd()
    os.chdir(root)  # formgrader reads nbgrader_config.py from the directory it is started in
    try:
        config = extension.load_config()
    finally:
        os.chdir(here)
    config.merge(extension.build_extra_config())
    notebook = root / "autograded" / student / assignment / f"{assignment}.ipynb"
    resources = {"assignment_id": assignment, "notebook_id": assignment, "submission_id": "x", "index": 0,
                 "total": 1, "base_url": "", "student": student, "last_name": "", "first_name": "",
                 "notebook_path": str(notebook)}
    return HTMLExporter(config=config).from_filename(str(notebook), resources=resources)[0]


@pytest.mark.slow
@as_ordinary_user("/home")
def test_scripted_term(tmp_path, capsys):
    """A class list, release, grade week 1, a manual grade, release week 2 with a due date already past and grade
    it, rerun everything (nothing is lost), feedback held back for ungraded answers, a resubmission, a fixed test."""
    book, root, inbox = tmp_path / "the book", tmp_path / "my course", tmp_path / "hand ins"  # spaces (#47)
    book.mkdir()
    week1 = tiny_assignment(book, 1, "doubling")
    assert course("--course", root, "student", book=book) == 0
    (tmp_path / "class.csv").write_text("id,first_name,last_name\nada,Ada,L\nbob,Bob,M\ncyd,Cyd,N\ndan,Dan,O\n")
    assert course("--course", root, "roster", tmp_path / "class.csv", book=book) == 0
    submit(inbox, "ada", root, week1, RIGHT)
    submit(inbox, "bob", root, week1, WRONG)
    assert course("--course", root, "autograde", inbox, book=book) == 0
    assert (root / "gradebook.db").is_file() and (root / "grades.csv").is_file()
    manual_grade(root, week1, "ada", 1)
    after_week1 = autograded_mtimes(root)

    week2 = tiny_assignment(book, 2, "tripling")
    released_week1 = released(root, week1).stat().st_mtime
    assert course("--course", root, "student", book=book) == 0
    assert released(root, week1).stat().st_mtime == released_week1, "an unchanged assignment is not re-released"
    assert course("--course", root, "due", week2, "2020-01-06 17:00:00 UTC", book=book) == 0  # all of week 2 is late
    submit(inbox, "ada", root, week2, RIGHT)
    submit(inbox, "cyd", root, week2, RIGHT)  # joins in week 2; bob hands nothing in
    capsys.readouterr()
    assert course("--course", root, "autograde", inbox, book=book) == 0
    printed = capsys.readouterr().out
    assert "ada/02_tripling" in printed.split("unchanged")[0] and "ada/01_doubling" in printed.split("unchanged")[1]

    week3 = tiny_assignment(book, 3, "halving")  # released, not yet handed in by anyone: no column
    for command in (["student"], ["autograde", inbox], ["autograde"], ["feedback"], ["grades"]):
        assert course("--course", root, *command, book=book) == 0, command
    assert manual_state(root, week1, "ada") == (1, "Additivity, well said.")
    assert {k: v for k, v in autograded_mtimes(root).items() if k in after_week1} == after_week1
    term_grades(root, week1, week2)
    assert released(root, week3).is_file()
    grader_page_and_feedback(root, week1, week2, capsys)

    submit(inbox, "bob", root, week1, RIGHT)  # bob resubmits week 1: only that is regraded
    capsys.readouterr()
    assert course("--course", root, "autograde", inbox, book=book) == 0
    assert capsys.readouterr().out.split("unchanged")[0].count("/0") == 1
    assert sheet(root)["bob"][week1] == "2" and manual_state(root, week1, "ada") == (1, "Additivity, well said.")

    fixed = read(book / f"{week1}.ipynb")  # the instructor fixes week 1's hidden test: its work is graded again
    tests = next(c for c in fixed.cells if nbgrader(c).get("grade_id") == f"{week1}-ex1-tests")
    tests.source = tests.source.replace("assert double(-3) == -6", "assert double(-3) == -6 and double(0.5) == 1")
    nbformat.write(fixed, book / f"{week1}.ipynb")
    capsys.readouterr()
    assert course("--course", root, "autograde", book=book) == 0
    again = capsys.readouterr().out.split("graded again because the assignment's tests changed:")[1].split(":")[0]
    assert "ada/01_doubling" in again and "bob/01_doubling" in again and "02_tripling" not in again
    assert manual_state(root, week1, "ada") == (1, "Additivity, well said.")


def term_grades(root: Path, week1: str, week2: str) -> None:
    """The grade sheet of the scripted term: max points first, the whole class list, what is ungraded or late."""
    grades = sheet(root)
    assert list(grades) == ["(max points)", "ada", "bob", "cyd", "dan"]  # dan is on the list, never handed in
    assert grades["(max points)"] == {week1: "3", week2: "3", "total": "6", "ungraded": "", "late": "", "stopped": ""}
    # 2 + manual 1; week 2's written answer awaits its grader, and came after the due date
    assert grades["ada"] == {week1: "3", week2: "2", "total": "5", "ungraded": week2, "late": week2, "stopped": ""}
    assert grades["bob"] == {week1: "0", week2: "0", "total": "0", "ungraded": week1, "late": "", "stopped": ""}
    assert grades["cyd"] == {week1: "0", week2: "2", "total": "2", "ungraded": week2, "late": week2, "stopped": ""}
    assert grades["dan"] == {week1: "0", week2: "0", "total": "0", "ungraded": "", "late": "", "stopped": ""}


def grader_page_and_feedback(root: Path, week1: str, week2: str, capsys) -> None:
    """Formgrader shows the grader the model answer and rubric; feedback does not carry them, and waits (unless
    forced) until every written answer of the submission is graded."""
    notes = [c for c in read(root / "autograded" / "ada" / week1 / f"{week1}.ipynb").cells
             if GRADER_NOTES_TAG in c.metadata.get("tags", [])]
    assert len(notes) == 1 and "**Rubric** (1 point)" in notes[0].source
    feedback = (root / "feedback" / "ada" / week1 / f"{week1}.html").read_text()
    assert "Additivity, well said." in feedback and "Rubric" not in feedback and "For the grader only" not in feedback
    page = formgrader_page(root, "ada", week1)
    assert page.count("For the grader only") == 1 and "Rubric" in page and "states additivity" in page
    assert not (root / "feedback" / "ada" / week2).exists()
    capsys.readouterr()
    assert course("--course", root, "feedback") == 0
    held = capsys.readouterr().out.split("held back")[1]
    assert "ada/02_tripling" in held and "bob/01_doubling" in held and "ada/01_doubling" not in held
    assert course("--course", root, "feedback", "--force") == 0
    assert (root / "feedback" / "ada" / week2 / f"{week2}.html").is_file()


@pytest.mark.slow
@as_ordinary_user("/srv")
def test_bad_batch_grades_the_good_and_names_the_bad(tmp_path, capsys):
    book, root, inbox = tmp_path / "book", tmp_path / "course", tmp_path / "inbox"
    book.mkdir()
    stem = tiny_assignment(book, 1, "doubling")
    assert course("--course", root, "student", book=book) == 0
    submit(inbox, "ada", root, stem, RIGHT)
    (inbox / "bob" / stem).mkdir(parents=True)  # an empty folder
    submit(inbox, "cyd", root, stem, RIGHT, name=f"{stem} (1).ipynb")  # as LMS downloads name them
    submit(inbox, "dan", root, stem, "def double(x):\n    raise RuntimeError('crash')")
    (inbox / "eve" / stem).mkdir(parents=True)
    (inbox / "eve" / stem / f"{stem}.ipynb").write_text("{ not a notebook")
    (inbox / "fay" / "99_nonexistent").mkdir(parents=True)
    corrupt(submit(inbox, "gus", root, stem, RIGHT))  # nbgrader itself fails on it
    top = submit(inbox, "hal", root, stem, RIGHT)  # a cell of the notebook (no exercise's) raises
    nb = read(top)
    nb.cells.insert(0, nbformat.v4.new_code_cell("import a_module_nobody_installed"))
    nbformat.write(nb, top)
    capsys.readouterr()
    # one at a time here (the scripted term grades on the default workers): both ways, as an ordinary user
    assert course("--course", root, "autograde", inbox, "--jobs", "1", book=book) == 1, "something could not be graded"
    printed = capsys.readouterr().out
    bad = printed.split("COULD NOT GRADE")[1]
    assert "eve/01_doubling:" in bad and "fay/99_nonexistent" in bad and "bob/" not in bad
    gus = bad.split("gus/01_doubling: nbgrader autograde failed:")[1].splitlines()[0]
    assert "KeyError: 'grade_id'" in gus and "Please see" not in gus, gus  # nbgrader's error, not its last line
    assert "nothing handed in (empty folders, skipped):\n  bob/01_doubling" in printed
    assert f"cyd/01_doubling: graded {stem} (1).ipynb as {stem}.ipynb" in printed
    check = printed.split("GRADED, BUT CHECK BY HAND")[1].split("COULD NOT GRADE")[0]
    assert "hal/01_doubling: cell 0 (not an exercise) raised ModuleNotFoundError" in check and "dan/" not in check
    grades = sheet(root)
    assert grades["ada"][stem] == grades["cyd"][stem] == grades["hal"][stem] == "2" and grades["dan"][stem] == "0"
    assert "bob" not in grades and "eve" not in grades

    shutil.rmtree(root / "submitted" / "gus")  # the instructor takes gus's broken file out (it fails until then)
    later = tmp_path / "week2"  # a later week's inbox, with an empty folder again: not a failure
    submit(later, "ada", root, stem, RIGHT)
    (later / "bob" / stem).mkdir(parents=True)
    assert course("--course", root, "autograde", later, "--jobs", "1", book=book) == 0


def corrupt(path: Path) -> None:
    """Take the grade_id off the test cell's nbgrader metadata, as a student's editor might."""
    nb = read(path)
    for cell in nb.cells:
        if nbgrader(cell).get("grade_id", "").endswith("-tests"):
            del cell.metadata["nbgrader"]["grade_id"]
    nbformat.write(nb, path)


def exercise_scores(root: Path) -> list[dict]:
    with open(root / "exercises.csv", newline="") as f:
        return list(csv.DictReader(f))


@pytest.mark.slow
def test_workers_and_dask_grade_like_one_at_a_time(tmp_path):
    """JOBS=2 worker processes and a Dask LocalCluster (one coordinator writes the gradebook) give the grades of
    grading one submission at a time, grader notes included."""
    book, base, inbox = tmp_path / "book", tmp_path / "base", tmp_path / "inbox"
    book.mkdir()
    stem = tiny_assignment(book, 1, "doubling")
    assert course("--course", base, "student", book=book) == 0
    for student, code in (("ada", RIGHT), ("bob", WRONG), ("cyd", "def double(x):\n    raise RuntimeError('crash')")):
        submit(inbox, student, base, stem, code)
    graded = {}
    for mode in (("--jobs", "1"), ("--jobs", "2"), ("--jobs", "2", "--dask", "local")):
        root = tmp_path / "-".join(mode).strip("-")
        shutil.copytree(base, root)
        assert course("--course", root, "autograde", inbox, *mode, book=book) == 0, mode
        notes = [c for c in read(root / "autograded" / "bob" / stem / f"{stem}.ipynb").cells
                 if GRADER_NOTES_TAG in c.metadata.get("tags", [])]
        graded[" ".join(mode)] = (exercise_scores(root), sheet(root), len(notes))
    one = graded["--jobs 1"]
    assert one[1]["ada"][stem] == "2" and one[1]["bob"][stem] == one[1]["cyd"][stem] == "0" and one[2] == 1
    for mode, got in graded.items():
        assert got == one, f"{mode} grades differently from --jobs 1:\n{got}\n{one}"


def test_a_second_command_on_the_course_is_refused(tmp_path, capsys):
    root = tmp_path / "course"
    with Course(root).lock():
        assert course("--course", root, "autograde") == 2
        assert course("--course", root, "grades") == 2
    err = capsys.readouterr().err
    assert f"{root} is in use by python -m attncourse (pid {os.getpid()}" in err and "wait until it has finished" in err


def test_lms_zip_is_collected_with_nbgrader_zip_collect(tmp_path, capsys):
    book, root = tmp_path / "book", tmp_path / "course"
    book.mkdir()
    stem = tiny_assignment(book, 1, "doubling")
    assert course("--course", root, "student", book=book) == 0
    archive = tmp_path / "download.zip"
    with zipfile.ZipFile(archive, "w") as zipped:  # as Canvas names a download's files; bob's came in late
        for name in (f"ada_101_9001_{stem}.ipynb", f"bob_LATE_102_9002_{stem}.ipynb"):
            zipped.write(released(root, stem), name)
    capsys.readouterr()
    assert course("--course", root, "import-zip", archive, stem, book=book) == 0
    for student in ("ada", "bob"):
        assert (root / "submitted" / student / stem / f"{stem}.ipynb").read_bytes() == released(root, stem).read_bytes()
    assert "make autograde grades them" in capsys.readouterr().out


def test_scan_normalises_only_unambiguous_names(tmp_path):
    (tmp_path / "ada" / "01_x").mkdir(parents=True)
    for name in ("01_x (1).ipynb", "01_x (2).ipynb"):
        nbformat.write(nbformat.v4.new_notebook(), tmp_path / "ada" / "01_x" / name)
    batch = scan(tmp_path, ["01_x"])
    assert batch.found == {} and "expected one notebook named 01_x.ipynb" in batch.refused[0]


# --- the hidden setup cell that installs attnlib on Colab ---------------------------------------

def setup_cell(stem: str):
    return repository.setup_cell(read(BOOK / f"{stem}.ipynb"))  # the first code cell, hidden, or an error


@pytest.mark.parametrize("stem", STEMS)
def test_setup_cell_is_the_one_course_site_writes(stem):
    """The cell's text has one home, attncourse/repository.py's setup_source; make student writes it into every
    chapter."""
    assert setup_cell(stem).source == repository.setup_source(REPOSITORY_URL), f"{stem}: run `make student`"


def test_stamp_writes_the_setup_cell_into_a_new_chapter_and_refuses_other_first_cells(tmp_path):
    (tmp_path / "book").mkdir()
    (tmp_path / "_config.yml").write_text("repository:\n  url: https://github.com/someone/fork\n")
    for name in repository.STAMPED_FILES:
        shutil.copy(ROOT / name, tmp_path / name)
    empty = nbformat.v4.new_code_cell("", metadata={"tags": ["remove-cell"]})
    nbformat.write(nbformat.v4.new_notebook(cells=[nbformat.v4.new_markdown_cell("# 9. New"), empty]),
                   tmp_path / "book" / "09_new.ipynb")
    repository.stamp(tmp_path)
    assert read(tmp_path / "book" / "09_new.ipynb").cells[1].source == repository.setup_source("https://github.com/someone/fork")
    imports = nbformat.v4.new_code_cell("import torch", metadata={"tags": ["remove-cell"]})
    nbformat.write(nbformat.v4.new_notebook(cells=[imports]), tmp_path / "book" / "10_other.ipynb")
    with pytest.raises(ValueError, match="expected the first code cell to be the setup cell"):
        repository.stamp(tmp_path)
    assert read(tmp_path / "book" / "10_other.ipynb").cells[0].source == "import torch"


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


# --- the built site is the student edition ------------------------------------------------------

class _Text(HTMLParser):
    """The text of an HTML page (tags dropped, entities decoded), as a reader or a scraper sees it."""

    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.parts: list[str] = []

    def handle_data(self, data):
        self.parts.append(data)


def page_lines(page: str) -> set[str]:
    parser = _Text()
    parser.feed(page)
    return {line.strip() for line in html.unescape("".join(parser.parts)).splitlines()}


def chapter_page(stem: str) -> str:
    if not HTML.is_dir():
        pytest.fail(f"{HTML} is missing: run `make book` first (make test does)")
    page = HTML / "book" / f"{stem}.html"
    assert page.is_file(), f"{page} is missing: is book/{stem} in _toc.yml? run `make book`"
    return page.read_text()


@pytest.mark.parametrize("stem", STEMS)
def test_student_edition_page_and_downloads_hold_no_solution(stem):
    secret = withheld_lines(read(BOOK / f"{stem}.ipynb"))
    page = chapter_page(stem)
    leaked = sorted(secret & page_lines(page))
    assert leaked == [], f"{stem}.html shows solution or hidden-test lines: {leaked}"
    for marker in ("BEGIN SOLUTION", "END SOLUTION", "HIDDEN TESTS"):
        assert marker not in page
    assert "raise NotImplementedError()" in html.unescape(re.sub(r"<[^>]+>", "", page))
    for download in HTML.rglob("*.ipynb"):
        leaked = sorted(secret & notebook_lines(read(download)))
        assert leaked == [], f"{download.relative_to(HTML)} holds {stem}'s solution lines: {leaked}"
    assert (HTML / "_sources" / "book" / f"{stem}.ipynb").read_bytes() == (RELEASE_DIR / f"{stem}.ipynb").read_bytes()


@pytest.mark.parametrize("stem", STEMS)
def test_launch_buttons_open_the_student_release(stem):
    page = chapter_page(stem)
    colab = f"https://colab.research.google.com/github/{REPO}/blob/main/course/release/{stem}.ipynb"
    binder = f"https://mybinder.org/v2/gh/{REPO}/main?urlpath=lab/tree/course/release/{stem}.ipynb"
    assert f'href="{colab}"' in page
    assert f'href="{binder}"' in page
    assert re.search(rf'href="(\.\./)+_sources/book/{stem}\.ipynb"', page), "no .ipynb download button"
    setup_comment = setup_cell(stem).source.splitlines()[0].lstrip("# ")
    assert setup_comment not in page, "the setup cell must be hidden on the website"
